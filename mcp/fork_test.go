package mcp

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/testenv"
	csession "github.com/codecell-dev/codecell/session"
	"github.com/codecell-dev/codecell/tier/native"
)

// execute's fork_from makes a new session a fork of another: the fork
// starts with the other's variables and files, says what it did not copy,
// and the two diverge. Forking into a session that exists, or without
// naming the new one, is refused.
func TestForkSessionMCP(t *testing.T) {
	testenv.RequireNative(t, native.Default.Probe)
	store, err := csession.NewStore(t.TempDir(), time.Hour, 10)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	s := &Server{Engine: &codecell.Engine{Tier: native.Name, Tools: &codecell.Toolbox{}}, Sessions: store}
	cs := connectInProcess(t, s)
	call := func(args map[string]any) codecell.Result {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "execute", Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		var r codecell.Result
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		return r
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
