package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codecell-dev/codecell"
	_ "github.com/codecell-dev/codecell/tier/local"
)

func testServer(t *testing.T) *Server {
	return &Server{Engine: &codecell.Engine{Tier: "local", Tools: &codecell.Toolbox{}}}
}

func connectHTTPTest(t *testing.T, url string) *sdk.ClientSession {
	client := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// A client that gives up on an execution ends it: the program is killed
// (the process it runs is gone), and the server goes on. The client may
// cancel the call, cancel it and close its session at once, or close its
// session with the call still running.
func TestCancelledExecution(t *testing.T) {
	s := testServer(t)
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	ts := httptest.NewServer(s.HTTPHandler(ctx))
	t.Cleanup(ts.Close)
	for _, mode := range []string{"cancel", "cancel and close", "drop", "end session"} {
		t.Run(mode, func(t *testing.T) {
			var cs *sdk.ClientSession
			raw := mode == "drop" || mode == "end session"
			if !raw {
				cs = connectHTTPTest(t, ts.URL)
			}
			sessionID := make(chan string, 1)
			left := make(chan time.Time, 1)
			word := fmt.Sprintf("cccancel%d", time.Now().UnixNano())
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var started atomic.Bool
			go func() {
				for i := 0; i < 500 && len(running(word)) == 0; i++ {
					time.Sleep(10 * time.Millisecond)
				}
				started.Store(len(running(word)) > 0)
				left <- time.Now()
				if mode == "end session" {
					req, _ := http.NewRequest("DELETE", ts.URL, nil)
					req.Header.Set("Mcp-Session-Id", <-sessionID)
					if res, err := http.DefaultClient.Do(req); err == nil {
						res.Body.Close()
					}
					return
				}
				cancel()
				if mode == "cancel and close" {
					cs.Close()
				}
			}()
			args := map[string]any{"language": "bash", "code": "exec -a " + word + " sleep 60\n"}
			var err error
			if raw {
				err = rawCall(ctx, ts.URL, args, sessionID)
			} else {
				_, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "execute", Arguments: args})
			}
			if err == nil {
				t.Fatal("the abandoned call returned a result")
			}
			deadline := time.Now().Add(10 * time.Second)
			for len(running(word)) > 0 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if procs := running(word); len(procs) > 0 {
				t.Fatalf("the abandoned program still runs: %v", procs)
			}
			if d := time.Since(<-left); d > 10*time.Second {
				t.Fatalf("the program ran on for %v after its client left", d)
			}
			if !started.Load() {
				t.Fatal("the program was not seen running before its client left: nothing was tested")
			}
			if mode != "cancel" {
				cancel()
				cs = connectHTTPTest(t, ts.URL)
			}
			res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "execute", Arguments: map[string]any{"code": "1"}})
			if err != nil || res.IsError {
				t.Fatalf("the next call: %v %+v", err, res)
			}
		})
	}
}

