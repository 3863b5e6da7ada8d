package server_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/api"
	"github.com/codecell-dev/codecell/client"
	"github.com/codecell-dev/codecell/internal/testenv"
	"github.com/codecell-dev/codecell/server"
)

func sha256sum(b []byte) [32]byte { return sha256.Sum256(b) }

// Bad requests get an envelope with the status that says what is wrong.
func TestBadRequests(t *testing.T) {
	f := newRefusingFixture(t, func(s *server.Server) {
		s.MaxLimits = codecell.Limits{Timeout: time.Minute, Memory: 1 << 30}
	})
	ses := f.session(t, api.SessionSpec{Limits: &api.Limits{Memory: 256 << 20}})
	for _, c := range []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"not JSON", "POST", "/v1/executions", `{"language":`, 400, codecell.CodeInvalidRequest},
		{"unknown field", "POST", "/v1/executions", `{"language":"python","code":"1","timeout":3}`, 400, codecell.CodeInvalidRequest},
		{"two values", "POST", "/v1/executions", `{"language":"python","code":"1"} {}`, 400, codecell.CodeInvalidRequest},
		{"bad duration", "POST", "/v1/executions", `{"language":"python","code":"1","limits":{"timeout":"soon"}}`, 400, codecell.CodeInvalidRequest},
		{"negative limit", "POST", "/v1/executions", `{"language":"python","code":"1","limits":{"processes":-1}}`, 400, codecell.CodeInvalidRequest},
		{"over the server's maximum", "POST", "/v1/executions", `{"language":"python","code":"1","limits":{"timeout":"2h"}}`, 400, server.CodeLimitTooHigh},
		{"over the session's limit", "POST", "/v1/sessions/" + ses.ID + "/executions", `{"language":"python","code":"1","limits":{"memory":"512M"}}`, 400, server.CodeLimitTooHigh},
		{"session over the maximum", "POST", "/v1/sessions", `{"limits":{"memory":"2G"}}`, 400, server.CodeLimitTooHigh},
		{"ttl over the maximum", "POST", "/v1/sessions", `{"ttl":"1000h"}`, 400, server.CodeLimitTooHigh},
		{"the local tier", "POST", "/v1/executions", `{"language":"python","code":"1","tier":"local"}`, 403, server.CodeTierNotAllowed},
		{"a session on the local tier", "POST", "/v1/sessions", `{"tier":"local"}`, 403, server.CodeTierNotAllowed},
		{"text and data", "POST", "/v1/executions", `{"language":"python","code":"1","files":[{"path":"a","text":"x","data":"eA=="}]}`, 400, codecell.CodeInvalidRequest},
		{"no such session", "POST", "/v1/sessions/ses_nope/executions", `{"language":"python","code":"1"}`, 404, server.CodeSessionNotFound},
		{"no such session's files", "GET", "/v1/sessions/ses_nope/files", ``, 404, server.CodeSessionNotFound},
		{"no such route", "GET", "/v2/things", ``, 404, server.CodeNotFound},
		{"wrong method", "PATCH", "/v1/sessions", ``, 405, server.CodeMethodNotAllowed},
		{"bad mode", "PUT", "/v1/sessions/" + ses.ID + "/files/a.txt?mode=999", `x`, 400, codecell.CodeInvalidRequest},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, _, body := f.raw(t, c.method, c.path, strings.NewReader(c.body), "Content-Type", "application/json")
			if status != c.status || envelopeOf(t, body).Code != c.code {
				t.Fatalf("%d %s, want %d %s", status, body, c.status, c.code)
			}
		})
	}
	// A misspelt field, at any depth, is named with the one meant.
	for body, want := range map[string]string{
		`{"lang":"python","code":"1"}`:                                     `unknown field "lang"; did you mean "language"?`,
		`{"language":"python","code":"1","limits":{"timout":"5s"}}`:        `unknown field "timout"; did you mean "timeout"?`,
		`{"language":"python","code":"1","files":[{"path":"a","txt":""}]}`: `unknown field "txt"; did you mean "text"?`,
	} {
		status, _, got := f.raw(t, "POST", "/v1/executions", strings.NewReader(body), "Content-Type", "application/json")
		if status != 400 || !strings.Contains(envelopeOf(t, got).Message, want) {
			t.Errorf("%s: %d %s, want 400 and %s", body, status, got, want)
		}
	}
	// A program the engine refuses is a Result, not an HTTP error.
	res, err := f.c.Execute(context.Background(), "", api.Execution{Language: "python", Code: "  "})
	if err != nil || res.Status != codecell.StatusBlocked || res.Error.Code != codecell.CodeEmptyCode {
		t.Fatalf("empty code: %v %+v", err, res)
	}
	res, err = f.c.Execute(context.Background(), "", api.Execution{Language: "cobol", Code: "x"})
	if err != nil || res.Status != codecell.StatusBlocked || res.Error.Code != codecell.CodeUnknownLanguage {
		t.Fatalf("unknown language: %v %+v", err, res)
	}
}

