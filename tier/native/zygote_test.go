//go:build linux

package native

import (
	"testing"

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
		tiertest.Run(t, tier, tiertest.Capabilities{Isolating: true, Processes: true, CPU: true})
	})
	st := tier.Stats()
	if st.ForkRuns == 0 || st.ExecRuns == 0 {
		t.Errorf("no run was forked from a template interpreter, or none executed its program in a forked sandbox: %+v", st)
	}
	t.Logf("%+v", st)
}
