//go:build unix

package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codecell-dev/codecell"
)

// greetHandler is a well-behaved streamable HTTP MCP server with the tool
// greet.
func greetHandler() http.Handler {
	server := sdk.NewServer(&sdk.Implementation{Name: "http-test", Version: "1"}, nil)
	sdk.AddTool(server, &sdk.Tool{Name: "greet", Description: "Greets."},
		func(ctx context.Context, req *sdk.CallToolRequest, in struct{ Name string }) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "hello " + in.Name}}}, nil, nil
		})
	return sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server }, nil)
}

// rpcMethod is the JSON-RPC method of a POST's body, which it leaves for
// the next handler to read.
func rpcMethod(r *http.Request) string {
	if r.Method != http.MethodPost {
		return ""
	}
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	var msg struct{ Method string }
	json.Unmarshal(body, &msg)
	return msg.Method
}

// handlers counts the requests being handled, so that a test can check
// that codecell left none open.
type handlers struct {
	active atomic.Int64
	ended  chan struct{}
}

func newHandlers() *handlers { return &handlers{ended: make(chan struct{}, 1024)} }

func (h *handlers) wrap(f http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.active.Add(1)
		defer func() {
			h.active.Add(-1)
			select {
			case h.ended <- struct{}{}:
			default:
			}
		}()
		f(w, r)
	})
}

// waitIdle waits until no request is being handled: codecell closed them.
func (h *handlers) waitIdle(t *testing.T) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for h.active.Load() > 0 {
		select {
		case <-h.ended:
		case <-timeout:
			t.Fatalf("%d requests are still open after the Upstream closed", h.active.Load())
		}
	}
}

func httpUpstream(t *testing.T, url string, headers map[string]string) *Upstream {
	t.Helper()
	u := upstream(t, "web", ServerConfig{URL: url, Headers: headers})
	u.startTimeout = 10 * time.Second
	u.callTimeout = 10 * time.Second
	u.discoverTimeout = 200 * time.Millisecond
	return u
}

// A server that takes every request and never answers: the start fails at
// the start timeout (the SDK's notifications/cancelled, which the server
// holds too, does not hold up the start), and Close leaves no request
// open.
func TestHTTPServerHoldingEveryRequest(t *testing.T) {
	t.Parallel()
	h := newHandlers()
	ts := httptest.NewServer(h.wrap(func(w http.ResponseWriter, r *http.Request) {
		// Read the body: until then, the server cannot see the client go.
		rpcMethod(r)
		<-r.Context().Done()
	}))
	t.Cleanup(ts.Close)
	u := httpUpstream(t, ts.URL, nil)
	u.startTimeout = 500 * time.Millisecond
	began := time.Now()
	_, err := call(deadline(t, 30*time.Second), u, "greet", `{}`)
	took := time.Since(began)
	t.Logf("call failed after %s", took)
	wantEnvelope(t, err, codecell.KindUpstream, codecell.CodeUpstreamUnavailable, true, "start timeout of 500ms")
	// Not the five seconds the SDK gives its notifications/cancelled.
	if took > 3*time.Second {
		t.Errorf("the start failed %s after it began, beyond its start timeout of 500ms", took)
	}
	u.Close()
	h.waitIdle(t)
}

