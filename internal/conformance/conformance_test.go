package conformance_test

import (
	"os"
	"testing"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/conformance"
	_ "github.com/codecell-dev/codecell/tier/local"
)

func TestMain(m *testing.M) {
	// The test binary is re-executed as the tiers' init stages.
	codecell.Init()
	os.Exit(m.Run())
}

func TestLocal(t *testing.T) {
	conformance.Run(t, conformance.Tier{Name: "local"})
}
