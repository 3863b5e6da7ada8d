//go:build linux

package native

import (
	"context"
	"testing"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/testenv"
	"github.com/codecell-dev/codecell/tiertest"
)

// TestConformanceForked runs the tier test kit with every program in a
// sandbox forked from a fork server: forked from its template interpreter
// when it can be, else executed in the forked sandbox. The suite holds for
// those paths as for the others.
func TestConformanceForked(t *testing.T) {
	testenv.RequireNative(t, Default.Probe)
	tier := &Tier{}
	tier.forkEvery = true
	t.Cleanup(func() { tier.Close() })
	t.Run("Suite", func(t *testing.T) {
		tiertest.Run(t, tier, tiertest.Capabilities{Isolating: true, Processes: true, CPU: true, Network: true})
	})
	st := tier.Stats()
	if st.ForkRuns == 0 || st.ExecRuns == 0 {
		t.Errorf("no run was forked from a template interpreter, or none executed its program in a forked sandbox: %+v", st)
	}
	t.Logf("%+v", st)
}

// TestPoolMemoryBound: with no memory for the pool, no more than the first
// thing it prepares waits for jobs (here, Python's fork server: no run
// prepared ahead, no server for the shell, no pooled sandbox), and runs
// still run.
func TestPoolMemoryBound(t *testing.T) {
	testenv.RequireNative(t, Default.Probe)
	tier := &Tier{PoolMemory: 1}
	tier.forkEvery = true
	t.Cleanup(func() { tier.Close() })
	eng := &codecell.Engine{Tiers: []codecell.Tier{tier}}
	for _, lang := range []string{"python", "sh", "python"} {
		code := map[string]string{"python": "print(1)", "sh": "echo 1"}[lang]
		res, err := eng.Run(context.Background(), &codecell.Exec{Tier: Name, Language: lang, Code: code})
		if err != nil || res.Status != codecell.StatusSuccess || res.Stdout != "1\n" {
			t.Fatalf("%s: %v %+v", lang, err, res)
		}
	}
	st := tier.Stats()
	if len(st.Templates) > 1 || st.Prepared != 0 || tier.PoolReady() != 0 || st.ExecRuns != 0 {
		t.Errorf("the pool kept more than its first server with no memory for it: %+v, %d ready", st, tier.PoolReady())
	}
	if st.ForkRuns+st.ColdRuns != 3 {
		t.Errorf("runs went elsewhere: %+v", st)
	}
}
