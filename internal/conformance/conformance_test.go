//go:build linux

package conformance_test

import (
	"os"
	"testing"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/conformance"
	_ "github.com/codecell-dev/codecell/tier/local"
	_ "github.com/codecell-dev/codecell/tier/native"
)

func TestMain(m *testing.M) {
	// The test binary is re-executed as the tiers' init stages.
	codecell.Init()
	os.Exit(m.Run())
}

func TestLocal(t *testing.T) {
	conformance.Run(t, conformance.Tier{Name: "local"})
}

func TestNative(t *testing.T) {
	conformance.RequireNative(t)
	conformance.Run(t, conformance.Tier{Name: "native", Isolating: true, Processes: true, CPU: true})
}
