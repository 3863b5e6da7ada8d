package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/api"
)

// A fork of a live session starts where it stands — its variables (a
// pandas frame, a function and a class the cells defined, an instance),
// its workspace — in a sandbox of its own, and the two diverge from then
// on. What cannot be copied (an open file, a generator) is listed, with
// the reason.
func TestForkLiveSession(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	parent := f.session(t, api.SessionSpec{State: api.StateLive})
	run := func(id, code string) *codecell.Result {
		t.Helper()
		res, err := f.c.Execute(ctx, id, api.Execution{Language: "python", Code: code})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != codecell.StatusSuccess {
			t.Fatalf("%q: %s %+v %s", code, res.Status, res.Error, res.Stderr)
		}
		return res
	}
	run(parent.ID, `
import os
import pandas as pd
df = pd.DataFrame({"city": ["Oslo", "Lima", "Pune"], "t": [3, 19, 31]})
def warmest(frame):
    return frame.loc[frame["t"].idxmax(), "city"]
class Counter:
    def __init__(self): self.n = 0
    def bump(self): self.n += 1; return self.n
c = Counter()
c.bump()
log = open("notes.txt", "w")
log.write("parent\n")
log.flush()
squares = (i * i for i in range(3))
with open("data.txt", "w") as fh: fh.write("shared")
`)
	forked, err := f.c.ForkSession(ctx, parent.ID)
	if err != nil {
		t.Fatal(err)
	}
	if forked.ForkedFrom != parent.ID || forked.ID == parent.ID || forked.State != api.StateLive || len(forked.Fork) != 1 {
		t.Fatalf("%+v", forked)
	}
	rep := forked.Fork[0]
	for _, name := range []string{"df", "warmest", "Counter", "c", "pd", "os"} {
		if !slices.Contains(rep.Copied, name) {
			t.Errorf("%s not copied: %+v", name, rep)
		}
	}
	var skipped []string
	for _, s := range rep.Skipped {
		skipped = append(skipped, s.Name)
		if s.Reason == "" || s.Type == "" {
			t.Errorf("skipped without a reason: %+v", s)
		}
	}
	if slices.Sort(skipped); !slices.Equal(skipped, []string{"fh", "log", "squares"}) {
		t.Errorf("skipped %v, want fh, log and squares (files and a generator)", skipped)
	}
	// The parent goes on at once; the fork has what the parent had when
	// it was forked.
	run(parent.ID, `c.bump(); df.loc[len(df)] = ["Thule", 50]`)
	res := run(forked.ID, `[warmest(df), c.bump(), open("data.txt").read(), os.getpid() != 0]`)
	if string(res.Value) != `["Pune",2,"shared",true]` {
		t.Fatalf("in the fork: %s", res.Value)
	}
	// They diverge: what one does, the other does not see.
	run(forked.ID, `df.loc[len(df)] = ["Nuuk", 40]
with open("data.txt", "w") as fh: fh.write("fork")`)
	res = run(parent.ID, `[warmest(df), len(df), c.bump(), open("data.txt").read()]`)
	if string(res.Value) != `["Thule",4,3,"shared"]` {
		t.Fatalf("the parent after the fork changed: %s", res.Value)
	}
	res = run(forked.ID, `[warmest(df), len(df), c.bump(), open("data.txt").read()]`)
	if string(res.Value) != `["Nuuk",4,3,"fork"]` {
		t.Fatalf("the fork: %s", res.Value)
	}
	// Two sandboxes: namespaces of their own.
	ns := `import os; [os.readlink("/proc/self/ns/" + n) for n in ("pid", "mnt", "net", "ipc", "uts", "user")]`
	a, b := run(parent.ID, ns), run(forked.ID, ns)
	var as, bs []string
	if json.Unmarshal(a.Value, &as) != nil || json.Unmarshal(b.Value, &bs) != nil || len(as) != 6 || len(bs) != 6 {
		t.Fatalf("%s %s", a.Value, b.Value)
	}
	for i := range as {
		if as[i] == bs[i] {
			t.Errorf("the fork shares a namespace with its parent: %s", as[i])
		}
	}
	// A files session forks too: its workspace, nothing else.
	plain := f.session(t, api.SessionSpec{})
	if _, err := f.c.Execute(ctx, plain.ID, api.Execution{Language: "python", Code: `open("x.txt", "w").write("x")`}); err != nil {
		t.Fatal(err)
	}
	pf, err := f.c.ForkSession(ctx, plain.ID)
	if err != nil || pf.State != api.StateFiles || len(pf.Fork) != 0 {
		t.Fatalf("%+v %v", pf, err)
	}
	if res := run(pf.ID, `open("x.txt").read()`); string(res.Value) != `"x"` {
		t.Fatalf("%s", res.Value)
	}
	code, _, body := f.raw(t, "POST", "/v1/sessions/ses_nope/fork", nil)
	if code != http.StatusNotFound {
		t.Fatalf("%d %s", code, body)
	}
}