// A session's limits and policy apply to its executions; an execution may
// narrow them.
func TestSessionLimitsAndPolicy(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	ses := f.session(t, api.SessionSpec{Limits: &api.Limits{Timeout: api.Duration(time.Second)},
		Policy: &api.Policy{Guard: &codecell.GuardPolicy{AllowedImports: []string{"json"}}}})
	res, err := f.c.Execute(ctx, ses.ID, api.Execution{Language: "python", Code: "import time\ntime.sleep(5)"})
	if err != nil || res.Status != codecell.StatusBlocked {
		// time is not in the session's allowed imports
		t.Fatalf("import outside the session's allowlist: %v %+v", err, res)
	}
	res, err = f.c.Execute(ctx, ses.ID, api.Execution{Language: "python", Code: "while True: pass"})
	if err != nil || res.Status != codecell.StatusTimeout || res.DurationMS > 5000 {
		t.Fatalf("the session's one-second timeout: %v %+v", err, res)
	}
	res, err = f.c.Execute(ctx, ses.ID, api.Execution{Language: "python", Code: "import json\njson.dumps([1])"})
	if err != nil || res.Status != codecell.StatusSuccess || res.Policy == nil || len(res.Policy.Layers) < 2 {
		t.Fatalf("an allowed import: %v %+v", err, res)
	}
	if res.Policy.Layers[len(res.Policy.Layers)-1].Name != "session" {
		t.Fatalf("the session's policy layer is missing: %+v", res.Policy.Layers)
	}
}

// A session's second execution waits for nobody: while one runs, another
// gets 409; deleting the session ends the running one.
func TestBusyAndDeletedSession(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	ses := f.session(t, api.SessionSpec{})
	errc := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := f.c.Execute(ctx, ses.ID, api.Execution{Language: "python", Code: "import time\ntime.sleep(20)"})
		errc <- err
	}()
	waitRunning(t, f, 1)
	_, err := f.c.Execute(ctx, ses.ID, api.Execution{Language: "python", Code: "1"})
	var e *client.Error
	if !errors.As(err, &e) || e.Status != http.StatusConflict || e.Code() != server.CodeSessionBusy || e.RetryAfter == 0 {
		t.Fatalf("a second execution in a busy session: %v", err)
	}
	if _, err := f.c.Upload(ctx, ses.ID, "x.txt", strings.NewReader("x")); client.StatusOf(err) != http.StatusConflict {
		t.Fatalf("an upload into a busy session: %v", err)
	}
	got, err := f.c.Session(ctx, ses.ID)
	if err != nil || !got.Running {
		t.Fatalf("the session does not say it runs: %+v %v", got, err)
	}
	if err := f.c.DeleteSession(ctx, ses.ID); err != nil {
		t.Fatal(err)
	}
	err = <-errc
	if client.StatusOf(err) != http.StatusGone || client.CodeOf(err) != server.CodeSessionDeleted {
		t.Fatalf("the execution of a deleted session: %v", err)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Fatalf("deleting the session did not end its program: %v", d)
	}
}

