package mcp

import (
	"strings"
	"testing"

	"github.com/codecell-dev/codecell"
	csession "github.com/codecell-dev/codecell/session"
)

// execute's fork_from makes a new session a fork of another: the fork
// starts with the other's variables and files, says what it did not copy,
// and the two diverge. Forking into a session that exists, or without
// naming the new one, is refused.
func TestForkSessionMCP(t *testing.T) {
	cs, store := connectNativeSessions(t)
	call := func(args map[string]any) codecell.Result {
		t.Helper()
		return executeResult(t, cs, args)
	}
	r := call(map[string]any{"session": "a", "live": true, "code": "total = 10\nf = open('notes.txt', 'w')\nf.write('a')\nf.flush()\ntotal"})
	if r.Status != codecell.StatusSuccess || string(r.Value) != "10" {
		t.Fatalf("%+v", r)
	}
	r = call(map[string]any{"session": "b", "fork_from": "a", "code": "total += 5\n[total, open('notes.txt').read()]"})
	if r.Status != codecell.StatusSuccess || string(r.Value) != `[15,"a"]` || r.SessionState != codecell.SessionKept {
		t.Fatalf("in the fork: %+v", r)
	}
	if !strings.Contains(strings.Join(r.Warnings, "\n"), "did not copy f (_io.TextIOWrapper)") {
		t.Errorf("warnings %q do not say the open file was not copied", r.Warnings)
	}
	if r = call(map[string]any{"session": "a", "code": "total"}); string(r.Value) != "10" {
		t.Fatalf("the session forked changed: %s", r.Value)
	}
	for _, args := range []map[string]any{
		{"session": "a", "fork_from": "b", "code": "1"},
		{"fork_from": "a", "code": "1"},
		{"session": "c", "fork_from": "nope", "code": "1"},
	} {
		if r := call(args); r.Status != codecell.StatusBlocked || r.Error == nil {
			t.Errorf("%v: %+v", args, r)
		}
	}
	if _, err := store.Lookup(csession.Local(), "c"); err == nil {
		t.Errorf("a refused fork made its session")
	}
}
