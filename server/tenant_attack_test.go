package server_test

// Attacks of one token holder on another's sessions: bob, holding a token
// of his own, tries every route on alice's sessions, forged and mangled
// tokens, path tricks, her MCP session names and MCP session id, floods of
// sessions and of MCP calls. Each is harmless if it gets through: the
// traffic goes only to the server the test started, the only files written
// are in the sessions' workspaces the test made, and the floods are bounded
// in count. A broken defence fails a test: alice's files and sessions are
// checked from her side after each try.

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/api"
	"github.com/codecell-dev/codecell/client"
	"github.com/codecell-dev/codecell/internal/testenv"
	"github.com/codecell-dev/codecell/mcp"
	"github.com/codecell-dev/codecell/server"
	"github.com/codecell-dev/codecell/session"
	"github.com/codecell-dev/codecell/tier/native"
)

// The tokens of the tenants' server: two users and an admin.
var tenantTokens = map[string]string{
	"alice": "alice-tok-7d2f9c0b5e",
	"bob":   "bob-tok-51aa0e4c93",
	"admin": "admin-tok-c3e8b4f017",
}

// tenants is codecell serve in small, wired as the command wires it: the
// REST API with the three tokens, MCP at /mcp taking the REST API's
// execution slots, every log line (the server's, MCP's, the engine's) in
// logs. Programs can call hold, which waits until the test releases it.
type tenants struct {
	srv   *server.Server
	store *session.Store
	http  *httptest.Server
	logs  *syncBuffer
	hold  *holdTool
}