// Sessions end after their lifetime, and when idle.
func TestSessionExpiry(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	short := f.session(t, api.SessionSpec{TTL: api.Duration(time.Second)})
	idle := f.session(t, api.SessionSpec{IdleTimeout: api.Duration(time.Second)})
	kept := f.session(t, api.SessionSpec{})
	if short.TTL != api.Duration(time.Second) || !short.ExpiresAt.Before(time.Now().Add(2*time.Second)) {
		t.Fatalf("the short session: %+v", short)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		_, e1 := f.c.Session(ctx, short.ID)
		_, e2 := f.c.Session(ctx, idle.ID)
		if client.StatusOf(e1) == 404 && client.StatusOf(e2) == 404 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, id := range []string{short.ID, idle.ID} {
		if _, err := f.c.Session(ctx, id); client.StatusOf(err) != http.StatusNotFound {
			t.Fatalf("session %s did not expire: %v", id, err)
		}
	}
	list, err := f.c.Sessions(ctx)
	if err != nil || len(list) != 1 || list[0].ID != kept.ID {
		t.Fatalf("the sessions left: %+v %v", list, err)
	}
}

// The maximum of sessions holds: one more is 429 with hints.
func TestTooManySessions(t *testing.T) {
	f := newLocalFixture(t, nil)
	for i := 0; i < 20; i++ {
		f.session(t, api.SessionSpec{})
	}
	_, err := f.c.CreateSession(context.Background(), api.SessionSpec{})
	if client.StatusOf(err) != http.StatusTooManyRequests || client.CodeOf(err) != server.CodeTooManySessions {
		t.Fatalf("the 21st session of 20: %v", err)
	}
}

// /metrics exports the service's series, and each request is one log line.
func TestMetrics(t *testing.T) {
	var logs syncBuffer
	f := newFixture(t, func(s *server.Server) { s.Logger = slog.New(slog.NewJSONHandler(&logs, nil)) })
	if _, err := f.c.Execute(context.Background(), "", api.Execution{Language: "python", Code: "1"}); err != nil {
		t.Fatal(err)
	}
	ses := f.session(t, api.SessionSpec{})
	if err := f.c.DeleteSession(context.Background(), ses.ID); err != nil {
		t.Fatal(err)
	}
	status, _, body := f.raw(t, "GET", "/metrics", nil)
	if status != 200 {
		t.Fatalf("/metrics: %d", status)
	}
	for _, want := range []string{`codecell_executions_total{principal="tester",status="success",tier="native"} 1`,
		`codecell_http_requests_total{code="200",principal="tester",route="POST /v1/executions"} 1`, "codecell_executions_running 0",
		"codecell_execution_duration_seconds_bucket", "codecell_sessions 0", `codecell_sessions_ended_total{reason="deleted"} 1`,
		"codecell_sessions_created_total 1"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	var deleted bool
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("a log line is not JSON: %q", line)
		}
		if rec["msg"] == "http" && rec["route"] == "DELETE /v1/sessions/{id}" && rec["status"] == float64(204) && rec["session_id"] == ses.ID {
			deleted = true
		}
		if rec["msg"] == "http" && rec["route"] == "GET /metrics" {
			t.Errorf("a /metrics scrape is logged at info: %s", line)
		}
	}
	if !deleted {
		t.Errorf("no log line for the DELETE of the session:\n%s", logs.String())
	}
	// A request id: the client's, else one of the server's, in the answer
	// and in the log.
	_, h, _ := f.raw(t, "GET", "/v1/sessions", nil, "X-Request-Id", "trace-42")
	_, h2, _ := f.raw(t, "GET", "/v1/sessions", nil, "X-Request-Id", "bad id/with;chars")
	if h.Get("X-Request-Id") != "trace-42" || h2.Get("X-Request-Id") == "" || h2.Get("X-Request-Id") == "bad id/with;chars" {
		t.Errorf("request ids: %q and %q", h.Get("X-Request-Id"), h2.Get("X-Request-Id"))
	}
	if !strings.Contains(logs.String(), `"request_id":"trace-42"`) {
		t.Errorf("the log lacks the request id")
	}
}

