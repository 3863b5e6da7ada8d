package server_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/api"
	"github.com/codecell-dev/codecell/client"
	"github.com/codecell-dev/codecell/internal/testenv"
	"github.com/codecell-dev/codecell/internal/workspace"
	"github.com/codecell-dev/codecell/server"
	"github.com/codecell-dev/codecell/session"
	_ "github.com/codecell-dev/codecell/tier/local"
	"github.com/codecell-dev/codecell/tier/native"
)

func TestMain(m *testing.M) {
	codecell.Init()
	os.Exit(testenv.Run(m))
}

const token = "test-token-5f1c"

// tester is the principal of token.
var tester = &session.Principal{Name: "tester"}

// fixture is a service over real HTTP, with a token.
type fixture struct {
	srv   *server.Server
	store *session.Store
	http  *httptest.Server
	c     *client.Client
}

func newFixture(t *testing.T, configure func(*server.Server)) *fixture {
	t.Helper()
	testenv.RequireNative(t, native.Default.Probe)
	return newFixtureOn(t, &codecell.Engine{Tier: "native", Tiers: []codecell.Tier{&native.Tier{Pool: -1}}}, configure)
}

// newLocalFixture is a fixture whose programs run on the local tier: for
// what the service does around a program (authentication, routing, limits
// of running programs, streams), which every host can show.
func newLocalFixture(t *testing.T, configure func(*server.Server)) *fixture {
	t.Helper()
	return newFixtureOn(t, &codecell.Engine{Tier: "local"}, configure)
}

// newRefusingFixture is a fixture whose default tier isolates and runs
// nothing: for what the service refuses before a program runs (routing,
// bad requests, limits), which every host can show. A program that reaches
// the tier fails the test.
func newRefusingFixture(t *testing.T, configure func(*server.Server)) *fixture {
	t.Helper()
	return newFixtureOn(t, &codecell.Engine{Tier: "refusing", Tiers: []codecell.Tier{refusingTier{t}}}, configure)
}

// refusingTier is an isolating tier that must never be asked to run a
// program.
type refusingTier struct{ t *testing.T }

func (refusingTier) Name() string    { return "refusing" }
func (refusingTier) Isolating() bool { return true }
func (refusingTier) Probe() error    { return nil }
func (refusingTier) View(ws, runner string) codecell.View {
	return codecell.View{Workspace: ws, Runner: runner}
}
func (r refusingTier) Run(context.Context, *codecell.Job) (*codecell.Outcome, error) {
	r.t.Error("the tier was asked to run a program that should have been refused")
	return nil, errors.New("this tier runs nothing")
}

