package bridge

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// serve starts Serve on one end of a pipe and returns the other, as the
// program's side, with a line reader.
func serve(t *testing.T, h Handler) (net.Conn, *bufio.Reader, func()) {
	t.Helper()
	host, prog := net.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		Serve(ctx, host, h)
		close(done)
	}()
	stop := func() {
		cancel()
		prog.Close()
		host.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("Serve did not return after its connection closed")
		}
	}
	t.Cleanup(stop)
	return prog, bufio.NewReader(prog), stop
}

func send(t *testing.T, c net.Conn, line string) {
	t.Helper()
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		t.Fatal(err)
	}
}

func recv(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(line, "\n")
}

// handler adapts a function of a call's ctx, name and params.
func handler(f func(ctx context.Context, name string, params json.RawMessage) (json.RawMessage, error)) Handler {
	return func(r Request) Call {
		name, params := r.Name, r.Arguments
		return func(ctx context.Context) (json.RawMessage, error) { return f(ctx, name, params) }
	}
}

var echo = handler(func(ctx context.Context, name string, params json.RawMessage) (json.RawMessage, error) {
	switch name {
	case "echo":
		return params, nil
	case "fail":
		return nil, &Error{Envelope: json.RawMessage(`{"error_kind":"tool","error_code":"TOOL_FAILED","message":"no \"message\": here","retryable":false}`)}
	case "plain":
		return nil, errors.New("plain failure")
	}
	return json.RawMessage(`null`), nil
})

// The exact bytes matter: the shell client takes responses apart by place.
func TestWireFormat(t *testing.T) {
	c, r, _ := serve(t, echo)
	send(t, c, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"a":[1,2]}}}`)
	if got, want := recv(t, r), `{"jsonrpc":"2.0","id":1,"result":{"a":[1,2]}}`; got != want {
		t.Errorf("result:\n got %s\nwant %s", got, want)
	}
	send(t, c, `{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"fail"}}`)
	want := `{"jsonrpc":"2.0","id":"x","error":{"code":-32000,"data":{"error_kind":"tool","error_code":"TOOL_FAILED","message":"no \"message\": here","retryable":false},"message":"tool call failed"}}`
	if got := recv(t, r); got != want {
		t.Errorf("failure:\n got %s\nwant %s", got, want)
	}
	send(t, c, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"other"}}`)
	if got, want := recv(t, r), `{"jsonrpc":"2.0","id":2,"result":null}`; got != want {
		t.Errorf("null result:\n got %s\nwant %s", got, want)
	}
}

func TestBadRequests(t *testing.T) {
	c, r, _ := serve(t, echo)
	for _, tc := range []struct{ line, want string }{
		{`not json`, `"code":-32700`},
		{`{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"echo"}}`, `"code":-32600`},
		{`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo"}}`, `"code":-32600`},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, `"code":-32601`},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}`, `"code":-32602`},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"plain"}}`, `"message":"plain failure"`},
	} {
		send(t, c, tc.line)
		if got := recv(t, r); !strings.Contains(got, tc.want) {
			t.Errorf("%s: got %s, want it to contain %s", tc.line, got, tc.want)
		}
	}
	// After all that, the channel still serves.
	send(t, c, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":1}}`)
	if got := recv(t, r); got != `{"jsonrpc":"2.0","id":9,"result":1}` {
		t.Errorf("after bad requests: %s", got)
	}
}