// A server that holds a call's request open without answering: the call
// ends at its deadline, and the server, which still answers a ping, keeps
// its session.
func TestHTTPServerHoldingACall(t *testing.T) {
	t.Parallel()
	h := newHandlers()
	real := greetHandler()
	var hold atomic.Bool
	hold.Store(true)
	ts := httptest.NewServer(h.wrap(func(w http.ResponseWriter, r *http.Request) {
		if rpcMethod(r) == "tools/call" && hold.Load() {
			<-r.Context().Done()
			return
		}
		real.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	u := httpUpstream(t, ts.URL, nil)
	toolsByName(t, u)
	began := time.Now()
	_, err := call(deadline(t, 300*time.Millisecond), u, "greet", `{"Name": "you"}`)
	t.Logf("call failed after %s", time.Since(began))
	wantEnvelope(t, err, codecell.KindTimeout, codecell.CodeToolTimeout, true, "web.greet did not answer in time")
	hold.Store(false)
	if got := mustCall(t, u, "greet", `{"Name": "again"}`); string(got) != `"hello again"` {
		t.Errorf("greet: %s", got)
	}
	u.Close()
	h.waitIdle(t)
}

// A server that answers a call with an event stream that never ends and
// never carries the answer, only notifications: the call ends at its
// deadline, and Close leaves no request open.
func TestHTTPServerWithAnEndlessStream(t *testing.T) {
	t.Parallel()
	h := newHandlers()
	real := greetHandler()
	ts := httptest.NewServer(h.wrap(func(w http.ResponseWriter, r *http.Request) {
		if rpcMethod(r) != "tools/call" {
			real.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		note := []byte(`event: message` + "\n" + `data: {"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"more"}}` + "\n\n")
		for r.Context().Err() == nil {
			if _, err := w.Write(note); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(ts.Close)
	u := httpUpstream(t, ts.URL, nil)
	toolsByName(t, u)
	began := time.Now()
	_, err := call(deadline(t, time.Second), u, "greet", `{"Name": "you"}`)
	t.Logf("call failed after %s: %v", time.Since(began), err)
	wantEnvelope(t, err, codecell.KindTimeout, codecell.CodeToolTimeout, true, "web.greet did not answer in time")
	u.Close()
	h.waitIdle(t)
}

// A server that answers a call with one event that never ends: codecell
// gives up on it at 16 MiB, as on a stdio server's line, instead of
// holding all of it, and stops reading it. (The SDK's streamable client takes a MaxEventSize of
// 0 as no limit, though its documentation says the default.) The server
// here stops at 256 MiB: a bounded bomb.
func TestHTTPServerWithAnEndlessEvent(t *testing.T) {
	t.Parallel()
	const bomb = 256 << 20
	real := greetHandler()
	wrote := make(chan int, 1)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rpcMethod(r) != "tools/call" {
			real.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		n, _ := w.Write([]byte("event: message\ndata: "))
		chunk := bytes.Repeat([]byte("x"), 64<<10)
		for n < bomb {
			m, err := w.Write(chunk)
			n += m
			if err != nil {
				break
			}
		}
		w.(http.Flusher).Flush()
		wrote <- n
		<-r.Context().Done()
	}))
	t.Cleanup(ts.Close)
	u := httpUpstream(t, ts.URL, nil)
	toolsByName(t, u)
	began := time.Now()
	_, err := call(deadline(t, 10*time.Second), u, "greet", `{"Name": "you"}`)
	t.Logf("call failed after %s: %v", time.Since(began), err)
	wantEnvelope(t, err, codecell.KindUpstream, codecell.CodeUpstreamUnavailable, true, "exceeded 16777216 bytes")
	// Nor is the rest of the event read (and discarded) once the call
	// has failed.
	if n := <-wrote; n >= bomb {
		t.Errorf("codecell read all %d MiB of one event", n>>20)
	} else {
		t.Logf("codecell stopped reading the event after the server wrote %d MiB", n>>20)
	}
}

// A server that redirects to itself without end: the start fails with an
// envelope that says so, in bounded time.
func TestHTTPServerRedirectingInALoop(t *testing.T) {
	t.Parallel()
	var ts *httptest.Server
	ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, ts.URL+"/again", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(ts.Close)
	u := httpUpstream(t, ts.URL, nil)
	began := time.Now()
	_, err := call(deadline(t, 30*time.Second), u, "greet", `{}`)
	t.Logf("call failed after %s: %v", time.Since(began), err)
	wantEnvelope(t, err, codecell.KindUpstream, codecell.CodeUpstreamUnavailable, true, "redirect")
}

// A server that redirects to another origin does not get the configured
// headers there: they hold secrets for the URL the user configured. The
// start fails with an envelope that names the new URL and says to
// configure it if it is trusted; a redirect within the origin is followed.
func TestHTTPServerRedirectingElsewhere(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	seen := map[string]bool{}
	real := greetHandler()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Header.Get("Authorization")+" "+r.Header.Get("X-Api-Key")] = true
		mu.Unlock()
		real.ServeHTTP(w, r)
	}))
	t.Cleanup(other.Close)
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/moved" {
			http.Redirect(w, r, "/mcp", http.StatusPermanentRedirect)
			return
		}
		if r.URL.Path == "/mcp" {
			real.ServeHTTP(w, r)
			return
		}
		http.Redirect(w, r, other.URL+"/mcp", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirector.Close)

	secrets := map[string]string{"Authorization": "Bearer secret", "X-Api-Key": "key"}
	u := httpUpstream(t, redirector.URL+"/elsewhere", secrets)
	_, err := call(deadline(t, 30*time.Second), u, "greet", `{"Name": "you"}`)
	t.Logf("call: %v", err)
	mu.Lock()
	if len(seen) > 0 {
		t.Errorf("the other origin saw the headers %v", seen)
	}
	mu.Unlock()
	if err == nil {
		t.Fatal("the call through a redirect to another origin succeeded")
	}
	env := wantEnvelope(t, err, codecell.KindUpstream, codecell.CodeUpstreamUnavailable, false, other.URL+"/mcp")
	if hints := strings.Join(env.Hints, " "); !strings.Contains(hints, "mcpServers.web") {
		t.Errorf("hints %q", env.Hints)
	}

	same := httpUpstream(t, redirector.URL+"/moved", secrets)
	if got := mustCall(t, same, "greet", `{"Name": "you"}`); string(got) != `"hello you"` {
		t.Errorf("greet through a redirect within the origin: %s", got)
	}
}
