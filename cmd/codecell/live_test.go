package main

import (
	"strings"
	"testing"
	"time"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/api"
	"github.com/codecell-dev/codecell/client"
	"github.com/codecell-dev/codecell/internal/testenv"
	"github.com/codecell-dev/codecell/tier/native"
)

// Live sessions through the real binary: over REST with Go's client, in
// Python and JavaScript, and over MCP with the TypeScript SDK's client
// from npm, as the README shows them.
func TestServeLiveSessions(t *testing.T) {
	testenv.RequireNative(t, native.Default.Probe)
	cfg := writeFile(t, "codecell.json", `{"auth": {"tokens": ["live-token"]}}`)
	s := startServed(t, nil, "--config", cfg, "--state", t.TempDir())
	ctx := deadlineCtx(t, 2*time.Minute)
	c := client.New(s.base, "live-token")
	ses, err := c.CreateSession(ctx, api.SessionSpec{State: api.StateLive})
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct{ lang, code, want string }{
		{"python", "import statistics\ntemps = {'Oslo': 3, 'Lima': 19, 'Pune': 31}\nlen(temps)", "3"},
		{"python", "statistics.mean(temps.values())", "17.666666666666668"},
		{"javascript", "const seen = new Set(['a'])\nseen.size", "1"},
		{"typescript", "seen.add('b' as string)\nseen.size", "2"},
	} {
		res, err := c.Execute(ctx, ses.ID, api.Execution{Language: step.lang, Code: step.code})
		if err != nil || res.Status != codecell.StatusSuccess || string(res.Value) != step.want || res.SessionState != codecell.SessionKept {
			t.Fatalf("%s %q: %v %+v", step.lang, step.code, err, res)
		}
	}
	vars, err := c.Variables(ctx, ses.ID, "javascript")
	if err != nil || len(vars) != 1 || vars[0].Name != "seen" || vars[0].Type != "Set" {
		t.Fatalf("variables %+v %v", vars, err)
	}
	// A fork starts from the Python state, and the two diverge.
	fork, err := c.ForkSession(ctx, ses.ID)
	if err != nil || fork.ForkedFrom != ses.ID || len(fork.Fork) != 2 {
		t.Fatalf("fork %+v %v", fork, err)
	}
	for _, step := range []struct{ id, code, want string }{
		{fork.ID, "temps['Nuuk'] = -5\nsorted(temps)", `["Lima","Nuuk","Oslo","Pune"]`},
		{ses.ID, "sorted(temps)", `["Lima","Oslo","Pune"]`},
		{fork.ID, "round(statistics.mean(temps.values()), 2)", "12"},
	} {
		res, err := c.Execute(ctx, step.id, api.Execution{Language: "python", Code: step.code})
		if err != nil || res.Status != codecell.StatusSuccess || string(res.Value) != step.want {
			t.Fatalf("%q: %v %+v", step.code, err, res)
		}
	}

	t.Run("MCP with the TypeScript SDK", func(t *testing.T) {
		npmSDK(t)
		run := npmRunClient(t, npmPlan{Transport: map[string]any{"type": "http", "url": s.base + "/mcp", "token": "live-token"}, TimeoutMS: 60_000,
			Steps: []npmStep{
				{Op: "callTool", Name: "execute", Arguments: map[string]any{"session": "nb", "live": true, "code": "total = 40"}},
				{Op: "callTool", Name: "execute", Arguments: map[string]any{"session": "nb", "code": "total + 2"}},
				{Op: "callTool", Name: "execute", Arguments: map[string]any{"session": "nb2", "fork_from": "nb", "code": "total += 1\ntotal"}},
				{Op: "callTool", Name: "execute", Arguments: map[string]any{"session": "nb", "code": "total"}},
				{Op: "callTool", Name: "execute", Arguments: map[string]any{"session": "nb", "restart": true, "code": "'total' in globals()"}},
			}})
		if run.Connect.Error != nil || len(run.Steps) != 5 {
			t.Fatalf("connect %+v, %d steps; stderr:\n%s", run.Connect.Error, len(run.Steps), run.Stderr)
		}
		for i, want := range []string{"interpreter kept", "value: 42", "value: 41", "value: 40", "value: false"} {
			if got := string(run.Steps[i].Result); run.Steps[i].Error != nil || !strings.Contains(got, want) {
				t.Errorf("step %d: %+v %s", i, run.Steps[i].Error, got)
			}
		}
	})
}
