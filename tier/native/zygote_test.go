//go:build linux

package native

import (
	"testing"

	"github.com/codecell-dev/codecell/internal/testenv"
	"github.com/codecell-dev/codecell/tiertest"
)

// TestConformanceForked runs the tier test kit with every program that can
// be forked from a template interpreter forked from one: the suite holds
// for that path as for the others.
func TestConformanceForked(t *testing.T) {
	testenv.RequireNative(t, Default.Probe)
	tier := &Tier{}
	tier.forkEvery = true
	t.Cleanup(func() { tier.Close() })
	t.Run("Suite", func(t *testing.T) {
		tiertest.Run(t, tier, tiertest.Capabilities{Isolating: true, Processes: true, CPU: true})
	})
	st := tier.Stats()
	if st.ForkRuns == 0 {
		t.Errorf("no run was forked: %+v", st)
	}
	t.Logf("%+v", st)
}