func newFixtureOn(t *testing.T, eng *codecell.Engine, configure func(*server.Server)) *fixture {
	t.Helper()
	store, err := session.NewStore(t.TempDir(), time.Hour, 20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	eng.Tools, eng.TempDir = &codecell.Toolbox{}, t.TempDir()
	srv := &server.Server{Engine: eng, Sessions: store, Tokens: []server.Token{{Token: token, Principal: *tester}}, Version: "test"}
	if configure != nil {
		configure(srv)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return &fixture{srv: srv, store: store, http: ts, c: client.New(ts.URL, token)}
}

func (f *fixture) session(t *testing.T, spec api.SessionSpec) *api.Session {
	t.Helper()
	ses, err := f.c.CreateSession(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	return ses
}

// raw sends a request as is and returns the status and body.
func (f *fixture) raw(t *testing.T, method, path string, body io.Reader, header ...string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, f.http.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

func envelopeOf(t *testing.T, body []byte) codecell.Envelope {
	t.Helper()
	var env codecell.Envelope
	if err := json.Unmarshal(body, &env); err != nil || env.Code == "" || env.Message == "" || len(env.Hints) == 0 {
		t.Fatalf("the body is not an envelope with a message and hints: %s (%v)", body, err)
	}
	return env
}

// The whole job, as a user does it: a session, files uploaded (one, and a
// directory as a tar), Python that reads them and draws a plot, the plot
// downloaded, the workspace listed with sha256, the session deleted.
func TestSessionFilesPlot(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	ses := f.session(t, api.SessionSpec{Limits: &api.Limits{Timeout: api.Duration(60 * time.Second)}})
	if !strings.HasPrefix(ses.ID, "ses_") || ses.ExpiresAt.Before(time.Now()) {
		t.Fatalf("session: %+v", ses)
	}
	points := "x,y\n1,1\n2,4\n3,9\n4,16\n"
	if got, err := f.c.Upload(ctx, ses.ID, "data/points.csv", strings.NewReader(points)); err != nil || got.Path != "data/points.csv" ||
		got.Type != "file" || got.Size != int64(len(points)) || got.SHA256 != sha([]byte(points)) || got.Mode != 0o644 {
		t.Fatalf("the upload: %+v, %v", got, err)
	}
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	for name, body := range map[string]string{"conf/title.txt": "squares", "conf/scale.txt": "2"} {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
		tw.Write([]byte(body))
	}
	tw.Close()
	if got, err := f.c.UploadArchive(ctx, ses.ID, "", &tb); err != nil || got.Entries != 2 {
		t.Fatalf("tar upload: %+v, %v", got, err)
	}
	code := `
import csv
import matplotlib.pyplot as plt
rows = list(csv.DictReader(open("data/points.csv")))
title = open("conf/title.txt").read()
scale = int(open("conf/scale.txt").read())
xs = [int(r["x"]) for r in rows]
ys = [int(r["y"]) * scale for r in rows]
plt.plot(xs, ys)
plt.title(title)
plt.savefig("plot.png")
{"points": len(rows), "max": max(ys), "title": title}
`
	res, err := f.c.Execute(ctx, ses.ID, api.Execution{Language: "python", Code: code})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != codecell.StatusSuccess || string(res.Value) != `{"points": 4, "max": 32, "title": "squares"}` && string(res.Value) != `{"points":4,"max":32,"title":"squares"}` {
		t.Fatalf("result: %s %s\n%s", res.Status, res.Value, res.Stderr)
	}
	if res.Tier != "native" {
		t.Fatalf("tier %q", res.Tier)
	}
	// The Result names the plot's media type, from its content.
	if len(res.Files) != 1 || res.Files[0].Path != "plot.png" || res.Files[0].MIME != "image/png" {
		t.Fatalf("files %+v", res.Files)
	}
	rc, err := f.c.Download(ctx, ses.ID, "plot.png")
	if err != nil {
		t.Fatal(err)
	}
	png, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) || len(png) < 1000 {
		t.Fatalf("the plot is not a PNG: %d bytes %q", len(png), png[:min(len(png), 16)])
	}
	files, err := f.c.Files(ctx, ses.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	var plot *api.File
	for i := range files {
		if files[i].Path == "plot.png" {
			plot = &files[i]
		}
	}
	if plot == nil || plot.Size != int64(len(png)) || plot.SHA256 != sha(png) || plot.Type != "file" {
		t.Fatalf("the listing's plot.png: %+v (downloaded %d bytes, sha256 %s)\n%+v", plot, len(png), sha(png), files)
	}
	// A second execution sees the first one's files.
	res, err = f.c.Execute(ctx, ses.ID, api.Execution{Language: "bash", Code: "ls data conf plot.png | tr '\\n' ' '"})
	if err != nil || res.Status != codecell.StatusSuccess || !strings.Contains(res.Stdout, "points.csv") {
		t.Fatalf("second execution: %v %+v", err, res)
	}
	// A directory downloads as a tar.
	rc, err = f.c.Download(ctx, ses.ID, "conf")
	if err != nil {
		t.Fatal(err)
	}
	names := tarNames(t, rc)
	rc.Close()
	if strings.Join(names, ",") != "scale.txt,title.txt" {
		t.Fatalf("the conf tar holds %v", names)
	}
	got, err := f.c.Session(ctx, ses.ID)
	if err != nil || got.Executions != 2 || got.Running {
		t.Fatalf("session after two executions: %+v, %v", got, err)
	}
	var total int64
	for _, file := range files {
		total += file.Size
	}
	// The workspace costs at least its content, and a block per entry at
	// least.
	if got.WorkspaceBytes < total || got.WorkspaceBytes < int64(len(files))*workspace.InodeCost || got.WorkspaceQuota != codecell.DefaultLimits.Workspace {
		t.Fatalf("the session says its workspace holds %d of %d bytes; the listing adds up to %d", got.WorkspaceBytes, got.WorkspaceQuota, total)
	}
	if err := f.c.DeleteSession(ctx, ses.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.Session(ctx, ses.ID); client.StatusOf(err) != http.StatusNotFound || client.CodeOf(err) != server.CodeSessionNotFound {
		t.Fatalf("a deleted session: %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(firstWorkspace(t, f))); len(entries) != 0 {
		t.Fatalf("the deleted session left %v", entries)
	}
}

// firstWorkspace is a path inside the store's directory.
func firstWorkspace(t *testing.T, f *fixture) string {
	ses, err := f.store.Create(tester, session.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_ = f.store.Delete(tester, ses.ID)
	return ses.Workspace
}

func tarNames(t *testing.T, r io.Reader) []string {
	t.Helper()
	var names []string
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeDir {
			names = append(names, h.Name)
		}
	}
}

func TestAuth(t *testing.T) {
	f := newLocalFixture(t, nil)
	for _, auth := range []string{"", "Bearer wrong", "Basic " + token, "Bearer " + token + "x"} {
		req, _ := http.NewRequest("GET", f.http.URL+"/v1/sessions", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || envelopeOf(t, body).Code != server.CodeUnauthorized {
			t.Errorf("Authorization %q: %d %s", auth, resp.StatusCode, body)
		}
		// The hints name the variables each side reads.
		env := envelopeOf(t, body)
		if hints := strings.Join(env.Hints, " "); !strings.Contains(hints, "reads the token from CODECELL_TOKEN;") || !strings.Contains(hints, "CODECELL_TOKENS where it runs") {
			t.Errorf("the 401's hints: %q", hints)
		}
		// And whether a token came at all.
		if none := strings.HasSuffix(env.Message, "this request has none"); none != (auth == "") {
			t.Errorf("Authorization %q: the 401 says %q", auth, env.Message)
		}
	}
	for _, path := range []string{"/v1/executions", "/metrics"} {
		resp, err := http.Post(f.http.URL+path, "application/json", strings.NewReader(`{"language":"python","code":"1"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("POST %s without a token: %d", path, resp.StatusCode)
		}
	}
	resp, err := http.Get(f.http.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	var health map[string]any
	err = json.NewDecoder(resp.Body).Decode(&health)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || err != nil || health["status"] != "ok" {
		t.Errorf("/healthz without a token: %d %v %v", resp.StatusCode, health, err)
	}
	// Without a token it says the server lives, and nothing of what it holds.
	for _, k := range []string{"running", "max_running", "sessions"} {
		if _, ok := health[k]; ok {
			t.Errorf("/healthz without a token says %s: %v", k, health)
		}
	}
	// With one, the executions running.
	if h, err := f.c.Health(context.Background()); err != nil || h["running"] == nil {
		t.Errorf("/healthz with a token: %v %v", h, err)
	}
}

// Past the maximum of running executions a request is refused at once with
// 429 and Retry-After, and the running one is unharmed.
func TestOverload(t *testing.T) {
	f := newLocalFixture(t, func(s *server.Server) { s.MaxRunning = 1 })
	ctx := context.Background()
	done := make(chan *codecell.Result, 1)
	go func() {
		res, err := f.c.Execute(ctx, "", api.Execution{Language: "python", Code: "import time\ntime.sleep(3)\n'slow'"})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	waitRunning(t, f, 1)
	start := time.Now()
	_, err := f.c.Execute(ctx, "", api.Execution{Language: "python", Code: "'fast'"})
	var e *client.Error
	if !errors.As(err, &e) || e.Status != http.StatusTooManyRequests || e.Code() != server.CodeTooManyExecutions || e.RetryAfter < time.Second || !e.Envelope.Retryable {
		t.Fatalf("the second execution: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the refusal took %v: it must not wait for a slot", d)
	}
	res := <-done
	if res == nil || res.Status != codecell.StatusSuccess || string(res.Value) != `"slow"` {
		t.Fatalf("the running execution: %+v", res)
	}
	if res, err := f.c.Execute(ctx, "", api.Execution{Language: "python", Code: "'fast'"}); err != nil || string(res.Value) != `"fast"` {
		t.Fatalf("after the slot freed: %v %+v", err, res)
	}
}

func waitRunning(t *testing.T, f *fixture, n float64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		h, err := f.c.Health(context.Background())
		if err == nil && h["running"] == n {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no execution started")
}

// Output streams as Server-Sent Events while the program runs, then the
// Result.
func TestStream(t *testing.T) {
	f := newLocalFixture(t, nil)
	code := "import sys, time\nfor i in range(3):\n    print('line', i, flush=True)\n    time.sleep(0.3)\nprint('oops', file=sys.stderr)\n'done'"
	var mu sync.Mutex
	var events []string
	var firstAt time.Time
	start := time.Now()
	res, err := f.c.Stream(context.Background(), "", api.Execution{Language: "python", Code: code}, func(stream, text string) {
		mu.Lock()
		defer mu.Unlock()
		if firstAt.IsZero() {
			firstAt = time.Now()
		}
		events = append(events, stream+":"+text)
	})
	if err != nil {
		t.Fatal(err)
	}
	end := time.Now()
	if res.Status != codecell.StatusSuccess || string(res.Value) != `"done"` || res.Stdout != "line 0\nline 1\nline 2\n" {
		t.Fatalf("result: %+v", res)
	}
	joined := strings.Join(events, "|")
	if !strings.Contains(joined, "stdout:line 0\n") || !strings.Contains(joined, "stderr:oops\n") {
		t.Fatalf("events: %q", events)
	}
	if firstAt.Sub(start) > end.Sub(start)-500*time.Millisecond {
		t.Errorf("the first output came %v after the start and the end %v after: it was not streamed", firstAt.Sub(start), end.Sub(start))
	}
}

// A program that prints without end streams no more than the output limit.
func TestStreamIsCapped(t *testing.T) {
	f := newLocalFixture(t, nil)
	streamed := 0
	res, err := f.c.Stream(context.Background(), "", api.Execution{Language: "python",
		Code: "import sys\nfor _ in range(300):\n    sys.stdout.write('x' * 10000)\n", Limits: &api.Limits{Stdout: 50_000}},
		func(stream, text string) { streamed += len(text) })
	if err != nil {
		t.Fatal(err)
	}
	if !res.StdoutTruncated || streamed > 50_000 || streamed < 40_000 {
		t.Fatalf("streamed %d bytes, truncated %v", streamed, res.StdoutTruncated)
	}
}

func sha(b []byte) string { return fmt.Sprintf("%x", sha256sum(b)) }
