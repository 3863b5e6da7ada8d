//go:build unix

package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/testenv"
)

// serverBin is the test server of testdata/server, built once by TestMain.
var serverBin string

func TestMain(m *testing.M) {
	codecell.Init()
	var err error
	if serverBin, err = testenv.BuildMCPServer(); err != nil {
		fmt.Fprintln(os.Stderr, "building the test server:", err)
		os.Exit(1)
	}
	os.Exit(testenv.Run(m))
}

// testLogger logs to t.Log until the test ends; the SDK and the Upstream's
// background work may log a little later.
func testLogger(t *testing.T) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct {
	t    *testing.T
	mu   sync.Mutex
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}

// newTestUpstream returns an Upstream of the test server, closed when the
// test ends.
func newTestUpstream(t *testing.T, cfg ServerConfig) *Upstream {
	t.Helper()
	return upstream(t, "t", cfg)
}

// upstream is newTestUpstream under another name than "t".
func upstream(t *testing.T, name string, cfg ServerConfig) *Upstream {
	t.Helper()
	if cfg.Command == "" && cfg.URL == "" {
		cfg.Command = serverBin
	}
	u := NewUpstream(name, cfg, WithLogger(testLogger(t)))
	t.Cleanup(func() {
		if err := u.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return u
}

func deadline(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// call calls a tool of u with params given as JSON text.
func call(ctx context.Context, u *Upstream, tool, params string) (json.RawMessage, error) {
	return u.call(ctx, tool, json.RawMessage(params))
}

func mustCall(t *testing.T, u *Upstream, tool, params string) json.RawMessage {
	t.Helper()
	res, err := call(deadline(t, 20*time.Second), u, tool, params)
	if err != nil {
		t.Fatalf("%s %s: %v", tool, params, err)
	}
	return res
}

func envelope(t *testing.T, err error) *codecell.Envelope {
	t.Helper()
	var env *codecell.Envelope
	if !errors.As(err, &env) {
		t.Fatalf("error %v (%T) is not an *Envelope", err, err)
	}
	return env
}

func wantEnvelope(t *testing.T, err error, kind codecell.ErrorKind, code string, retryable bool, msgHas string) *codecell.Envelope {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %s", code)
	}
	env := envelope(t, err)
	if env.Kind != kind || env.Code != code || env.Retryable != retryable {
		t.Fatalf("envelope %s, want kind %s, code %s, retryable %v", env.JSON(), kind, code, retryable)
	}
	if !strings.Contains(env.Message, msgHas) {
		t.Fatalf("message %q does not contain %q", env.Message, msgHas)
	}
	return env
}

func serverPID(t *testing.T, u *Upstream) int {
	t.Helper()
	var out struct{ PID int }
	if err := json.Unmarshal(mustCall(t, u, "pid", "{}"), &out); err != nil || out.PID == 0 {
		t.Fatalf("pid: %v %+v", err, out)
	}
	return out.PID
}

// exists reports whether a process with this pid exists, zombies included:
// a server that was stopped but not reaped still counts.
func exists(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}

func waitGone(t *testing.T, pid int, within time.Duration) {
	t.Helper()
	for end := time.Now().Add(within); exists(pid); {
		if time.Now().After(end) {
			t.Fatalf("process %d still exists after %s", pid, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func toolsByName(t *testing.T, src codecell.ToolSource) map[string]codecell.Tool {
	t.Helper()
	tools, err := src.Tools(deadline(t, 30*time.Second))
	if err != nil {
		t.Fatalf("Tools: %v", err)
	}
	m := map[string]codecell.Tool{}
	for _, tool := range tools {
		m[tool.Name] = tool
	}
	return m
}

func TestToolsOfTheTestServer(t *testing.T) {
	t.Parallel()
	u := newTestUpstream(t, ServerConfig{})
	tools := toolsByName(t, u)
	for _, name := range []string{"echo", "add", "fail", "slow", "crash", "big", "env", "pid"} {
		if _, ok := tools[name]; !ok {
			t.Errorf("no tool %q in %v", name, tools)
		}
	}
	echo := tools["echo"]
	if echo.Description != "Echoes its text, as structured content." {
		t.Errorf("echo's description: %q", echo.Description)
	}
	var in, out struct {
		Type       string
		Properties map[string]struct{ Type, Description string }
	}
	if err := json.Unmarshal(echo.InputSchema, &in); err != nil || in.Properties["text"].Type != "string" || in.Properties["text"].Description != "the text to echo" {
		t.Errorf("echo's input schema: %s (%v)", echo.InputSchema, err)
	}
	if err := json.Unmarshal(echo.OutputSchema, &out); err != nil || out.Properties["text"].Type != "string" {
		t.Errorf("echo's output schema: %s (%v)", echo.OutputSchema, err)
	}
	if tools["add"].OutputSchema != nil {
		t.Errorf("add has an output schema: %s", tools["add"].OutputSchema)
	}

	// A Tool's Call reaches the server.
	res, err := echo.Call(deadline(t, 20*time.Second), json.RawMessage(`{"text": "a <b> & c"}`))
	if err != nil || string(res) != `{"text":"a <b> & c"}` {
		t.Errorf("echo: %s, %v; want the structured content", res, err)
	}
}

func TestCallResults(t *testing.T) {
	t.Parallel()
	u := newTestUpstream(t, ServerConfig{})

	if got := mustCall(t, u, "add", `{"a": 2, "b": 3}`); string(got) != `"5"` {
		t.Errorf("add: %s, want the text as a JSON string", got)
	}
	if got := mustCall(t, u, "stats", ``); !strings.Contains(string(got), `"max_concurrent":0`) {
		t.Errorf("stats with no params: %s", got)
	}
	var content []map[string]any
	if err := json.Unmarshal(mustCall(t, u, "image", `{}`), &content); err != nil || len(content) != 2 ||
		content[0]["type"] != "text" || content[1]["type"] != "image" || content[1]["mimeType"] != "image/png" || content[1]["data"] != "iVBORw==" {
		t.Errorf("image: %v %v, want the content array", content, err)
	}
	var big string
	if err := json.Unmarshal(mustCall(t, u, "big", `{"bytes": 1048576}`), &big); err != nil || len(big) != 1<<20 || strings.Trim(big, "x") != "" {
		t.Errorf("big: %d bytes, %v", len(big), err)
	}

	_, err := call(deadline(t, 20*time.Second), u, "fail", `{}`)
	env := wantEnvelope(t, err, codecell.KindTool, codecell.CodeToolFailed, false, "fail always fails: the <answer> is no")
	if env.Meta["server"] != "t" || env.Meta["tool"] != "fail" {
		t.Errorf("fail's meta: %v", env.Meta)
	}

	_, err = call(deadline(t, 20*time.Second), u, "internal", `{}`)
	wantEnvelope(t, err, codecell.KindUpstream, codecell.CodeUpstreamError, true, "the database is down")

	_, err = call(deadline(t, 20*time.Second), u, "nope", `{}`)
	env = wantEnvelope(t, err, codecell.KindUpstream, codecell.CodeUpstreamError, false, "-32602")
	if !strings.Contains(env.Message, "nope") {
		t.Errorf("unknown tool: %s", env.JSON())
	}

	_, err = call(deadline(t, 20*time.Second), u, "echo", `["not", "an", "object"]`)
	wantEnvelope(t, err, codecell.KindValidation, codecell.CodeToolBadParams, false, "JSON object")

	// Through a Toolbox, as programs reach it.
	var box codecell.Toolbox
	if err := box.AddSource(u); err != nil {
		t.Fatal(err)
	}
	tool, ok, err := box.Find(deadline(t, 20*time.Second), "t.add")
	if err != nil || !ok {
		t.Fatalf("Find t.add: %v %v", ok, err)
	}
	if got, err := tool.Call(deadline(t, 20*time.Second), json.RawMessage(`{"a": 1.5, "b": 1}`)); err != nil || string(got) != `"2.5"` {
		t.Errorf("t.add through the Toolbox: %s %v", got, err)
	}
}

// TestResultMapping covers the shapes the test server does not produce.
func TestResultMapping(t *testing.T) {
	u := NewUpstream("s", ServerConfig{Command: "unused"})
	defer u.Close()
	text := func(s string) sdk.Content { return &sdk.TextContent{Text: s} }
	for _, tc := range []struct {
		name string
		res  *sdk.CallToolResult
		want string
	}{
		{"structured wins over text", &sdk.CallToolResult{Content: []sdk.Content{text(`{"a":1}`)}, StructuredContent: map[string]any{"a": 1}}, `{"a":1}`},
		{"structured array", &sdk.CallToolResult{StructuredContent: []any{1, "x"}}, `[1,"x"]`},
		{"texts joined", &sdk.CallToolResult{Content: []sdk.Content{text("one"), text("two")}}, `"one\ntwo"`},
		{"empty", &sdk.CallToolResult{}, `null`},
		{"resource", &sdk.CallToolResult{Content: []sdk.Content{&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///a", Text: "A"}}}},
			`[{"type":"resource","resource":{"uri":"file:///a","text":"A"}}]`},
	} {
		got, err := u.result("tool", tc.res)
		if err != nil || string(got) != tc.want {
			t.Errorf("%s: %s %v, want %s", tc.name, got, err, tc.want)
		}
	}

	long := strings.Repeat("é", 5000) // 10,000 bytes
	_, err := u.result("tool", &sdk.CallToolResult{IsError: true, Content: []sdk.Content{text(long)}})
	env := wantEnvelope(t, err, codecell.KindTool, codecell.CodeToolFailed, false, "… [")
	if len(env.Message) > maxErrorText+40 || !strings.HasPrefix(env.Message, "éé") || !json.Valid([]byte(env.JSON())) {
		t.Errorf("long error text: %d bytes: %.40q…", len(env.Message), env.Message)
	}
	_, err = u.result("tool", &sdk.CallToolResult{IsError: true})
	wantEnvelope(t, err, codecell.KindTool, codecell.CodeToolFailed, false, "s.tool failed")
}

func TestConcurrentCallsShareOneSession(t *testing.T) {
	t.Parallel()
	u := newTestUpstream(t, ServerConfig{})
	pid := serverPID(t, u)
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			res, err := call(deadline(t, 30*time.Second), u, "slow", `{"ms": 1000}`)
			if err != nil {
				errs <- err
				return
			}
			var out struct{ Concurrent int }
			if err := json.Unmarshal(res, &out); err != nil || out.Concurrent < 1 {
				errs <- fmt.Errorf("slow: %s %v", res, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	var stats struct {
		MaxConcurrent int `json:"max_concurrent"`
	}
	if err := json.Unmarshal(mustCall(t, u, "stats", "{}"), &stats); err != nil || stats.MaxConcurrent < 4 {
		t.Errorf("the server saw at most %d calls of slow at once (%v), want >= 4", stats.MaxConcurrent, err)
	}
	if got := serverPID(t, u); got != pid {
		t.Errorf("the calls started another server: pid %d, then %d", pid, got)
	}
}

// capturedLog is a logger whose output a test can read.
type capturedLog struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (c *capturedLog) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.Write(p)
}

func (c *capturedLog) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

func TestCrashedServerIsStartedAgain(t *testing.T) {
	t.Parallel()
	logs := &capturedLog{}
	u := NewUpstream("t", ServerConfig{Command: serverBin}, WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	t.Cleanup(func() { u.Close() })
	pid := serverPID(t, u)

	_, err := call(deadline(t, 20*time.Second), u, "crash", `{}`)
	env := wantEnvelope(t, err, codecell.KindUpstream, codecell.CodeUpstreamUnavailable, true, `MCP server "t"`)
	t.Log(env.JSON())
	if !strings.Contains(env.Message, "exit status 3") {
		t.Errorf("the message does not say how the server ended: %s", env.Message)
	}
	// What the server printed goes to the host's log, never to the program.
	if strings.Contains(env.Message, "crashing on purpose") || !strings.Contains(logs.String(), "crashing on purpose") {
		t.Errorf("the server's stderr: in the message %q; in the log %q", env.Message, logs.String())
	}
	if len(env.Hints) == 0 || !strings.Contains(env.Hints[0], "started again") {
		t.Errorf("hints: %q", env.Hints)
	}
	waitGone(t, pid, 10*time.Second) // reaped, not a zombie

	if got := mustCall(t, u, "echo", `{"text": "again"}`); string(got) != `{"text":"again"}` {
		t.Errorf("echo after the crash: %s", got)
	}
	if again := serverPID(t, u); again == pid {
		t.Errorf("the server after the crash has the crashed server's pid %d", pid)
	}
}

// A server that writes what is not JSON-RPC where its answers go has its
// session ended: the error says the session ended, not that the server
// exited, which it did not, and the next call starts it again.
func TestGarbageFromServer(t *testing.T) {
	t.Parallel()
	u := newTestUpstream(t, ServerConfig{})
	_, err := call(deadline(t, 20*time.Second), u, "garbage", `{}`)
	env := wantEnvelope(t, err, codecell.KindUpstream, codecell.CodeUpstreamUnavailable, true, `MCP server "t"`)
	if strings.Contains(env.Message, "exited") {
		t.Errorf("the message says the server exited: %s", env.Message)
	}
	if got := mustCall(t, u, "echo", `{"text": "again"}`); string(got) != `{"text":"again"}` {
		t.Errorf("echo after the garbage: %s", got)
	}
}

func TestServerExitingBetweenCallsIsStartedAgain(t *testing.T) {
	t.Parallel()
	u := newTestUpstream(t, ServerConfig{})
	pid := serverPID(t, u)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid, 10*time.Second)
	// Whether or not the loss was noticed yet, the call is not sent to the
	// dead server: it starts a new one.
	if got := mustCall(t, u, "add", `{"a": 1, "b": 1}`); string(got) != `"2"` {
		t.Errorf("add after the server was killed: %s", got)
	}
}

func TestTimeoutCancelsTheCallAndKeepsTheServer(t *testing.T) {
	t.Parallel()
	u := newTestUpstream(t, ServerConfig{})
	pid := serverPID(t, u)

	began := time.Now()
	_, err := call(deadline(t, 300*time.Millisecond), u, "slow", `{"ms": 30000}`)
	env := wantEnvelope(t, err, codecell.KindTimeout, codecell.CodeToolTimeout, true, "t.slow did not answer in time")
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("the call returned after %s, not at its deadline", took)
	}
	t.Log(env.JSON())

	// notifications/cancelled reached the server, which stopped the sleep.
	for end := time.Now().Add(10 * time.Second); ; {
		var stats struct{ Cancelled int }
		if err := json.Unmarshal(mustCall(t, u, "stats", "{}"), &stats); err != nil {
			t.Fatal(err)
		}
		if stats.Cancelled == 1 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the server saw %d cancelled calls, want 1", stats.Cancelled)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := mustCall(t, u, "echo", `{"text": "still here"}`); string(got) != `{"text":"still here"}` {
		t.Errorf("echo after the timeout: %s", got)
	}
	if got := serverPID(t, u); got != pid {
		t.Errorf("a timeout restarted the server: pid %d, then %d", pid, got)
	}
}

func TestHungServerIsStartedAgain(t *testing.T) {
	t.Parallel()
	u := newTestUpstream(t, ServerConfig{})
	pid := serverPID(t, u)

	res, err := call(deadline(t, 500*time.Millisecond), u, "freeze", `{}`)
	if err == nil {
		t.Fatalf("freeze answered %s", res)
	}
	wantEnvelope(t, err, codecell.KindTimeout, codecell.CodeToolTimeout, true, "t.freeze")

	// The ping that follows the timeout gets no answer: the server is
	// dropped (killed, stopped as it is) and the next calls start another.
	ctx := deadline(t, 30*time.Second)
	for {
		res, err := call(deadline(t, time.Second), u, "echo", `{"text": "thawed?"}`)
		if err == nil {
			if string(res) != `{"text":"thawed?"}` {
				t.Fatalf("echo: %s", res)
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the hung server was not replaced: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	waitGone(t, pid, 10*time.Second)
}

func TestServerEnvironment(t *testing.T) {
	t.Setenv("CODECELL_TEST_SECRET", "s3cret")
	t.Setenv("CODECELL_TEST_PASS", "passed")
	u := newTestUpstream(t, ServerConfig{
		Env: map[string]string{
			"GIVEN":     "plain",
			"FROM_VAR":  "${CODECELL_TEST_PASS}",
			"DEFAULTED": "${CODECELL_TEST_UNSET_VAR:-fallback}",
		},
	})
	for name, want := range map[string]string{
		"CODECELL_TEST_SECRET": `{"set":false,"value":""}`,
		"CODECELL_TEST_PASS":   `{"set":false,"value":""}`,
		"GIVEN":                `{"set":true,"value":"plain"}`,
		"FROM_VAR":             `{"set":true,"value":"passed"}`,
		"DEFAULTED":            `{"set":true,"value":"fallback"}`,
		"PATH":                 fmt.Sprintf(`{"set":true,"value":%q}`, os.Getenv("PATH")),
	} {
		if got := mustCall(t, u, "env", fmt.Sprintf(`{"name": %q}`, name)); string(got) != want {
			t.Errorf("%s in the server's environment: %s, want %s", name, got, want)
		}
	}
	var names string
	if err := json.Unmarshal(mustCall(t, u, "environ", "{}"), &names); err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{"PATH": true, "HOME": true, "LANG": true, "GIVEN": true, "FROM_VAR": true, "DEFAULTED": true}
	for _, name := range strings.Fields(names) {
		if !allowed[name] {
			t.Errorf("the server's environment holds %s", name)
		}
	}
}

func TestUnsetVariableIsAClearError(t *testing.T) {
	u := newTestUpstream(t, ServerConfig{Env: map[string]string{"TOKEN": "${CODECELL_TEST_NOT_SET}"}})
	_, err := call(deadline(t, 20*time.Second), u, "echo", `{}`)
	env := wantEnvelope(t, err, codecell.KindUpstream, codecell.CodeUpstreamUnavailable, false, "${CODECELL_TEST_NOT_SET}")
	if !strings.Contains(env.Message, `"env"["TOKEN"]`) {
		t.Errorf("the message does not say where: %s", env.Message)
	}
	if _, err := u.Tools(deadline(t, 20*time.Second)); err == nil || !strings.Contains(err.Error(), "CODECELL_TEST_NOT_SET") {
		t.Errorf("Tools: %v", err)
	}
}

func TestStartFailures(t *testing.T) {
	t.Setenv("CODECELL_TEST_MODE", "exit-at-start")

	// ${VAR} in args; the server's stderr explains its failure, in the
	// host's log.
	logs := &capturedLog{}
	u := NewUpstream("t", ServerConfig{Command: serverBin, Args: []string{"${CODECELL_TEST_MODE}"}}, WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	t.Cleanup(func() { u.Close() })
	_, err := call(deadline(t, 20*time.Second), u, "echo", `{}`)
	env := wantEnvelope(t, err, codecell.KindUpstream, codecell.CodeUpstreamUnavailable, true, "stderr is in codecell's log")
	t.Log(env.JSON())
	if !strings.Contains(logs.String(), "MISSING_API_KEY is not set") {
		t.Errorf("the log lacks the server's stderr: %s", logs.String())
	}

	missing := newTestUpstream(t, ServerConfig{Command: filepath.Join(t.TempDir(), "no-such-server")})
	_, err = missing.Tools(deadline(t, 20*time.Second))
	wantEnvelope(t, err, codecell.KindUpstream, codecell.CodeUpstreamUnavailable, false, "no-such-server")

	notInPath := newTestUpstream(t, ServerConfig{Command: "codecell-no-such-mcp-server"})
	_, err = call(deadline(t, 20*time.Second), notInPath, "x", `{}`)
	wantEnvelope(t, err, codecell.KindUpstream, codecell.CodeUpstreamUnavailable, false, "executable file not found")
}

func TestToolListChanged(t *testing.T) {
	t.Parallel()
	u := newTestUpstream(t, ServerConfig{})
	if _, ok := toolsByName(t, u)["extra"]; ok {
		t.Fatal("extra is there before add_tool")
	}
	mustCall(t, u, "add_tool", "{}")
	for end := time.Now().Add(10 * time.Second); ; {
		if extra, ok := toolsByName(t, u)["extra"]; ok {
			if res, err := extra.Call(deadline(t, 20*time.Second), nil); err != nil || string(res) != `"extra"` {
				t.Errorf("extra: %s %v", res, err)
			}
			break
		}
		if time.Now().After(end) {
			t.Fatal("the tool list was not refreshed after notifications/tools/list_changed")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestCloseStopsTheServerAndItsChildren(t *testing.T) {
	t.Parallel()
	u := NewUpstream("t", ServerConfig{Command: serverBin}, WithLogger(testLogger(t)))
	pid := serverPID(t, u)
	var child struct{ PID int }
	if err := json.Unmarshal(mustCall(t, u, "spawn", "{}"), &child); err != nil || !exists(child.PID) {
		t.Fatalf("spawn: %+v %v", child, err)
	}
	began := time.Now()
	if err := u.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	t.Logf("Close took %s", time.Since(began))
	waitGone(t, pid, 5*time.Second)
	// The child is not ours to reap: once killed, init reaps it.
	waitGone(t, child.PID, 10*time.Second)

	_, err := call(deadline(t, 5*time.Second), u, "echo", `{}`)
	wantEnvelope(t, err, codecell.KindUpstream, codecell.CodeUpstreamUnavailable, false, "closed")
	if err := u.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestCloseKillsAServerThatIgnoresStdinAndSIGTERM(t *testing.T) {
	t.Parallel()
	u := NewUpstream("t", ServerConfig{Command: serverBin}, WithLogger(testLogger(t)))
	pid := serverPID(t, u)
	mustCall(t, u, "linger", "{}")
	began := time.Now()
	if err := u.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	t.Logf("Close took %s", time.Since(began))
	waitGone(t, pid, 5*time.Second)
}

func TestCloseDoesNotWaitForCallsInFlight(t *testing.T) {
	t.Parallel()
	// The server says on stderr that the call reached it.
	frozen := make(chan struct{})
	var once sync.Once
	log := slog.New(slog.NewTextHandler(signalWriter{"freezing", func() { once.Do(func() { close(frozen) }) }}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	u := NewUpstream("t", ServerConfig{Command: serverBin}, WithLogger(log))
	pid := serverPID(t, u)
	done := make(chan error, 1)
	go func() {
		_, err := call(deadline(t, time.Minute), u, "freeze", `{}`)
		done <- err
	}()
	select {
	case <-frozen:
	case err := <-done:
		t.Fatalf("freeze answered: %v", err)
	}
	if err := u.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	waitGone(t, pid, 5*time.Second)
	select {
	case err := <-done:
		wantEnvelope(t, err, codecell.KindUpstream, codecell.CodeUpstreamUnavailable, true, "")
	case <-time.After(10 * time.Second):
		t.Fatal("the call in flight did not end when the server was closed")
	}
}

func TestEverythingServer(t *testing.T) {
	t.Parallel()
	index := testenv.Everything(t)
	u := newTestUpstream(t, ServerConfig{Command: "node", Args: []string{index, "stdio"}})
	tools := toolsByName(t, u)
	for _, name := range []string{"echo", "get-sum", "get-structured-content"} {
		if _, ok := tools[name]; !ok {
			t.Fatalf("no tool %q among %d tools", name, len(tools))
		}
	}

	if got := mustCall(t, u, "echo", `{"message": "hi"}`); string(got) != `"Echo: hi"` {
		t.Errorf("echo: %s", got)
	}
	var sum string
	if err := json.Unmarshal(mustCall(t, u, "get-sum", `{"a": 2, "b": 3}`), &sum); err != nil || !strings.Contains(sum, "5") {
		t.Errorf("get-sum: %q %v", sum, err)
	}

	// Call get-structured-content with the first value its schema allows.
	var schema struct {
		Properties map[string]struct {
			Enum []string `json:"enum"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	sc := tools["get-structured-content"]
	if err := json.Unmarshal(sc.InputSchema, &schema); err != nil || len(schema.Required) == 0 {
		t.Fatalf("get-structured-content's input schema: %s %v", sc.InputSchema, err)
	}
	params := map[string]string{}
	for _, name := range schema.Required {
		if enum := schema.Properties[name].Enum; len(enum) > 0 {
			params[name] = enum[0]
		}
	}
	p, _ := json.Marshal(params)
	res, err := sc.Call(deadline(t, 20*time.Second), p)
	if err != nil {
		t.Fatalf("get-structured-content %s: %v", p, err)
	}
	var obj map[string]any
	if err := json.Unmarshal(res, &obj); err != nil || len(obj) == 0 {
		t.Errorf("get-structured-content %s: %s, want a JSON object", p, res)
	}
	if sc.OutputSchema == nil {
		t.Error("get-structured-content has no output schema")
	}
}

func TestStreamableHTTPServer(t *testing.T) {
	t.Setenv("CODECELL_TEST_TOKEN", "tok")
	server := sdk.NewServer(&sdk.Implementation{Name: "http-test", Version: "1"}, nil)
	sdk.AddTool(server, &sdk.Tool{Name: "greet", Description: "Greets."},
		func(ctx context.Context, req *sdk.CallToolRequest, in struct{ Name string }) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "hello " + in.Name}}}, nil, nil
		})
	handler := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server }, nil)
	var mu sync.Mutex
	auth := map[string]bool{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth[r.Header.Get("Authorization")] = true
		mu.Unlock()
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close) // after the Upstream's Close, which newTestUpstream registers later

	u := newTestUpstream(t, ServerConfig{
		Type:    "http",
		URL:     ts.URL,
		Headers: map[string]string{"Authorization": "Bearer ${CODECELL_TEST_TOKEN}"},
	})
	tools := toolsByName(t, u)
	greet, ok := tools["greet"]
	if !ok || greet.Description != "Greets." {
		t.Fatalf("tools: %v", tools)
	}
	if res, err := greet.Call(deadline(t, 20*time.Second), json.RawMessage(`{"Name": "you"}`)); err != nil || string(res) != `"hello you"` {
		t.Errorf("greet: %s %v", res, err)
	}
	_, err := call(deadline(t, 20*time.Second), u, "nope", `{}`)
	wantEnvelope(t, err, codecell.KindUpstream, codecell.CodeUpstreamError, false, "nope")
	if err := u.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(auth) != 1 || !auth["Bearer tok"] {
		t.Errorf("Authorization headers seen: %v, want only %q", auth, "Bearer tok")
	}
}

func TestHTTPServerThatLostTheSession(t *testing.T) {
	t.Parallel()
	newHandler := func() http.Handler {
		server := sdk.NewServer(&sdk.Implementation{Name: "http-test", Version: "1"}, nil)
		sdk.AddTool(server, &sdk.Tool{Name: "ping"},
			func(ctx context.Context, req *sdk.CallToolRequest, in struct{}) (*sdk.CallToolResult, any, error) {
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "pong"}}}, nil, nil
			})
		return sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server }, nil)
	}
	var mu sync.Mutex
	handler := newHandler()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		h := handler
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close) // after the Upstream's Close, which newTestUpstream registers later
	u := newTestUpstream(t, ServerConfig{URL: ts.URL})
	if got := mustCall(t, u, "ping", "{}"); string(got) != `"pong"` {
		t.Fatalf("ping: %s", got)
	}

	// A restarted server knows nothing of the session: it answers 404,
	// which says the call did not run, so the call is sent again on a new
	// session.
	mu.Lock()
	handler = newHandler()
	mu.Unlock()
	if got := mustCall(t, u, "ping", "{}"); string(got) != `"pong"` {
		t.Errorf("ping after the server lost the session: %s", got)
	}
}

func TestUnreachableHTTPServer(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(http.NotFoundHandler())
	url := ts.URL
	ts.Close() // nothing listens there now
	u := newTestUpstream(t, ServerConfig{URL: url})
	_, err := call(deadline(t, 20*time.Second), u, "x", `{}`)
	wantEnvelope(t, err, codecell.KindUpstream, codecell.CodeUpstreamUnavailable, true, "cannot be reached")
}

// signalWriter calls f when a line written to it holds word.
type signalWriter struct {
	word string
	f    func()
}

func (w signalWriter) Write(p []byte) (int, error) {
	if strings.Contains(string(p), w.word) {
		w.f()
	}
	return len(p), nil
}
