//go:build !linux

package bench

import (
	"context"
	"errors"
	"io"

	"github.com/codecell-dev/codecell"
)

// LoadReport is what a load run measured.
type LoadReport struct{}

// Load refuses: the load run counts what the native sandbox leaves, and the
// native sandbox needs Linux.
func Load(context.Context, *codecell.Engine, LoadOptions) (*LoadReport, error) {
	return nil, errors.New("the load run needs Linux and its native sandbox")
}

func (r *LoadReport) OK() bool                     { return false }
func (r *LoadReport) Print(io.Writer, LoadOptions) {}

// SideBySide refuses: it runs on the native sandbox, which needs Linux.
func SideBySide(context.Context, SideOptions) error {
	return errors.New("the side-by-side run needs Linux and its native sandbox")
}
