package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/codecell-dev/codecell/server"
)

// TestOtherUsersRefusedWithoutTokens: a server without tokens listens on
// loopback, where every user of the machine reaches it. A request from
// another user's process (here a socket made by a thread whose
// filesystem uid is nobody's, which makes the socket nobody's, as the
// kernel lists it) is refused with 401 and a message that says why and
// what to do; this user's requests are served.
func TestOtherUsersRefusedWithoutTokens(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to make a socket that another user owns")
	}
	const nobody = 65534
	f := newRefusingFixture(t, func(s *server.Server) {
		s.Tokens = nil
		s.MCP = http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
			t.Error("another user's request reached MCP")
		})
	})
	asNobody := &http.Client{Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			type dialed struct {
				c   net.Conn
				err error
			}
			done := make(chan dialed, 1)
			go func() {
				// Never unlocked: the thread, with its changed fsuid,
				// ends with the goroutine.
				runtime.LockOSThread()
				unix.Setfsuid(nobody)
				c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
				done <- dialed{c, err}
			}()
			d := <-done
			return d.c, d.err
		},
	}}
	for _, c := range []struct {
		method, path, body string
	}{
		{"GET", "/v1/sessions", ""},
		{"POST", "/v1/sessions", "{}"},
		{"POST", "/v1/executions", `{"language":"bash","code":"echo x"}`},
		{"POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`},
	} {
		req, err := http.NewRequest(c.method, f.http.URL+c.path, strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := asNobody.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var env struct {
			Code    string `json:"error_code"`
			Message string `json:"message"`
		}
		json.Unmarshal(body, &env)
		if resp.StatusCode != http.StatusUnauthorized || env.Code != server.CodeUnauthorized || !strings.Contains(env.Message, "uid 65534") {
			t.Errorf("%s %s from another user: %d %s", c.method, c.path, resp.StatusCode, body)
		}
	}
	if n := f.store.Len(); n != 0 {
		t.Errorf("another user's requests made %d sessions", n)
	}
	resp, err := http.Get(f.http.URL + "/v1/sessions")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("this user's request: %d %s", resp.StatusCode, body)
	}
}
