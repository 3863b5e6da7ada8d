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

// Probe refuses: the sandbox is built from Linux namespaces.
func (t *Tier) Probe() error { return errUnsupported }

// Run refuses, as Probe does.
func (t *Tier) Run(context.Context, *codecell.Job) (*codecell.Outcome, error) {
	return nil, errUnsupported
}

// Inspect reports that the sandbox needs Linux.
func (t *Tier) Inspect() Report {
	return Report{Namespaces: errUnsupported.Error(), Seccomp: errUnsupported.Error()}
}

// Settled reports whether the pool is full: there is none here.
func (t *Tier) Settled() bool { return true }

// BuildAhead has nothing to build where the sandbox does not exist.
func (t *Tier) BuildAhead(initPath string) {}

// PoolReady reports how many sandboxes are ready: none here.
func (t *Tier) PoolReady() int { return 0 }

// Recover has nothing to do where the sandbox does not exist.
func Recover() (Recovered, error) { return Recovered{}, nil }

// Close has nothing to end here.
func (t *Tier) Close() error { return nil }
