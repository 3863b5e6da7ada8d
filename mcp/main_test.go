package mcp

import (
	"os"
	"testing"

	"github.com/codecell-dev/codecell"
)

func TestMain(m *testing.M) {
	// The Engine re-executes the test binary for its parsers' workers.
	codecell.Init()
	os.Exit(m.Run())
}