// rawCall opens an MCP session with plain HTTP requests and calls execute,
// so that cancelling ctx drops the request without a word to the server.
// The session's id goes to sessionID.
func rawCall(ctx context.Context, url string, args map[string]any, sessionID chan<- string) error {
	session := ""
	post := func(ctx context.Context, msg map[string]any) (*http.Response, error) {
		body, _ := json.Marshal(msg)
		req, _ := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		if res.StatusCode >= 300 {
			res.Body.Close()
			return nil, fmt.Errorf("%s: %s", msg["method"], res.Status)
		}
		return res, nil
	}
	res, err := post(context.Background(), map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-06-18", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "raw", "version": "1"}}})
	if err != nil {
		return err
	}
	session = res.Header.Get("Mcp-Session-Id")
	sessionID <- session
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res, err = post(context.Background(), map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"}); err != nil {
		return err
	}
	res.Body.Close()
	res, err = post(ctx, map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": map[string]any{"name": "execute", "arguments": args}})
	if err != nil {
		return err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	return fmt.Errorf("the call was not dropped: %s", b)
}

// running lists the processes whose command line holds word.
func running(word string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.Contains(string(b), word) {
			out = append(out, e.Name())
		}
	}
	return out
}

func connectInProcess(t *testing.T, s *Server) *sdk.ClientSession {
	return connectInProcessWith(t, s, nil)
}

// connectInProcessWith connects a client made with opts.
func connectInProcessWith(t *testing.T, s *Server, opts *sdk.ClientOptions) *sdk.ClientSession {
	t.Helper()
	return connectInProcessAt(t, s, opts, "")
}

// connectInProcessAt connects a client made with opts that asks for a
// protocol version ("" the latest).
func connectInProcessAt(t *testing.T, s *Server, opts *sdk.ClientOptions, version string) *sdk.ClientSession {
	t.Helper()
	ctx := context.Background()
	ct, st := sdk.NewInMemoryTransports()
	ss, err := s.SDKServer(ctx).Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, opts).Connect(ctx, ct, &sdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// Arguments outside what execute takes are refused with a Result that says
// what to send instead, and nothing runs.
func TestExecuteRefusesBadArguments(t *testing.T) {
	var logs bytes.Buffer
	s := testServer(t)
	s.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	s.Engine.Logger = s.Logger
	cs := connectInProcess(t, s)
	for _, c := range []struct {
		name string
		args map[string]any
		code string
	}{
		{"huge timeout", map[string]any{"code": "1", "timeout_seconds": 1e10}, codecell.CodeInvalidRequest},
		{"enormous timeout", map[string]any{"code": "1", "timeout_seconds": 1e300}, codecell.CodeInvalidRequest},
		{"timeout over the cap", map[string]any{"code": "1", "timeout_seconds": 601}, codecell.CodeInvalidRequest},
		{"negative timeout", map[string]any{"code": "1", "timeout_seconds": -1}, codecell.CodeInvalidRequest},
		{"zero timeout", map[string]any{"code": "1", "timeout_seconds": 0}, codecell.CodeInvalidRequest},
		{"tiny timeout", map[string]any{"code": "1", "timeout_seconds": 1e-12}, codecell.CodeInvalidRequest},
		{"timeout as text", map[string]any{"code": "1", "timeout_seconds": "10"}, codecell.CodeInvalidRequest},
		{"empty code", map[string]any{"code": " \n"}, codecell.CodeEmptyCode},
		{"no code", map[string]any{}, codecell.CodeEmptyCode},
		{"unknown language", map[string]any{"code": "1", "language": "cobol"}, codecell.CodeUnknownLanguage},
		{"sessionless server", map[string]any{"code": "1", "session": "s"}, codecell.CodeInvalidRequest},
		{"packages as text", map[string]any{"code": "1", "packages": "humanize"}, codecell.CodeInvalidRequest},
		{"an option as a package", map[string]any{"code": "1", "packages": map[string]any{"python": []string{"--index-url=https://evil.test"}}}, codecell.CodeInvalidRequest},
		{"packages of a language without", map[string]any{"code": "1", "packages": map[string]any{"bash": []string{"jq"}}}, codecell.CodeInvalidRequest},
		{"misspelt timeout", map[string]any{"code": "1", "timeout_second": 0.5}, codecell.CodeInvalidRequest},
		{"shortened language", map[string]any{"code": "1", "lang": "bash"}, codecell.CodeInvalidRequest},
	} {
		t.Run(c.name, func(t *testing.T) {
			logs.Reset()
			res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "execute", Arguments: c.args})
			if err != nil {
				t.Fatal(err)
			}
			var r codecell.Result
			b, _ := json.Marshal(res.StructuredContent)
			if err := json.Unmarshal(b, &r); err != nil {
				t.Fatal(err)
			}
			if !res.IsError || r.Status != codecell.StatusBlocked || r.Error == nil || r.Error.Code != c.code || len(r.Error.Hints) == 0 {
				t.Fatalf("want blocked %s with hints, got %s", c.code, b)
			}
			if r.ID == "" || r.ToolCalls == nil || r.ExitCode != -1 {
				t.Errorf("the refusal's Result is incomplete: %s", b)
			}
			if !strings.Contains(logs.String(), `"error_code":"`+c.code+`"`) {
				t.Errorf("the refusal left no log line: %q", logs.String())
			}
		})
	}
	// A misspelt argument is named with the one meant.
	for arg, want := range map[string]string{"timeout_second": `"timeout_seconds"`, "lang": `"language"`, "sesion": `"session"`} {
		res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "execute", Arguments: map[string]any{"code": "1", arg: "x"}})
		if err != nil {
			t.Fatal(err)
		}
		if text := res.Content[0].(*sdk.TextContent).Text; !strings.Contains(text, "did you mean "+want) {
			t.Errorf("%s: %s", arg, text)
		}
	}
	// A time limit inside the range is honoured.
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "execute", Arguments: map[string]any{
		"language": "bash", "code": "sleep 5", "timeout_seconds": 0.5}})
	if err != nil {
		t.Fatal(err)
	}
	if m := res.Meta["codecell"].(map[string]any)["run"].(map[string]any); m["status"] != "timeout" {
		t.Fatalf("a 0.5 s limit on sleep 5: %v", m)
	}
}

// Large output is carried once, the same way in the text and in the
// structured Result: a client may put either before the model.
func TestLargeOutputCappedAlike(t *testing.T) {
	cs := connectInProcess(t, testServer(t))
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "execute", Arguments: map[string]any{
		"language": "python", "code": "import sys\nsys.stdout.write('o' * 150_000)\nsys.stderr.write('e' * 150_000)\n'v' * 100_000"}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res.StructuredContent)
	var r codecell.Result
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	text := res.Content[0].(*sdk.TextContent).Text
	if len(b) > 60_000 || len(text) > 40_000 {
		t.Fatalf("the structured Result is %d bytes and the text %d", len(b), len(text))
	}
	if !r.StdoutTruncated || !r.StderrTruncated || r.Value != nil || !strings.Contains(r.Stdout, "characters left out here") {
		t.Fatalf("the structured Result was not capped: stdout %d, stderr %d, value %d bytes", len(r.Stdout), len(r.Stderr), len(r.Value))
	}
	w := strings.Join(r.Warnings, "\n")
	for _, want := range []string{"stdout was 150000 characters", "stderr was 150000 characters", "the value was 100002 bytes"} {
		if !strings.Contains(w, want) || !strings.Contains(text, want) {
			t.Errorf("the warnings lack %q:\n%s", want, w)
		}
	}
}

// A zero Server works: a zero Engine (tier auto, the default limits, no
// tools) behind it, as a zero server.Server has.
func TestZeroServer(t *testing.T) {
	cs := connectInProcess(t, &Server{})
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(tools.Tools) == 0 {
		t.Fatalf("%v %+v", err, tools)
	}
	r := executeResult(t, cs, map[string]any{"code": "6 * 7"})
	b, _ := json.Marshal(r)
	// auto runs it where this host can isolate, and refuses where it cannot.
	if !(r.Status == codecell.StatusSuccess && string(r.Value) == "42") && !(r.Status == codecell.StatusBlocked && r.Error.Code == codecell.CodeNoIsolation) {
		t.Fatalf("result %s", b)
	}
}

// executeResult calls execute with args and returns its Result.
func executeResult(t *testing.T, cs *sdk.ClientSession, args map[string]any) codecell.Result {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "execute", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	var r codecell.Result
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return r
}
