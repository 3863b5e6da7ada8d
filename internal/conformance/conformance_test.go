//go:build linux

package conformance_test

import (
	"os"
	"testing"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/conformance"
	_ "github.com/codecell-dev/codecell/tier/local"
	"github.com/codecell-dev/codecell/tier/native"
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
	RequireNative(t)
	conformance.Run(t, conformance.Tier{Name: "native", Isolating: true, Processes: true, CPU: true})
}

// RequireNative skips a test on a host without the native sandbox, or
// fails it when CODECELL_REQUIRE_NATIVE=1 (as in CI).
func RequireNative(t *testing.T) {
	t.Helper()
	if err := native.Default.Probe(); err != nil {
		if os.Getenv("CODECELL_REQUIRE_NATIVE") == "1" {
			t.Fatalf("the native sandbox is required (CODECELL_REQUIRE_NATIVE=1) and this host cannot give it: %v", err)
		}
		t.Skipf("this host cannot give the native sandbox: %v", err)
	}
}
