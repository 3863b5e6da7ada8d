package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/api"
	"github.com/codecell-dev/codecell/server"
	"github.com/codecell-dev/codecell/session"
)

// A live session over REST, as a notebook: a variable kept across
// executions, listed without running code, an interrupt that keeps it, a
// restart that does not, and the session's end freeing its interpreter.
func TestLiveSessionREST(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	ses := f.session(t, api.SessionSpec{State: api.StateLive})
	if ses.State != api.StateLive {
		t.Fatalf("state %q", ses.State)
	}
	run := func(code string, timeout time.Duration) *codecell.Result {
		t.Helper()
		x := api.Execution{Language: "python", Code: code}
		if timeout > 0 {
			x.Limits = &api.Limits{Timeout: api.Duration(timeout)}
		}
		res, err := f.c.Execute(ctx, ses.ID, x)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := run("rows = [{'city': c, 't': t} for c, t in [('Oslo', 3), ('Lima', 19), ('Pune', 31)]]\nlen(rows)", 0)
	if res.Status != codecell.StatusSuccess || string(res.Value) != "3" || res.SessionState != codecell.SessionKept {
		t.Fatalf("%s %s %q %+v", res.Status, res.Value, res.SessionState, res.Error)
	}
	res = run("max(rows, key=lambda r: r['t'])['city']", 0)
	if string(res.Value) != `"Pune"` {
		t.Fatalf("value %s, %+v, %q", res.Value, res.Error, res.Stderr)
	}
	vars, err := f.c.Variables(ctx, ses.ID, "")
	if err != nil || len(vars) != 1 || vars[0].Name != "rows" || vars[0].Type != "list" || !strings.Contains(vars[0].Repr, "Oslo") {
		t.Fatalf("variables %+v, %v", vars, err)
	}
	got, err := f.c.Session(ctx, ses.ID)
	if err != nil || len(got.Interpreters) != 1 || got.Interpreters[0].Language != "python" || !got.Interpreters[0].Running {
		t.Fatalf("session %+v, %v", got, err)
	}
	res = run("import time\nrows.append('late')\ntime.sleep(30)", time.Second)
	if res.Status != codecell.StatusTimeout || res.SessionState != codecell.SessionKept {
		t.Fatalf("%s %q", res.Status, res.SessionState)
	}
	if res = run("rows[-1]", 0); string(res.Value) != `"late"` {
		t.Fatalf("after the interrupt: %s %+v", res.Value, res.Error)
	}
	if _, err := f.c.RestartSession(ctx, ses.ID); err != nil {
		t.Fatal(err)
	}
	if res = run("'rows' in globals()", 0); string(res.Value) != "false" {
		t.Fatalf("after the restart: %s", res.Value)
	}
	// A session that keeps files has no interpreter to ask of.
	plain := f.session(t, api.SessionSpec{})
	code, _, body := f.raw(t, "GET", "/v1/sessions/"+plain.ID+"/variables", nil)
	if code != http.StatusBadRequest || !strings.Contains(envelopeOf(t, body).Message, "files only") {
		t.Fatalf("%d %s", code, body)
	}
	code, _, body = f.raw(t, "POST", "/v1/sessions", strings.NewReader(`{"state":"notebook"}`), "Content-Type", "application/json")
	if code != http.StatusBadRequest || !strings.Contains(string(body), "live") {
		t.Fatalf("%d %s", code, body)
	}
	if err := f.c.DeleteSession(ctx, ses.ID); err != nil {
		t.Fatal(err)
	}
	if n, mem := f.store.LiveStats(); n != 0 || mem != 0 {
		t.Fatalf("%d live sessions, %d bytes left", n, mem)
	}
}

// A live session counts as a session: a token at its maximum gets 429 for
// one more, live or not.
func TestLiveSessionsCount(t *testing.T) {
	f := newFixture(t, func(s *server.Server) {
		s.Tokens = []server.Token{{Token: token, Principal: session.Principal{Name: "tester", MaxSessions: 1}}}
	})
	f.session(t, api.SessionSpec{State: api.StateLive})
	for _, body := range []string{`{"state":"live"}`, `{}`} {
		code, hdr, b := f.raw(t, "POST", "/v1/sessions", strings.NewReader(body), "Content-Type", "application/json")
		if code != http.StatusTooManyRequests || hdr.Get("Retry-After") == "" {
			t.Fatalf("%s: %d %s", body, code, b)
		}
	}
}
