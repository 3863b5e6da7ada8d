//go:build !linux

package bench

import (
	"context"
	"errors"
	"io"

	"github.com/codecell-dev/codecell"
)

// LoadOptions shape a load run of the HTTP service.
type LoadOptions struct {
	Executions, Clients, MaxRunning, SessionsPer int
}

// LoadReport is what a load run measured.
type LoadReport struct{}

// Load refuses: the load run counts what the native sandbox leaves, and the
// native sandbox needs Linux.
func Load(context.Context, *codecell.Engine, LoadOptions) (*LoadReport, error) {
	return nil, errors.New("the load run needs Linux and its native sandbox")
}

func (r *LoadReport) OK() bool                     { return false }
func (r *LoadReport) Print(io.Writer, LoadOptions) {}

// SideOptions shape a side-by-side run.
type SideOptions struct {
	Runs             int
	Clients          []int
	Python, Node, Sh string
	GoJudge          string
	Engine           *codecell.Engine
	Out, Progress    io.Writer
}

// SideBySide refuses: it runs on the native sandbox, which needs Linux.
func SideBySide(context.Context, SideOptions) error {
	return errors.New("the side-by-side run needs Linux and its native sandbox")
}
