//go:build !linux

package native

import (
	"context"
	"errors"

	"github.com/codecell-dev/codecell"
)

// state is empty where the sandbox does not exist.
type state struct{}

var errUnsupported = errors.New("the native sandbox needs Linux")

func registerInit() {}

// Probe refuses: the sandbox is built from Linux namespaces.
func (t *Tier) Probe() error { return errUnsupported }

// Run refuses, as Probe does.
func (t *Tier) Run(context.Context, *codecell.Job) (*codecell.Outcome, error) {
	return nil, errUnsupported
}
