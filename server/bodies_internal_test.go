package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/session"
)

// bodiesServer serves the REST API, with a stand-in for /mcp that answers
// with the length of the body it got, for two principals.
func bodiesServer(t *testing.T, configure func(*Server)) (*Server, *httptest.Server) {
	t.Helper()
	store, err := session.NewStore(t.TempDir(), time.Hour, 20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	s := &Server{Engine: &codecell.Engine{Tier: "local"}, Sessions: store,
		Tokens: []Token{{Token: "alice-token", Principal: session.Principal{Name: "alice"}}, {Token: "bob-token", Principal: session.Principal{Name: "bob"}}},
		MCP: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, err := io.ReadAll(r.Body)
			if err != nil {
				t.Errorf("the MCP handler read: %v", err)
			}
			fmt.Fprintf(w, "%d", len(b))
		})}
	if configure != nil {
		configure(s)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return s, ts
}

// stalledBody sends a request whose body stops one byte short of its
// Content-Length, and returns the connection and a channel that receives
// the status of the answer, if one comes before the connection closes.
func stalledBody(t *testing.T, ts *httptest.Server, tok, path string, size int) (net.Conn, <-chan int) {
	t.Helper()
	conn, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	status := make(chan int, 1)
	go func() {
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", path, tok, size)
		// Refused, the server stops reading: the write fails then.
		_, _ = conn.Write(append([]byte(`{"s":"`), bytes.Repeat([]byte("x"), size-7)...))
	}()
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			close(status)
			return
		}
		resp.Body.Close()
		status <- resp.StatusCode
	}()
	return conn, status
}

func request(t *testing.T, ts *httptest.Server, tok, method, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Many requests to /mcp whose bodies stop just short of their end are
// what a client does to make the server hold their bytes: the server holds
// no more than its share of maxHeldBodies for one principal, refuses the
// rest at once with 503 SERVER_BUSY, and serves another principal
// meanwhile; once they go, it serves them again.
func TestHeldBodiesBounded(t *testing.T) {
	s, ts := bodiesServer(t, nil)
	share := s.bodies.share
	if share == 0 || share > maxHeldBodies/2+maxMCPBody {
		t.Fatalf("alice's share is %d bytes", share)
	}
	// One after the other, so that what is held is known: each is held
	// whole but for its last byte, or refused.
	const n = 24 // 96 MiB, over maxHeldBodies, and thrice alice's share
	var conns []net.Conn
	var held int64
	for i := range n {
		conn, status := stalledBody(t, ts, "alice-token", "/mcp", maxMCPBody)
		conns = append(conns, conn)
		if held+maxMCPBody-1 <= share {
			held += maxMCPBody - 1
			waitHeld(t, s, held)
			continue
		}
		select {
		case code := <-status:
			if code != http.StatusServiceUnavailable {
				t.Fatalf("stalled body %d was answered %d", i, code)
			}
		case <-time.After(time.Minute):
			t.Fatalf("stalled body %d was not refused; the server holds %d bytes of bodies (alice's share %d)", i, s.bodies.Held(), share)
		}
		if s.bodies.Held() != held {
			t.Fatalf("the server holds %d bytes of bodies, not %d", s.bodies.Held(), held)
		}
	}
	// Bob is served meanwhile; alice's refusal says what to do.
	if code, body := request(t, ts, "bob-token", "POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"ping"}`); code != http.StatusOK || body != "40" {
		t.Fatalf("bob's /mcp request: %d %s", code, body)
	}
	if code, body := request(t, ts, "bob-token", "POST", "/v1/sessions", `{}`); code != http.StatusCreated {
		t.Fatalf("bob's new session: %d %s", code, body)
	}
	code, body := request(t, ts, "alice-token", "POST", "/mcp", `{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	var env codecell.Envelope
	if json.Unmarshal([]byte(body), &env); code != http.StatusServiceUnavailable || env.Code != CodeServerBusy || !env.Retryable {
		t.Fatalf("alice's next large request: %d %s", code, body)
	}
	for _, c := range conns {
		c.Close()
	}
	waitHeld(t, s, 0)
	big := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"s":"` + strings.Repeat("y", maxMCPBody-100) + `"}}`
	if code, body := request(t, ts, "alice-token", "POST", "/mcp", big); code != http.StatusOK || body != fmt.Sprint(len(big)) {
		t.Fatalf("alice's request once the others went: %d %.200s", code, body)
	}
	if code, body := request(t, ts, "alice-token", "POST", "/mcp", big+strings.Repeat(" ", 200)); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("a request over %d bytes: %d %.200s", maxMCPBody, code, body)
	}
}

// waitHeld waits until the server holds n bytes of bodies.
func waitHeld(t *testing.T, s *Server, n int64) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for s.bodies.Held() != n {
		if time.Now().After(deadline) {
			t.Fatalf("the server holds %d bytes of bodies, not %d", s.bodies.Held(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The JSON bodies of routes other than executions are small: a large one
// is refused without being held.
func TestSmallBodiesAreSmall(t *testing.T) {
	_, ts := bodiesServer(t, nil)
	large := `{"tier":"` + strings.Repeat("x", maxSmallBody) + `"}`
	for _, path := range []string{"/v1/sessions", "/v1/executions/e1/approvals/a1"} {
		code, body := request(t, ts, "alice-token", "POST", path, large)
		var env codecell.Envelope
		if json.Unmarshal([]byte(body), &env); code != http.StatusRequestEntityTooLarge || env.Code != CodeRequestTooLarge {
			t.Errorf("POST %s with %d bytes: %d %s", path, len(large), code, body)
		}
	}
}

// A request to /mcp that trickles its body, a byte at a time within the
// idle deadline, is ended when jsonBodyTime is up, as a JSON body is.
func TestTrickledMCPBody(t *testing.T) {
	defer func(d time.Duration) { jsonBodyTime = d }(jsonBodyTime)
	jsonBodyTime = time.Second
	_, ts := bodiesServer(t, func(s *Server) { s.BodyIdle = time.Minute })
	conn, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer alice-token\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n")
	answered := make(chan *http.Response, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			close(answered)
			return
		}
		answered <- resp
	}()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for sent := 0; sent < 999; sent++ {
		select {
		case resp := <-answered:
			if resp == nil || resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("the trickled request was answered %v", resp)
			}
			b, _ := io.ReadAll(resp.Body)
			if !strings.Contains(string(b), CodeIncompleteBody) {
				t.Fatalf("the trickled request was answered %s", b)
			}
			return
		case <-tick.C:
			if _, err := conn.Write([]byte(" ")); err != nil {
				t.Fatalf("the connection closed without an answer: %v", err)
			}
		}
	}
	t.Fatal("a body trickled for 100 s was still being read")
}
