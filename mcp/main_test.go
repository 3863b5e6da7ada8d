package mcp

import (
	"os"
	"testing"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/testenv"
)

func TestMain(m *testing.M) {
	// The Engine re-executes the test binary for its parsers' workers.
	codecell.Init()
	os.Exit(testenv.Run(m))
}