func TestTooLong(t *testing.T) {
	c, r, _ := serve(t, echo)
	go func() {
		big := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":"` + strings.Repeat("x", MaxRequest) + `"}}`
		send(t, c, big)
		send(t, c, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":2}}`)
	}()
	if got := recv(t, r); !strings.Contains(got, "over the 8 MiB limit") {
		t.Errorf("a request over the limit: %.200s", got)
	}
	if got := recv(t, r); got != `{"jsonrpc":"2.0","id":2,"result":2}` {
		t.Errorf("the request after it: %s", got)
	}
}

// Calls sent at once are served at once: the handler holds every call until
// all of them have arrived.
func TestConcurrent(t *testing.T) {
	const n = 10
	var inFlight, peak atomic.Int32
	all := make(chan struct{})
	var once sync.Once
	h := handler(func(ctx context.Context, name string, params json.RawMessage) (json.RawMessage, error) {
		cur := inFlight.Add(1)
		for {
			p := peak.Load()
			if cur <= p || peak.CompareAndSwap(p, cur) {
				break
			}
		}
		if cur == n {
			once.Do(func() { close(all) })
		}
		select {
		case <-all:
		case <-time.After(5 * time.Second):
		}
		inFlight.Add(-1)
		return params, nil
	})
	c, r, _ := serve(t, h)
	go func() {
		for i := 0; i < n; i++ {
			send(t, c, `{"jsonrpc":"2.0","id":`+string(rune('0'+i))+`,"method":"tools/call","params":{"name":"x","arguments":`+string(rune('0'+i))+`}}`)
		}
	}()
	seen := map[string]bool{}
	for i := 0; i < n; i++ {
		var resp response
		if err := json.Unmarshal([]byte(recv(t, r)), &resp); err != nil {
			t.Fatal(err)
		}
		if string(resp.ID) != string(resp.Result) {
			t.Errorf("response %s carries the result %s of another call", resp.ID, resp.Result)
		}
		seen[string(resp.ID)] = true
	}
	if len(seen) != n || peak.Load() != n {
		t.Errorf("%d distinct responses, %d calls at once at the peak; want %d and %d", len(seen), peak.Load(), n, n)
	}
}

// Closing the program's end ends Serve, and the calls still in flight see
// their context end.
func TestCloseCancels(t *testing.T) {
	cancelled, started := make(chan struct{}), make(chan struct{})
	h := handler(func(ctx context.Context, name string, params json.RawMessage) (json.RawMessage, error) {
		close(started)
		<-ctx.Done()
		close(cancelled)
		return nil, ctx.Err()
	})
	c, _, stop := serve(t, h)
	send(t, c, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow"}}`)
	<-started
	stop()
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the call in flight was not cancelled")
	}
}

// The handler sees the calls in the order they arrive, even though they run
// at once.
func TestOrder(t *testing.T) {
	var mu sync.Mutex
	var order []string
	h := func(r Request) Call {
		name, params := r.Name, r.Arguments
		mu.Lock()
		order = append(order, name)
		mu.Unlock()
		return func(ctx context.Context) (json.RawMessage, error) { return params, nil }
	}
	c, r, _ := serve(t, h)
	go func() {
		for i := 0; i < 20; i++ {
			send(t, c, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t`+string(rune('a'+i))+`"}}`)
		}
	}()
	for i := 0; i < 20; i++ {
		recv(t, r)
	}
	mu.Lock()
	defer mu.Unlock()
	for i, name := range order {
		if want := "t" + string(rune('a'+i)); name != want {
			t.Fatalf("the handler saw %v: call %d was %s, want %s", order, i, name, want)
		}
	}
}

// A request that cannot be taken whole is answered with its id when the id
// comes before the fault: with calls served at once, its caller finds its
// answer by the id alone.
func TestFaultyRequestKeepsItsID(t *testing.T) {
	c, r, _ := serve(t, echo)
	for _, tc := range []struct{ line, want string }{
		{`{"jsonrpc":"2.0","id":41,"method":"tools/call","params":{"name":"echo","arguments":{"a":}}}`, `{"jsonrpc":"2.0","id":41,"error":{"code":-32700,`},
		{`{"jsonrpc":"2.0","id":"s1","method":"tools/call","params":{"name":"echo","arguments":[}}`, `{"jsonrpc":"2.0","id":"s1","error":{"code":-32700,`},
		{`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo","arguments":{"a":}},"id":42}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,`},
		{`{"jsonrpc":"2.0","id":{"a":1},"method":"tools/call","params":{"name":"echo","arguments":[}}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,`},
		{`[1, 2`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,`},
		{`{"jsonrpc":"2.0","id":43,"method":"tools/call","params":{"name":"echo","arguments":"` + strings.Repeat("x", MaxRequest) + `"}}`, `{"jsonrpc":"2.0","id":43,"error":{"code":-32600,`},
	} {
		go func() { _, _ = c.Write([]byte(tc.line + "\n")) }()
		if got := recv(t, r); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%.100s:\n got %s\nwant it to start %s", tc.line, got, tc.want)
		}
	}
}

// A request that gives a key twice reaches no tool: the host would act on
// the last of the two, and the tool the arguments go on to may read the
// first. Each id it gives is answered, and the channel goes on serving.
func TestDuplicateKeys(t *testing.T) {
	var called atomic.Int32
	c, r, _ := serve(t, handler(func(ctx context.Context, name string, params json.RawMessage) (json.RawMessage, error) {
		called.Add(1)
		return params, nil
	}))
	// A missing answer fails the test rather than hang it.
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	for _, tc := range []struct{ line, key, where string }{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fs.read","arguments":{"path":"/ok","path":"/etc/shadow"}}}`, "path", "params.arguments"},
		{`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"safe","arguments":{},"name":"danger"}}`, "name", "params"},
		{`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"x","arguments":{"q":[{"a":1,"\u0061":2}]}}}`, "a", "params.arguments.q[0]"},
		{`{"jsonrpc":"2.0","id":4,"method":"handles/read","method":"tools/call","params":{"name":"x"}}`, "method", "top-level"},
		// In two spellings: a rule on the arguments reads "path", a tool
		// server that decodes them into a Go struct takes "PATH".
		{`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"fs.read","arguments":{"path":"/ok","PATH":"/etc/shadow"}}}`, "PATH", "params.arguments"},
		{`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"safe","arguments":{},"Name":"danger"}}`, "Name", "params"},
	} {
		send(t, c, tc.line)
		got := recv(t, r)
		if !strings.Contains(got, `"code":-32600`) || !strings.Contains(got, `\"`+tc.key+`\" twice`) || !strings.Contains(got, tc.where) || !strings.Contains(got, "give each key once") {
			t.Errorf("%s: got %s", tc.line, got)
		}
	}
	send(t, c, `{"jsonrpc":"2.0","id":5,"method":"tools/call","id":6,"params":{"name":"x"}}`)
	ids := map[string]bool{}
	for range 2 {
		var resp struct{ ID json.RawMessage }
		if err := json.Unmarshal([]byte(recv(t, r)), &resp); err != nil {
			t.Fatal(err)
		}
		ids[string(resp.ID)] = true
	}
	if !ids["5"] || !ids["6"] {
		t.Errorf("an id given twice: answered %v, want both", ids)
	}
	send(t, c, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"a":{"a":1},"b":[{"a":1},{"a":2}]}}}`)
	if got := recv(t, r); got != `{"jsonrpc":"2.0","id":7,"result":{"a":{"a":1},"b":[{"a":1},{"a":2}]}}` {
		t.Errorf("a valid request: %s", got)
	}
	if n := called.Load(); n != 1 {
		t.Errorf("%d calls reached the tool, want the valid one only", n)
	}
}
