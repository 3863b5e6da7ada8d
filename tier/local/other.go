//go:build !linux

// On this platform the tier has no implementation yet: it registers and
// refuses, rather than run a program whose process tree it could not end.

package local

import (
	"context"
	"errors"

	"github.com/codecell-dev/codecell"
)

const Name = "local"

func init() { codecell.RegisterTier(Tier{}) }

type Tier struct{}

var errUnsupported = errors.New("the local tier is implemented for Linux only")

func (Tier) Name() string    { return Name }
func (Tier) Isolating() bool { return false }
func (Tier) Probe() error    { return errUnsupported }
func (Tier) View(workspace, runner string) codecell.View {
	return codecell.View{Workspace: workspace, Runner: runner}
}
func (Tier) Run(context.Context, *codecell.Job) (*codecell.Outcome, error) {
	return nil, errUnsupported
}