// newTenants starts the server; configure may set its fields and the
// principals' limits (srv.Tokens) before it serves.
func newTenants(t *testing.T, configure func(*server.Server)) *tenants {
	t.Helper()
	testenv.RequireNative(t, native.Default.Probe)
	store, err := session.NewStore(t.TempDir(), time.Hour, 20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	logs := &syncBuffer{}
	logger := slog.New(session.LogHandler(slog.NewJSONHandler(logs, nil)))
	hold := &holdTool{started: make(chan struct{}, 64), release: make(chan struct{})}
	box := &codecell.Toolbox{}
	if err := box.Add(codecell.Tool{Name: "hold", Description: "waits until the test releases it", Call: hold.call}); err != nil {
		t.Fatal(err)
	}
	eng := &codecell.Engine{Tier: "native", Tools: box, TempDir: t.TempDir(), Logger: logger,
		Tiers: []codecell.Tier{&native.Tier{Pool: -1}}}
	srv := &server.Server{Engine: eng, Sessions: store, Logger: logger, Version: "test", MaxRunning: 4}
	for _, name := range []string{"alice", "bob", "admin"} {
		srv.Tokens = append(srv.Tokens, server.Token{Token: tenantTokens[name],
			Principal: session.Principal{Name: name, Admin: name == "admin"}})
	}
	if configure != nil {
		configure(srv)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	m := &mcp.Server{Engine: eng, Sessions: store, Logger: logger}
	srv.MCP = m.HTTPHandler(ctx)
	m.Admit = srv.Admit
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	// Whatever a test left holding is let go before the server closes.
	t.Cleanup(hold.releaseAll)
	return &tenants{srv: srv, store: store, http: ts, logs: logs, hold: hold}
}

func (ts *tenants) client(who string) *client.Client {
	return client.New(ts.http.URL, tenantTokens[who])
}

// raw sends a request with who's token, and returns the status, headers and
// body.
func (ts *tenants) raw(t *testing.T, who, method, path string, body io.Reader, header ...string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, ts.http.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tenantTokens[who])
	for i := 0; i+1 < len(header); i += 2 {
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

// mcp connects to /mcp with who's token.
func (ts *tenants) mcp(t *testing.T, who string) *sdk.ClientSession {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "tenant-test", Version: "1"}, nil)
	transport := &sdk.StreamableClientTransport{Endpoint: ts.http.URL + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{tenantTokens[who], http.DefaultTransport}}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, transport, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// execute calls MCP's execute and returns its Result, refusals included.
func mcpExecute(t *testing.T, cs *sdk.ClientSession, args map[string]any) *codecell.Result {
	t.Helper()
	res, err := mcpCall(cs, args)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func mcpCall(cs *sdk.ClientSession, args map[string]any) (*codecell.Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "execute", Arguments: args})
	if err != nil {
		return nil, err
	}
	b, _ := json.Marshal(r.StructuredContent)
	var res codecell.Result
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// holdTool is a tool that tells the test it was called, and returns when the
// test releases it: a program that calls it is known to be running.
type holdTool struct {
	started chan struct{}
	release chan struct{}
	once    sync.Once
}

func (h *holdTool) call(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
	h.started <- struct{}{}
	select {
	case <-h.release:
		return json.RawMessage(`"released"`), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (h *holdTool) releaseAll() { h.once.Do(func() { close(h.release) }) }

// waitStarted waits for n programs to be inside hold.
func (h *holdTool) waitStarted(t *testing.T, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		select {
		case <-h.started:
		case <-time.After(time.Minute):
			t.Fatalf("%d of %d programs reached hold", i, n)
		}
	}
}

const holdPython = "r = await call_tool('hold', {})\nr"

// Everything bob can name of alice's sessions answers him exactly as a
// session that does not exist does, on every route, for a session made
// over REST and one named over MCP; her sessions are as she left them. A
// list holds one's own sessions; the admin's holds them all, and the admin
// reads and deletes but does not change another's session.
func TestCrossTenantREST(t *testing.T) {
	ts := newTenants(t, nil)
	ctx := context.Background()
	alice, bob, admin := ts.client("alice"), ts.client("bob"), ts.client("admin")

	made, err := alice.CreateSession(ctx, api.SessionSpec{})
	if err != nil {
		t.Fatal(err)
	}
	if made.Owner != "alice" {
		t.Fatalf("a session alice made says its owner is %q", made.Owner)
	}
	if _, err := alice.Upload(ctx, made.ID, "dir/secret.txt", strings.NewReader("alice's secret")); err != nil {
		t.Fatal(err)
	}
	if r := mcpExecute(t, ts.mcp(t, "alice"), map[string]any{"session": "notes", "language": "bash",
		"code": "mkdir -p dir && echo alice > dir/secret.txt"}); r.Status != codecell.StatusSuccess {
		t.Fatalf("alice's MCP run: %+v", r)
	}
	var named api.Session
	list, err := alice.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list {
		if s.Name == "notes" {
			named = s
		}
	}
	if len(list) != 2 || named.ID == "" || named.Owner != "alice" || named.ID == "notes" {
		t.Fatalf("alice lists %+v", list)
	}
	bobs, err := bob.CreateSession(ctx, api.SessionSpec{})
	if err != nil {
		t.Fatal(err)
	}

	missing := "ses_" + strings.Repeat("0", 32)
	for _, target := range []struct{ what, id string }{{"made over REST", made.ID}, {"named over MCP", named.ID}} {
		for _, rt := range crossTenantRoutes {
			t.Run(target.what+"/"+rt.name, func(t *testing.T) {
				path := strings.ReplaceAll(rt.path, "{id}", target.id)
				status, h, body := ts.raw(t, "bob", rt.method, path, rt.body(), rt.header...)
				wantStatus, wantH, wantBody := ts.raw(t, "bob", rt.method, strings.ReplaceAll(rt.path, "{id}", missing), rt.body(), rt.header...)
				if status != http.StatusNotFound || envelopeOf(t, body).Code != server.CodeSessionNotFound {
					t.Fatalf("bob's %s %s on alice's session: %d %s", rt.method, path, status, body)
				}
				if status != wantStatus || string(body) != string(wantBody) || h.Get("Content-Type") != wantH.Get("Content-Type") {
					t.Fatalf("bob's answer on alice's session differs from one on a missing session:\n%d %s\n%d %s", status, body, wantStatus, wantBody)
				}
			})
		}
	}
	// Alice's sessions are as she left them.
	for _, id := range []string{made.ID, named.ID} {
		got, err := alice.Session(ctx, id)
		if err != nil {
			t.Fatalf("alice's own session after bob's tries: %v", err)
		}
		files, err := alice.Files(ctx, id, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if f.Path != "dir" && f.Path != "dir/secret.txt" {
				t.Errorf("bob left %s in alice's session", f.Path)
			}
		}
		if len(files) != 2 {
			t.Errorf("alice's files now: %+v", files)
		}
		if id == made.ID && got.Executions != 0 {
			t.Errorf("alice's session ran %d executions", got.Executions)
		}
	}

	// Each lists its own; the admin lists all, with their owners.
	if list, err := bob.Sessions(ctx); err != nil || len(list) != 1 || list[0].ID != bobs.ID || list[0].Owner != "bob" {
		t.Errorf("bob lists %+v %v", list, err)
	}
	all, err := admin.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	owners := map[string]string{}
	for _, s := range all {
		owners[s.ID] = s.Owner
	}
	if len(all) != 3 || owners[made.ID] != "alice" || owners[named.ID] != "alice" || owners[bobs.ID] != "bob" {
		t.Errorf("the admin lists %+v", all)
	}

	// The admin reads alice's session and its files...
	for _, rt := range crossTenantRoutes {
		path := strings.ReplaceAll(rt.path, "{id}", made.ID)
		if rt.method == "DELETE" && rt.name == "delete the session" {
			continue
		}
		status, _, body := ts.raw(t, "admin", rt.method, path, rt.body(), rt.header...)
		if rt.admin {
			if status/100 != 2 {
				t.Errorf("the admin's %s %s: %d %s", rt.method, path, status, body)
			}
			continue
		}
		// ...and changes nothing in it.
		if status != http.StatusForbidden || envelopeOf(t, body).Code != server.CodeNotOwner {
			t.Errorf("the admin's %s %s: %d %s, want 403 %s", rt.method, path, status, body, server.CodeNotOwner)
		}
	}
	if files, err := alice.Files(ctx, made.ID, ""); err != nil || len(files) != 2 {
		t.Errorf("after the admin's tries alice has %+v %v", files, err)
	}
	// ...and ends it.
	if err := admin.DeleteSession(ctx, made.ID); err != nil {
		t.Fatalf("the admin's delete: %v", err)
	}
	if _, err := alice.Session(ctx, made.ID); client.CodeOf(err) != server.CodeSessionNotFound {
		t.Errorf("alice's session after the admin deleted it: %v", err)
	}
	// Alice deletes her own; bob's is still there.
	if err := alice.DeleteSession(ctx, named.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Session(ctx, bobs.ID); err != nil {
		t.Errorf("bob's session: %v", err)
	}
}

// crossTenantRoutes are every REST route on a session, with a body that
// would change it. admin says whether an admin may use it on another's
// session.
var crossTenantRoutes = []struct {
	name, method, path string
	body               func() io.Reader
	header             []string
	admin              bool
}{
	{"get", "GET", "/v1/sessions/{id}", noBody, nil, true},
	{"list files", "GET", "/v1/sessions/{id}/files", noBody, nil, true},
	{"list a directory", "GET", "/v1/sessions/{id}/files?path=dir", noBody, nil, true},
	{"download a file", "GET", "/v1/sessions/{id}/files/dir/secret.txt", noBody, nil, true},
	{"download the workspace", "GET", "/v1/sessions/{id}/files/", noBody, nil, true},
	{"upload a tar", "POST", "/v1/sessions/{id}/files", func() io.Reader { return plantedTar() },
		[]string{"Content-Type", "application/x-tar"}, false},
	{"upload a file", "PUT", "/v1/sessions/{id}/files/planted.txt", text("planted"),
		[]string{"Content-Type", "application/octet-stream"}, false},
	{"overwrite a file", "PUT", "/v1/sessions/{id}/files/dir/secret.txt", text("overwritten"),
		[]string{"Content-Type", "application/octet-stream"}, false},
	{"remove a file", "DELETE", "/v1/sessions/{id}/files/dir/secret.txt", noBody, nil, false},
	{"remove a directory", "DELETE", "/v1/sessions/{id}/files/dir?recursive=true", noBody, nil, false},
	{"execute", "POST", "/v1/sessions/{id}/executions", text(`{"language": "bash", "code": "echo planted > planted.txt; cat dir/secret.txt"}`),
		[]string{"Content-Type", "application/json"}, false},
	{"execute, streaming", "POST", "/v1/sessions/{id}/executions", text(`{"language": "bash", "code": "echo planted > planted.txt"}`),
		[]string{"Content-Type", "application/json", "Accept", "text/event-stream"}, false},
	{"delete the session", "DELETE", "/v1/sessions/{id}", noBody, nil, true},
}

func noBody() io.Reader { return nil }

func text(s string) func() io.Reader { return func() io.Reader { return strings.NewReader(s) } }

func plantedTar() io.Reader {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for name, body := range map[string]string{"planted.txt": "planted", "dir/secret.txt": "overwritten"} {
		_ = tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
		_, _ = tw.Write([]byte(body))
	}
	_ = tw.Close()
	return &b
}

// MCP session names are each principal's: alice's "shared" and bob's are two
// workspaces, over /mcp as over stdio, and a REST session's id names it for
// its owner alone.
func TestCrossTenantMCPSessions(t *testing.T) {
	ts := newTenants(t, nil)
	ctx := context.Background()
	aliceMCP, bobMCP := ts.mcp(t, "alice"), ts.mcp(t, "bob")
	if r := mcpExecute(t, aliceMCP, map[string]any{"session": "shared", "code": "open('secret.txt', 'w').write('alice')"}); r.Status != codecell.StatusSuccess {
		t.Fatalf("alice's run: %+v", r)
	}
	r := mcpExecute(t, bobMCP, map[string]any{"session": "shared", "code": "import os\nopen('bob.txt', 'w').write('bob')\nsorted(os.listdir('.'))"})
	if r.Status != codecell.StatusSuccess || string(r.Value) != `["bob.txt"]` {
		t.Fatalf("bob's \"shared\" holds %s (%+v)", r.Value, r)
	}
	r = mcpExecute(t, aliceMCP, map[string]any{"session": "shared", "code": "import os\nsorted(os.listdir('.'))"})
	if r.Status != codecell.StatusSuccess || string(r.Value) != `["secret.txt"]` {
		t.Fatalf("alice's \"shared\" holds %s (%+v)", r.Value, r)
	}
	aliceList, _ := ts.client("alice").Sessions(ctx)
	bobList, _ := ts.client("bob").Sessions(ctx)
	if len(aliceList) != 1 || len(bobList) != 1 || aliceList[0].Name != "shared" || bobList[0].Name != "shared" ||
		aliceList[0].ID == bobList[0].ID || aliceList[0].Owner != "alice" || bobList[0].Owner != "bob" {
		t.Fatalf("alice lists %+v, bob %+v", aliceList, bobList)
	}

	// A REST session's id: its owner's session for its owner, a new one
	// of his own for anyone else.
	made, err := ts.client("alice").CreateSession(ctx, api.SessionSpec{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ts.client("alice").Upload(ctx, made.ID, "data.txt", strings.NewReader("alice's data")); err != nil {
		t.Fatal(err)
	}
	r = mcpExecute(t, bobMCP, map[string]any{"session": made.ID, "code": "import os\nopen('planted.txt', 'w').write('x')\nsorted(os.listdir('.'))"})
	if r.Status != codecell.StatusSuccess || string(r.Value) != `["planted.txt"]` {
		t.Fatalf("bob naming alice's session id sees %s (%+v)", r.Value, r)
	}
	r = mcpExecute(t, aliceMCP, map[string]any{"session": made.ID, "code": "import os\nsorted(os.listdir('.'))"})
	if r.Status != codecell.StatusSuccess || string(r.Value) != `["data.txt"]` {
		t.Fatalf("alice naming her session id sees %s (%+v)", r.Value, r)
	}
	if got, err := ts.client("alice").Session(ctx, made.ID); err != nil || got.Executions != 1 {
		t.Fatalf("alice's REST session: %+v %v", got, err)
	}
}

// An MCP session is its opener's: bob cannot post to alice's MCP session
// id, listen on it or end it, and his try ends none of her calls.
func TestCrossTenantMCPSessionID(t *testing.T) {
	ts := newTenants(t, nil)
	aliceMCP := ts.mcp(t, "alice")
	id := aliceMCP.ID()
	if id == "" {
		t.Fatal("no MCP session id")
	}
	done := make(chan *codecell.Result, 1)
	go func() {
		r, err := mcpCall(aliceMCP, map[string]any{"code": holdPython})
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	ts.hold.waitStarted(t, 1)
	call := `{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "execute", "arguments": {"code": "1"}}}`
	for _, c := range []struct {
		method string
		body   string
		accept string
	}{
		{"POST", call, "application/json, text/event-stream"},
		{"GET", "", "text/event-stream"},
		{"DELETE", "", ""},
	} {
		var body io.Reader
		if c.body != "" {
			body = strings.NewReader(c.body)
		}
		status, _, b := ts.raw(t, "bob", c.method, "/mcp", body, "Mcp-Session-Id", id, "Content-Type", "application/json",
			"Accept", c.accept, "Mcp-Protocol-Version", "2025-06-18")
		if status != http.StatusForbidden {
			t.Errorf("bob's %s on alice's MCP session: %d %s, want 403", c.method, status, b)
		}
	}
	ts.hold.releaseAll()
	if r := <-done; r == nil || r.Status != codecell.StatusSuccess || string(r.Value) != `"released"` {
		t.Fatalf("alice's call after bob's tries: %+v", r)
	}
	if r := mcpExecute(t, aliceMCP, map[string]any{"code": "2"}); r.Status != codecell.StatusSuccess {
		t.Fatalf("alice's MCP session after bob's tries: %+v", r)
	}
}

// A principal runs at most its own number of executions at once, REST and
// MCP together, and holds at most its number of sessions; past either it
// gets 429 (a refused Result over MCP) while the others go on. Left unset,
// a principal's share is half of the server's.
func TestPrincipalLimits(t *testing.T) {
	ts := newTenants(t, func(s *server.Server) {
		s.MaxRunning = 3
		s.Tokens[0].Principal.MaxRunning = 1  // alice
		s.Tokens[0].Principal.MaxSessions = 2 // alice
	})
	ctx := context.Background()
	alice, bob, admin := ts.client("alice"), ts.client("bob"), ts.client("admin")
	aliceMCP := ts.mcp(t, "alice")

	// Sessions.
	for range 2 {
		if _, err := alice.CreateSession(ctx, api.SessionSpec{}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := alice.CreateSession(ctx, api.SessionSpec{})
	var e *client.Error
	if !errors.As(err, &e) || e.Status != http.StatusTooManyRequests || e.Code() != server.CodeTooManySessions ||
		e.RetryAfter <= 0 || !e.Envelope.Retryable || !strings.Contains(e.Envelope.Message, "your token") {
		t.Fatalf("alice's third session: %v", err)
	}
	if r := mcpExecute(t, aliceMCP, map[string]any{"session": "third", "code": "1"}); r.Status != codecell.StatusBlocked ||
		r.Error == nil || r.Error.Code != server.CodeTooManySessions || !r.Error.Retryable {
		t.Fatalf("alice's third session over MCP: %+v", r)
	}
	if _, err := bob.CreateSession(ctx, api.SessionSpec{}); err != nil {
		t.Fatalf("bob's session while alice holds her maximum: %v", err)
	}

	// Executions: alice's one runs; her next, over REST or MCP, is
	// refused; bob's runs.
	done := make(chan *codecell.Result, 1)
	go func() {
		r, err := alice.Execute(ctx, "", api.Execution{Language: "python", Code: holdPython})
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	ts.hold.waitStarted(t, 1)
	_, err = alice.Execute(ctx, "", api.Execution{Language: "python", Code: "1"})
	if !errors.As(err, &e) || e.Status != http.StatusTooManyRequests || e.Code() != server.CodeTooManyExecutions ||
		e.RetryAfter < time.Second || !e.Envelope.Retryable || !strings.Contains(e.Envelope.Message, "your token") {
		t.Fatalf("alice's second execution: %v", err)
	}
	if r := mcpExecute(t, aliceMCP, map[string]any{"code": "1"}); r.Status != codecell.StatusBlocked || r.Error == nil ||
		r.Error.Code != server.CodeTooManyExecutions || !r.Error.Retryable {
		t.Fatalf("alice's second execution, over MCP: %+v", r)
	}
	if r, err := bob.Execute(ctx, "", api.Execution{Language: "python", Code: "6 * 7"}); err != nil || string(r.Value) != "42" {
		t.Fatalf("bob's execution while alice runs her maximum: %+v %v", r, err)
	}
	if r, err := admin.Execute(ctx, "", api.Execution{Language: "python", Code: "6 * 7"}); err != nil || string(r.Value) != "42" {
		t.Fatalf("the admin's execution while alice runs her maximum: %+v %v", r, err)
	}
	ts.hold.releaseAll()
	if r := <-done; r == nil || string(r.Value) != `"released"` {
		t.Fatalf("alice's held execution: %+v", r)
	}
	if r := mcpExecute(t, aliceMCP, map[string]any{"code": "3"}); r.Status != codecell.StatusSuccess {
		t.Fatalf("alice's execution once hers ended: %+v", r)
	}
	status, _, metrics := ts.raw(t, "admin", "GET", "/metrics", nil)
	for _, want := range []string{
		`codecell_principal_limit_refusals_total{limit="executions",principal="alice"} 2`,
		`codecell_principal_limit_refusals_total{limit="sessions",principal="alice"} 1`,
		`codecell_principal_executions_running{principal="alice"} 0`,
		`codecell_executions_total{principal="bob",status="success",tier="native"} 1`,
		`codecell_http_requests_total{code="429",principal="alice",route="POST /v1/sessions"} 1`,
	} {
		if status != 200 || !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// With several tokens and no limits of their own, each principal runs at
// most half of the server's executions; the server's own limit holds over
// them all.
func TestPrincipalDefaultShare(t *testing.T) {
	ts := newTenants(t, func(s *server.Server) { s.MaxRunning = 2 })
	ctx := context.Background()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer ts.hold.releaseAll()
	for _, who := range []string{"alice", "bob"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r, err := ts.client(who).Execute(ctx, "", api.Execution{Language: "python", Code: holdPython}); err != nil || r.Status != codecell.StatusSuccess {
				t.Errorf("%s's held execution: %+v %v", who, r, err)
			}
		}()
		ts.hold.waitStarted(t, 1)
		if who == "alice" {
			_, err := ts.client("alice").Execute(ctx, "", api.Execution{Language: "python", Code: "1"})
			if client.StatusOf(err) != http.StatusTooManyRequests || !strings.Contains(err.Error(), "your token") {
				t.Fatalf("alice's second of a server of two: %v", err)
			}
		}
	}
	_, err := ts.client("admin").Execute(ctx, "", api.Execution{Language: "python", Code: "1"})
	if client.StatusOf(err) != http.StatusTooManyRequests || client.CodeOf(err) != server.CodeTooManyExecutions || !strings.Contains(err.Error(), "this server") {
		t.Fatalf("the admin's execution on a full server: %v", err)
	}
}

// A flood of MCP calls takes no more than the server's execution slots,
// which REST shares: past them every call is refused at once, and a REST
// execution too.
func TestMCPFloodIsBounded(t *testing.T) {
	ts := newTenants(t, func(s *server.Server) {
		s.MaxRunning = 2
		for i := range s.Tokens {
			s.Tokens[i].Principal.MaxRunning = 100
		}
	})
	const calls = 8
	cs := ts.mcp(t, "alice")
	results := make(chan *codecell.Result, calls)
	for range calls {
		go func() {
			r, err := mcpCall(cs, map[string]any{"code": holdPython})
			if err != nil {
				t.Error(err)
			}
			results <- r
		}()
	}
	ts.hold.waitStarted(t, 2)
	// The others are refused without waiting for a slot.
	for i := 0; i < calls-2; i++ {
		r := <-results
		if r == nil || r.Status != codecell.StatusBlocked || r.Error == nil || r.Error.Code != server.CodeTooManyExecutions {
			t.Fatalf("call %d past the server's slots: %+v", i, r)
		}
	}
	if n := len(ts.hold.started); n != 0 {
		t.Fatalf("%d more programs ran past the server's slots", n)
	}
	if h, err := ts.client("bob").Health(context.Background()); err != nil || h["running"] != float64(2) {
		t.Fatalf("health during the flood: %v %v", h, err)
	}
	if _, err := ts.client("bob").Execute(context.Background(), "", api.Execution{Language: "python", Code: "1"}); client.StatusOf(err) != http.StatusTooManyRequests {
		t.Fatalf("a REST execution while MCP holds the slots: %v", err)
	}
	ts.hold.releaseAll()
	for range 2 {
		if r := <-results; r == nil || r.Status != codecell.StatusSuccess {
			t.Fatalf("a call that held a slot: %+v", r)
		}
	}
}

// Logs name the principal of each request and each execution, REST and
// MCP, and hold no token, not even one presented wrongly.
func TestLogsNameThePrincipalNotTheToken(t *testing.T) {
	ts := newTenants(t, nil)
	ctx := context.Background()
	alice := ts.client("alice")
	ses, err := alice.CreateSession(ctx, api.SessionSpec{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Execute(ctx, ses.ID, api.Execution{Language: "bash", Code: "true"}); err != nil {
		t.Fatal(err)
	}
	if r := mcpExecute(t, ts.mcp(t, "bob"), map[string]any{"session": "s", "code": "1"}); r.Status != codecell.StatusSuccess {
		t.Fatal(r)
	}
	if r := mcpExecute(t, ts.mcp(t, "bob"), map[string]any{"code": ""}); r.Status != codecell.StatusBlocked {
		t.Fatal(r)
	}
	if err := ts.client("admin").DeleteSession(ctx, ses.ID); err != nil {
		t.Fatal(err)
	}
	// Tokens presented wrongly: a prefix, an extension, in a header the
	// server does not read.
	for _, auth := range []string{tenantTokens["alice"][:8], tenantTokens["alice"] + "x", "Basic " + tenantTokens["bob"]} {
		req, _ := http.NewRequest("GET", ts.http.URL+"/v1/sessions", nil)
		req.Header.Set("Authorization", "Bearer "+auth)
		req.Header.Set("X-Token", tenantTokens["admin"])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("Authorization %q: %d", auth, resp.StatusCode)
		}
	}
	logs := ts.logs.String()
	for name, tok := range tenantTokens {
		// Any 8 characters of a token in a row would be a leak.
		for i := 0; i+8 <= len(tok); i++ {
			if strings.Contains(logs, tok[i:i+8]) {
				t.Fatalf("the log holds part of %s's token (%q):\n%s", name, tok[i:i+8], logs)
			}
		}
	}
	lines := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		var rec struct{ Msg, Principal, Route string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not a JSON line: %s", line)
		}
		lines[rec.Msg+" "+rec.Principal]++
		if rec.Msg == "http" && rec.Route != "GET /v1/sessions" && rec.Principal == "" {
			t.Errorf("a request line without its principal: %s", line)
		}
		if rec.Msg == "exec" && rec.Principal == "" {
			t.Errorf("an execution's line without its principal: %s", line)
		}
	}
	for _, want := range []string{"http alice", "http bob", "http admin", "exec alice", "exec bob",
		"session created alice", "session ended alice"} {
		if lines[want] == 0 {
			t.Errorf("no %q line among %v", want, lines)
		}
	}
}

// Forged tokens, mangled paths and borrowed MCP names reach nothing of
// alice's; a flood of sessions by bob stops at his share and leaves alice
// room.
func TestCrossTenantAttacks(t *testing.T) {
	ts := newTenants(t, nil)
	ctx := context.Background()
	alice := ts.client("alice")
	made, err := alice.CreateSession(ctx, api.SessionSpec{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Upload(ctx, made.ID, "secret.txt", strings.NewReader("alice's secret")); err != nil {
		t.Fatal(err)
	}
	aliceIsIntact := func(t *testing.T) {
		t.Helper()
		files, err := alice.Files(ctx, made.ID, "")
		if err != nil || len(files) != 1 || files[0].Path != "secret.txt" || files[0].SHA256 != sha([]byte("alice's secret")) {
			t.Fatalf("alice's session now holds %+v (%v)", files, err)
		}
		if got, err := alice.Session(ctx, made.ID); err != nil || got.Executions != 0 {
			t.Fatalf("alice's session: %+v %v", got, err)
		}
	}
	aliceTok := tenantTokens["alice"]

	t.Run("forged tokens", func(t *testing.T) {
		for _, auth := range [][]string{
			{"Bearer " + aliceTok[:len(aliceTok)-1]},
			{"Bearer " + aliceTok + "0"},
			{"Bearer " + strings.ToUpper(aliceTok)},
			{"bearer " + aliceTok},
			{"Bearer  " + aliceTok},
			{"Bearer " + tenantTokens["bob"] + aliceTok},
			{"Bearer " + tenantTokens["bob"] + "," + aliceTok},
			{"Bearer"},
			{"Bearer "},
			{"Token " + aliceTok},
			{"Bearer wrong", "Bearer " + aliceTok}, // a second header is not read
		} {
			req, _ := http.NewRequest("GET", ts.http.URL+"/v1/sessions/"+made.ID+"/files/secret.txt?token="+aliceTok, nil)
			for _, a := range auth {
				req.Header.Add("Authorization", a)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized || strings.Contains(string(body), "alice's secret") {
				t.Errorf("Authorization %q: %d %s", auth, resp.StatusCode, body)
			}
		}
		aliceIsIntact(t)
	})

	t.Run("mangled paths", func(t *testing.T) {
		for _, p := range []string{
			"/v1/sessions/" + made.ID + "/",
			"/v1/sessions/" + made.ID + "/files/secret.txt/",
			"/v1/sessions/" + strings.ToUpper(made.ID) + "/files/secret.txt",
			"/v1/sessions/" + made.ID + "%00/files/secret.txt",
			"/v1/sessions/" + made.ID + "%20/files/secret.txt",
			"/v1/sessions/./" + made.ID + "/files/secret.txt",
			"/v1/sessions/x/../" + made.ID + "/files/secret.txt",
			"/v1/sessions/x%2F..%2F" + made.ID + "/files/secret.txt",
			"/v1/sessions/" + made.ID[:len(made.ID)-1] + "/files/secret.txt",
			"/v1//sessions/" + made.ID + "/files/secret.txt",
		} {
			for _, method := range []string{"GET", "PUT", "DELETE"} {
				status, _, body := ts.raw(t, "bob", method, p, strings.NewReader("planted"), "Content-Type", "application/octet-stream")
				if status/100 == 2 || status/100 == 3 && method != "GET" || strings.Contains(string(body), "alice's secret") {
					t.Errorf("bob's %s %s: %d %s", method, p, status, body)
				}
			}
		}
		aliceIsIntact(t)
	})

	t.Run("borrowed MCP names", func(t *testing.T) {
		if r := mcpExecute(t, ts.mcp(t, "alice"), map[string]any{"session": "notes", "code": "open('n.txt', 'w').write('alice')"}); r.Status != codecell.StatusSuccess {
			t.Fatalf("alice's run: %+v", r)
		}
		bobMCP := ts.mcp(t, "bob")
		for _, name := range []string{"notes", made.ID} {
			r := mcpExecute(t, bobMCP, map[string]any{"session": name, "code": "import os\nsorted(os.listdir('.'))"})
			if r.Status != codecell.StatusSuccess || string(r.Value) != "[]" {
				t.Errorf("bob's session %q holds %s (%+v)", name, r.Value, r)
			}
		}
		for _, name := range []string{"../notes", "notes/..", made.ID + "/..", "alice:notes", strings.Repeat("n", 65), "notes\x00"} {
			r := mcpExecute(t, bobMCP, map[string]any{"session": name, "code": "1"})
			if r.Status != codecell.StatusBlocked || r.Error == nil || r.Error.Code != codecell.CodeInvalidRequest {
				t.Errorf("bob's session name %q: %+v", name, r)
			}
		}
		aliceIsIntact(t)
	})

	t.Run("session flood", func(t *testing.T) {
		// The store holds 20; each of three tokens may hold half of them.
		bob, bobMCP := ts.client("bob"), ts.mcp(t, "bob")
		held := len(mustList(t, bob))
		for i := 0; ; i++ {
			if i > 20 {
				t.Fatal("bob made sessions past any limit")
			}
			var refused bool
			if i%2 == 0 {
				_, err := bob.CreateSession(ctx, api.SessionSpec{})
				refused = client.CodeOf(err) == server.CodeTooManySessions
				if err != nil && !refused {
					t.Fatal(err)
				}
			} else {
				r := mcpExecute(t, bobMCP, map[string]any{"session": "flood" + string(rune('a'+i)), "code": "1"})
				refused = r.Error != nil && r.Error.Code == server.CodeTooManySessions
				if r.Status != codecell.StatusSuccess && !refused {
					t.Fatal(r)
				}
			}
			if refused {
				break
			}
			held++
		}
		if held != 10 {
			t.Errorf("bob held %d sessions, want his share of 10", held)
		}
		if len(mustList(t, bob)) != 10 {
			t.Errorf("bob lists %d sessions", len(mustList(t, bob)))
		}
		if _, err := alice.CreateSession(ctx, api.SessionSpec{}); err != nil {
			t.Fatalf("alice's session after bob's flood: %v", err)
		}
	})
}

func mustList(t *testing.T, c *client.Client) []api.Session {
	t.Helper()
	list, err := c.Sessions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// The metrics name principals and count their work: with several, a token
// that is not an admin's reads the server's totals and its own series, never
// another principal's.
func TestMetricsShowOnlyYourOwn(t *testing.T) {
	ts := newTenants(t, nil)
	for _, who := range []string{"alice", "bob"} {
		if _, err := ts.client(who).Execute(context.Background(), "", api.Execution{Language: "python", Code: "1"}); err != nil {
			t.Fatal(err)
		}
	}
	read := func(who string) string {
		status, _, body := ts.raw(t, who, "GET", "/metrics", nil)
		if status != http.StatusOK {
			t.Fatalf("%s: /metrics %d %.300s", who, status, body)
		}
		return string(body)
	}
	for who, other := range map[string]string{"alice": "bob", "bob": "alice"} {
		m := read(who)
		if !strings.Contains(m, `principal="`+who+`"`) || strings.Contains(m, `principal="`+other+`"`) || strings.Contains(m, `principal="admin"`) {
			t.Errorf("%s's /metrics:\n%s", who, m)
		}
		if !strings.Contains(m, "codecell_executions_running ") {
			t.Errorf("%s's /metrics lack the server's totals", who)
		}
	}
	if m := read("admin"); !strings.Contains(m, `principal="alice"`) || !strings.Contains(m, `principal="bob"`) {
		t.Errorf("the admin's /metrics lack a principal:\n%s", m)
	}
}

// Every route on a live session — its cells, variables, restart, fork and
// files — answers bob about alice's live session exactly as about a
// session that does not exist, and the admin reads it (its variables
// included) but neither restarts, forks nor runs a cell in it. Alice's
// interpreters are as she left them: the same variables, no cell more, no
// restart, and no fork made of them.
func TestCrossTenantLiveSession(t *testing.T) {
	ts := newTenants(t, nil)
	ctx := context.Background()
	alice := ts.client("alice")
	made, err := alice.CreateSession(ctx, api.SessionSpec{State: api.StateLive})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []api.Execution{
		{Language: "python", Code: "secret = 41\nopen('secret.txt', 'w').write('alice')"},
		{Language: "javascript", Code: "var jsSecret = 'alice'"},
	} {
		if res, err := alice.Execute(ctx, made.ID, x); err != nil || res.Status != codecell.StatusSuccess {
			t.Fatalf("alice's cell: %+v %v", res, err)
		}
	}
	before, err := alice.Session(ctx, made.ID)
	if err != nil {
		t.Fatal(err)
	}
	live := []struct {
		name, method, path string
		body               func() io.Reader
		header             []string
		admin              int // the admin's status on alice's session
	}{
		{"python cell", "POST", "/v1/sessions/{id}/executions", text(`{"language": "python", "code": "secret = 0\nopen('secret.txt', 'w').write('bob')"}`),
			[]string{"Content-Type", "application/json"}, http.StatusForbidden},
		{"javascript cell", "POST", "/v1/sessions/{id}/executions", text(`{"language": "javascript", "code": "jsSecret = 'bob'"}`),
			[]string{"Content-Type", "application/json"}, http.StatusForbidden},
		{"restart", "POST", "/v1/sessions/{id}/restart", noBody, nil, http.StatusForbidden},
		{"restart, with a body", "POST", "/v1/sessions/{id}/restart", text(`{}`), []string{"Content-Type", "application/json"}, http.StatusForbidden},
		{"fork", "POST", "/v1/sessions/{id}/fork", noBody, nil, http.StatusForbidden},
		{"python variables", "GET", "/v1/sessions/{id}/variables", noBody, nil, http.StatusOK},
		{"javascript variables", "GET", "/v1/sessions/{id}/variables?language=javascript", noBody, nil, http.StatusOK},
		{"get", "GET", "/v1/sessions/{id}", noBody, nil, http.StatusOK},
		{"download a file", "GET", "/v1/sessions/{id}/files/secret.txt", noBody, nil, http.StatusOK},
		{"overwrite a file", "PUT", "/v1/sessions/{id}/files/secret.txt", text("bob"), []string{"Content-Type", "application/octet-stream"}, http.StatusForbidden},
		{"remove a file", "DELETE", "/v1/sessions/{id}/files/secret.txt", noBody, nil, http.StatusForbidden},
	}
	missing := "ses_" + strings.Repeat("0", 32)
	for _, rt := range live {
		t.Run("bob/"+rt.name, func(t *testing.T) {
			status, h, body := ts.raw(t, "bob", rt.method, strings.ReplaceAll(rt.path, "{id}", made.ID), rt.body(), rt.header...)
			wantStatus, wantH, wantBody := ts.raw(t, "bob", rt.method, strings.ReplaceAll(rt.path, "{id}", missing), rt.body(), rt.header...)
			if status != http.StatusNotFound || envelopeOf(t, body).Code != server.CodeSessionNotFound {
				t.Fatalf("bob's %s on alice's live session: %d %s", rt.name, status, body)
			}
			if status != wantStatus || string(body) != string(wantBody) || h.Get("Content-Type") != wantH.Get("Content-Type") {
				t.Fatalf("bob's answer on alice's live session differs from one on a missing session:\n%d %s\n%d %s", status, body, wantStatus, wantBody)
			}
		})
		t.Run("admin/"+rt.name, func(t *testing.T) {
			status, _, body := ts.raw(t, "admin", rt.method, strings.ReplaceAll(rt.path, "{id}", made.ID), rt.body(), rt.header...)
			if status != rt.admin {
				t.Fatalf("the admin's %s on alice's live session: %d %s, want %d", rt.name, status, body, rt.admin)
			}
			if status == http.StatusForbidden && envelopeOf(t, body).Code != server.CodeNotOwner {
				t.Fatalf("the admin's %s: %s", rt.name, body)
			}
		})
	}
	// Alice's session is as she left it.
	res, err := alice.Execute(ctx, made.ID, api.Execution{Language: "python", Code: "[secret, open('secret.txt').read()]"})
	if err != nil || res.Status != codecell.StatusSuccess || res.SessionState != codecell.SessionKept || string(res.Value) != `[41,"alice"]` {
		t.Fatalf("alice's python interpreter after the others' tries: %+v %v", res, err)
	}
	res, err = alice.Execute(ctx, made.ID, api.Execution{Language: "javascript", Code: "jsSecret"})
	if err != nil || res.Status != codecell.StatusSuccess || string(res.Value) != `"alice"` {
		t.Fatalf("alice's node after the others' tries: %+v %v", res, err)
	}
	after, err := alice.Session(ctx, made.ID)
	if err != nil {
		t.Fatal(err)
	}
	if after.Executions != before.Executions+2 || len(after.Interpreters) != len(before.Interpreters) {
		t.Fatalf("alice's session before %+v, after %+v", before, after)
	}
	for i, in := range after.Interpreters {
		was := before.Interpreters[i]
		if in.Language != was.Language || !in.Started.Equal(was.Started) || in.Cells != was.Cells+1 || !in.Running {
			t.Errorf("alice's %s interpreter was %+v, now %+v", in.Language, was, in)
		}
	}
	if all := mustList(t, ts.client("admin")); len(all) != 1 || all[0].ID != made.ID {
		t.Errorf("sessions after the tries: %+v", all)
	}
}
