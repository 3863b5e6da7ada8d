//go:build !linux

package cgroup

import (
	"errors"
	"time"
)

// errNotLinux is what every operation gives on this platform: it refuses
// rather than pretend that limits were applied.
var errNotLinux = errors.New("cgroup: cgroups are Linux-only")

// Detect reports that this platform has no cgroups.
func Detect() *Host { return &Host{Reason: errNotLinux.Error()} }

// New refuses: cgroups are Linux-only.
func (h *Host) New(id string, lim Limits) (*Group, error) { return nil, errNotLinux }

func (g *Group) FD() (fd int, ok bool)      { return -1, false }
func (g *Group) Add(pid int) error          { return errNotLinux }
func (g *Group) SetLimits(lim Limits) error { return errNotLinux }
func (g *Group) OOMKills() int              { return 0 }
func (g *Group) Kill() error                { return errNotLinux }
func (g *Group) Destroy() error             { return errNotLinux }
func (g *Group) Describe() string           { return "none (cgroups are Linux-only)" }

func (h *Host) Sweep(minAge time.Duration) int { return 0 }
