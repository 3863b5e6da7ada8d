//go:build linux

package native

import (
	"testing"

	"github.com/codecell-dev/codecell/internal/testenv"
	"github.com/codecell-dev/codecell/tiertest"
)

// TestConformanceWarm runs the tier test kit with every program in an
// interpreter started before its job: the suite holds for that path as for
// the cold one (which TestNative in tiertest runs, the pool serving some
// runs warm as demand has it).
func TestConformanceWarm(t *testing.T) {
	testenv.RequireNative(t, Default.Probe)
	tier := &Tier{Pool: -1}
	tier.warmEvery = true
	t.Cleanup(func() { tier.Close() })
	t.Run("Suite", func(t *testing.T) {
		tiertest.Run(t, tier, tiertest.Capabilities{Isolating: true, Processes: true, CPU: true, Network: true})
	})
	st := tier.Stats()
	if st.WarmRuns == 0 {
		t.Errorf("no run took the warm path: %+v", st)
	}
	checkBornInCgroups(t, tier, st)
	t.Logf("%+v", st)
}