// syncBuffer is a bytes.Buffer for several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The OpenAPI document and the handlers agree: every route is documented,
// every documented operation is routed, and the schemas of the api
// package's types name the same fields as the Go types.
func TestOpenAPI(t *testing.T) {
	f := newLocalFixture(t, nil)
	status, _, body := f.raw(t, "GET", "/openapi.json", nil)
	if status != 200 {
		t.Fatalf("/openapi.json: %d", status)
	}
	var doc struct {
		OpenAPI    string                                `json:"openapi"`
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Schemas map[string]struct {
				Properties map[string]json.RawMessage `json:"properties"`
				Required   []string                   `json:"required"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(body, &doc); err != nil || !strings.HasPrefix(doc.OpenAPI, "3.1") {
		t.Fatalf("not an OpenAPI 3.1 document: %v %q", err, doc.OpenAPI)
	}
	documented := map[string]bool{}
	for path, ops := range doc.Paths {
		for method := range ops {
			if method == "parameters" {
				continue
			}
			documented[strings.ToUpper(method)+" "+path] = true
		}
	}
	routed := map[string]bool{}
	for _, r := range server.Routes() {
		routed[r] = true
	}
	routed["POST /mcp"] = true // the MCP transport, documented by its own specification
	for r := range routed {
		if !documented[r] {
			t.Errorf("route %s is not in /openapi.json", r)
		}
	}
	ses := f.session(t, api.SessionSpec{})
	param := regexp.MustCompile(`\{[a-z]+\}`)
	for op := range documented {
		if !routed[op] {
			t.Errorf("/openapi.json documents %s, which the server does not route", op)
			continue
		}
		if op == "POST /mcp" {
			continue
		}
		method, path, _ := strings.Cut(op, " ")
		path = param.ReplaceAllStringFunc(path, func(p string) string {
			if p == "{id}" {
				return ses.ID
			}
			return "x.txt"
		})
		if method == "DELETE" {
			continue // it would end the session the others use
		}
		status, _, body := f.raw(t, method, path, strings.NewReader(`{}`), "Content-Type", "application/json")
		var env codecell.Envelope
		_ = json.Unmarshal(body, &env)
		if env.Code == server.CodeNotFound || env.Code == server.CodeMethodNotAllowed {
			t.Errorf("%s %s is documented but not served: %d %s", method, path, status, body)
		}
	}
	for name, typ := range map[string]any{
		"Limits": api.Limits{}, "Policy": api.Policy{}, "SessionSpec": api.SessionSpec{}, "Session": api.Session{},
		"SessionList": api.SessionList{}, "File": api.File{}, "FileList": api.FileList{}, "ArchiveResult": api.ArchiveResult{},
		"InputFile": api.InputFile{}, "Execution": api.Execution{}, "Output": api.Output{}, "Envelope": codecell.Envelope{},
		"Result": codecell.Result{}, "FileChange": codecell.FileChange{}, "ToolCall": codecell.ToolCall{},
		"GuardPolicy": codecell.GuardPolicy{}, "ToolPolicy": codecell.ToolPolicy{},
	} {
		schema, ok := doc.Components.Schemas[name]
		if !ok {
			t.Errorf("schema %s is missing", name)
			continue
		}
		var inDoc []string
		for p := range schema.Properties {
			inDoc = append(inDoc, p)
		}
		sort.Strings(inDoc)
		fields, required := jsonFields(reflect.TypeOf(typ))
		if !reflect.DeepEqual(inDoc, fields) {
			t.Errorf("schema %s has fields %v; the Go type has %v", name, inDoc, fields)
		}
		for _, r := range schema.Required {
			if !required[r] {
				t.Errorf("schema %s requires %s, which the Go type may leave out", name, r)
			}
		}
	}
}

// jsonFields are a struct's JSON field names, sorted, and which are always
// present (no omitempty).
func jsonFields(t reflect.Type) ([]string, map[string]bool) {
	var names []string
	always := map[string]bool{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		names = append(names, name)
		if !strings.Contains(opts, "omitempty") {
			always[name] = true
		}
	}
	sort.Strings(names)
	return names, always
}

// The document is valid OpenAPI 3.1 by the specification's JSON Schema, as
// a published validator reads it.
func TestOpenAPIValidates(t *testing.T) {
	skip := testenv.Missing(t, "CODECELL_REQUIRE_TOOLS")
	node, err := exec.LookPath("node")
	if err != nil {
		skip("node is not installed: %v", err)
	}
	prefix := testenv.NPM(t, "@seriousme/openapi-schema-validator", "2.11.0", skip)
	// An ES module finds its packages in the node_modules above it: the
	// script goes beside them, written whole under a name of its own.
	src, err := os.ReadFile("testdata/validate-openapi.mjs")
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(prefix, fmt.Sprintf("validate-openapi-%d.mjs", os.Getpid()))
	if err := os.WriteFile(script, src, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(script) })
	doc, err := filepath.Abs("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(node, script, doc).CombinedOutput()
	if err != nil {
		t.Fatalf("the validator: %v\n%s", err, out)
	}
	var res struct {
		Valid   bool            `json:"valid"`
		Version string          `json:"version"`
		Errors  json.RawMessage `json:"errors"`
	}
	if err := json.Unmarshal(out, &res); err != nil || !res.Valid || res.Version != "3.1" {
		t.Fatalf("openapi.json is not valid OpenAPI 3.1: %s", out)
	}
}

// A server whose default tier is auto runs a program that names the tier
// auto picks, and one that names auto: they are its default.
func TestDefaultTierByName(t *testing.T) {
	f := newFixture(t, func(s *server.Server) { s.Engine.Tier = "" })
	// Without a language, Python, or the file name's.
	res, err := f.c.Execute(context.Background(), "", api.Execution{Code: "6 * 7"})
	if err != nil || res.Status != codecell.StatusSuccess || res.Language != "python" || string(res.Value) != "42" {
		t.Fatalf("no language: %v %+v", err, res)
	}
	res, err = f.c.Execute(context.Background(), "", api.Execution{Code: "6 * 7", Filename: "main.js"})
	if err != nil || res.Status != codecell.StatusSuccess || res.Language != "javascript" {
		t.Fatalf("no language, main.js: %v %+v", err, res)
	}
	picked, env := f.srv.Engine.ResolveTier("auto")
	if env != nil {
		t.Fatal(env)
	}
	for _, name := range []string{picked.Name(), "auto", ""} {
		res, err := f.c.Execute(context.Background(), "", api.Execution{Language: "python", Code: "1", Tier: name})
		if err != nil || res.Status != codecell.StatusSuccess || res.Tier != picked.Name() {
			t.Fatalf("tier %q: %v %+v", name, err, res)
		}
	}
	status, _, body := f.raw(t, "POST", "/v1/executions", strings.NewReader(`{"language":"python","code":"1","tier":"local"}`), "Content-Type", "application/json")
	if status != 403 || envelopeOf(t, body).Code != server.CodeTierNotAllowed || !strings.Contains(string(body), picked.Name()) {
		t.Fatalf("another tier: %d %s", status, body)
	}
}

// A tier goes by two names where auto picks it, whichever of them the
// operator wrote: the configured default or the list of tiers offered.
func TestTierByEitherName(t *testing.T) {
	for _, tc := range []struct {
		name      string
		configure func(*server.Server)
	}{
		{"default native", nil},
		{"offered auto", func(s *server.Server) { s.Tiers = []string{"auto"} }},
		{"offered native", func(s *server.Server) { s.Tiers = []string{"native"} }},
		{"offered another", func(s *server.Server) { s.Engine.Tier = "auto"; s.Tiers = []string{"other"} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.configure)
			picked, env := f.srv.Engine.ResolveTier("auto")
			if env != nil || picked.Name() != "native" {
				t.Skipf("auto does not pick native here: %v", env)
			}
			for _, name := range []string{"native", "auto"} {
				res, err := f.c.Execute(context.Background(), "", api.Execution{Code: "1", Tier: name})
				if err != nil || res.Status != codecell.StatusSuccess || res.Tier != "native" {
					t.Fatalf("tier %q: %v %+v", name, err, res)
				}
				if _, err := f.c.CreateSession(context.Background(), api.SessionSpec{Tier: name}); err != nil {
					t.Fatalf("a session on tier %q: %v", name, err)
				}
			}
			status, _, body := f.raw(t, "POST", "/v1/executions", strings.NewReader(`{"code":"1","tier":"local"}`), "Content-Type", "application/json")
			refusal := envelopeOf(t, body)
			if status != 403 || refusal.Code != server.CodeTierNotAllowed || len(refusal.Hints) == 0 ||
				!strings.Contains(refusal.Hints[0], `"auto", "native"`) || strings.Contains(refusal.Hints[0], `"local"`) {
				t.Fatalf("another tier: %d %s", status, body)
			}
		})
	}
}
