package server_test

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/api"
	"github.com/codecell-dev/codecell/mcp"
	"github.com/codecell-dev/codecell/server"
	"github.com/codecell-dev/codecell/session"
)

// A web page on the user's machine cannot drive a server that has no token
// and listens on loopback: not by a cross-site "simple" request, which a
// browser sends without asking, nor by DNS rebinding, which makes the page
// the server's own origin to the browser. Each request here is what a
// browser would send for such a page; the program it asks to run would
// write a marker file into a session's workspace, which must stay absent.
func TestBrowserAttacks(t *testing.T) {
	f := newLocalFixture(t, func(s *server.Server) {
		s.Tokens = nil // loopback without authentication: what a page finds
		s.AllowedOrigins = []string{"https://app.example.com"}
		s.AllowedHosts = []string{"codecell.internal"}
		s.MCP = (&mcp.Server{Engine: s.Engine, HostChecked: true}).HTTPHandler(context.Background())
	})
	ses := f.session(t, api.SessionSpec{})
	// Without a token every request is the local principal's.
	local := session.Local()
	held, err := f.store.Get(local, ses.ID)
	if err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(held.Workspace, "pwned")
	run := `{"language":"bash","code":"echo x > pwned"}`
	execPath := "/v1/sessions/" + ses.ID + "/executions"
	u, _ := url.Parse(f.http.URL)
	own := "http://" + u.Host

	for _, c := range []struct {
		name, method, path, body string
		header                   []string
		status                   int
		code                     string
	}{
		{"cross-site text/plain POST", "POST", execPath, run,
			[]string{"Content-Type", "text/plain", "Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site"}, 403, server.CodeOriginNotAllowed},
		{"cross-site form POST", "POST", "/v1/executions", run,
			[]string{"Content-Type", "application/x-www-form-urlencoded", "Origin", "http://evil.example"}, 403, server.CodeOriginNotAllowed},
		{"cross-site JSON POST (after a preflight a browser would not pass)", "POST", execPath, run,
			[]string{"Content-Type", "application/json", "Origin", "http://evil.example"}, 403, server.CodeOriginNotAllowed},
		{"a sandboxed page's null origin", "POST", execPath, run,
			[]string{"Content-Type", "text/plain", "Origin", "null"}, 403, server.CodeOriginNotAllowed},
		{"another port on localhost", "POST", execPath, run,
			[]string{"Content-Type", "text/plain", "Origin", "http://localhost:3000"}, 403, server.CodeOriginNotAllowed},
		{"cross-site without an Origin", "POST", execPath, run,
			[]string{"Content-Type", "text/plain", "Sec-Fetch-Site", "cross-site"}, 403, server.CodeOriginNotAllowed},
		{"same-site without an Origin", "DELETE", "/v1/sessions/" + ses.ID, "",
			[]string{"Sec-Fetch-Site", "same-site"}, 403, server.CodeOriginNotAllowed},
		{"a cross-site upload", "PUT", "/v1/sessions/" + ses.ID + "/files/pwned", "x",
			[]string{"Content-Type", "text/plain", "Origin", "http://evil.example"}, 403, server.CodeOriginNotAllowed},
		{"a preflight from a page not listed", "OPTIONS", execPath, "",
			[]string{"Origin", "http://evil.example", "Access-Control-Request-Method", "POST"}, 403, server.CodeOriginNotAllowed},
		{"DNS rebinding: reading the sessions", "GET", "/v1/sessions", "",
			[]string{"Host", "evil.example:" + u.Port()}, 403, server.CodeHostNotAllowed},
		{"DNS rebinding: running code", "POST", execPath, run,
			[]string{"Host", "evil.example", "Origin", "http://evil.example", "Content-Type", "application/json"}, 403, server.CodeHostNotAllowed},
		{"DNS rebinding: reading a file", "GET", "/v1/sessions/" + ses.ID + "/files/", "",
			[]string{"Host", "evil.example"}, 403, server.CodeHostNotAllowed},
		{"DNS rebinding: MCP", "POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
			[]string{"Host", "attacker.localhost.evil.example", "Content-Type", "application/json"}, 403, server.CodeHostNotAllowed},
		{"a program's JSON sent as text", "POST", execPath, run,
			[]string{"Content-Type", "text/plain"}, 415, server.CodeMediaType},
		{"a program's JSON without a type", "POST", "/v1/executions", run, nil, 415, server.CodeMediaType},
		// Routes that take no body refuse one rather than ignore it: a
		// page's text is not a request to fork or to restart.
		{"a fork asked for as text", "POST", "/v1/sessions/" + ses.ID + "/fork", "{}",
			[]string{"Content-Type", "text/plain"}, 415, server.CodeMediaType},
		{"a restart asked for as text", "POST", "/v1/sessions/" + ses.ID + "/restart", "{}",
			[]string{"Content-Type", "text/plain"}, 415, server.CodeMediaType},
		{"a fork with fields it does not take", "POST", "/v1/sessions/" + ses.ID + "/fork", `{"name":"copy"}`,
			[]string{"Content-Type", "application/json"}, 400, codecell.CodeInvalidRequest},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, _, body := f.raw(t, c.method, c.path, strings.NewReader(c.body), c.header...)
			if status != c.status || envelopeOf(t, body).Code != c.code {
				t.Fatalf("%d %s, want %d %s", status, body, c.status, c.code)
			}
			if _, err := os.Lstat(marker); err == nil {
				t.Fatal("the program ran: the marker exists")
			}
		})
	}
	if _, err := f.store.Get(local, ses.ID); err != nil {
		t.Fatalf("the session is gone: %v", err)
	}
	if n := f.store.Len(); n != 1 {
		t.Fatalf("%d sessions after the attacks, want the one made before them", n)
	}

	// What must still work: the server's own pages, configured origins
	// and hosts, and every client that is not a browser.
	for _, c := range []struct {
		name   string
		header []string
	}{
		{"no Origin (a program, curl)", []string{"Content-Type", "application/json"}},
		{"the server's own origin", []string{"Content-Type", "application/json", "Origin", own, "Sec-Fetch-Site", "same-origin"}},
		{"a configured origin", []string{"Content-Type", "application/json", "Origin", "https://app.example.com", "Sec-Fetch-Site", "cross-site"}},
		{"a configured host", []string{"Content-Type", "application/json; charset=utf-8", "Host", "codecell.internal:443"}},
		{"localhost by name", []string{"Content-Type", "application/json", "Host", "localhost:" + u.Port()}},
		{"a name under .localhost", []string{"Content-Type", "application/json", "Host", "codecell.localhost"}},
		{"IPv6 loopback", []string{"Content-Type", "application/json", "Host", "[::1]:" + u.Port()}},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, h, body := f.raw(t, "POST", "/v1/executions", strings.NewReader(`{"language":"python","code":"6*7"}`), c.header...)
			if status != http.StatusOK || !strings.Contains(string(body), `"value":42`) {
				t.Fatalf("%d %s", status, body)
			}
			origin := ""
			for i := 0; i+1 < len(c.header); i += 2 {
				if c.header[i] == "Origin" {
					origin = c.header[i+1]
				}
			}
			want := ""
			if origin == "https://app.example.com" {
				want = origin
			}
			if got := h.Get("Access-Control-Allow-Origin"); got != want {
				t.Errorf("Access-Control-Allow-Origin %q for Origin %q", got, origin)
			}
		})
	}
	// A configured origin's preflight is answered, for the headers a page
	// of it needs.
	status, h, _ := f.raw(t, "OPTIONS", execPath, nil, "Origin", "https://app.example.com",
		"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization, content-type")
	if status != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != "https://app.example.com" ||
		!strings.Contains(h.Get("Access-Control-Allow-Headers"), "Authorization") || !strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") {
		t.Errorf("preflight: %d %v", status, h)
	}
	// The Go client works as before.
	if res, err := f.c.Execute(context.Background(), ses.ID, api.Execution{Language: "python", Code: "'ok'"}); err != nil || res.Status != codecell.StatusSuccess {
		t.Errorf("the client: %v %+v", err, res)
	}
}
