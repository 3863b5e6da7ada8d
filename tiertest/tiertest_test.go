//go:build linux

package tiertest_test

import (
	"os"
	"testing"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/testenv"
	"github.com/codecell-dev/codecell/tier/local"
	"github.com/codecell-dev/codecell/tier/native"
	"github.com/codecell-dev/codecell/tiertest"
)

func TestMain(m *testing.M) {
	// The test binary is re-executed as the tiers' init stages.
	codecell.Init()
	os.Exit(testenv.Run(m))
}

func TestLocal(t *testing.T) {
	tiertest.Run(t, local.Tier{}, tiertest.Capabilities{})
}

func TestNative(t *testing.T) {
	testenv.RequireNative(t, native.Default.Probe)
	tiertest.Run(t, &native.Tier{}, tiertest.Capabilities{Isolating: true, Processes: true, CPU: true, Network: true})
}
