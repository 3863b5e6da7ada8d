//go:build !linux

package cgroup

import (
	"crypto/rand"
	"encoding/hex"
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
func (g *Group) Paths() []string            { return nil }
func (g *Group) Add(pid int) error          { return errNotLinux }
func (g *Group) SetLimits(lim Limits) error { return errNotLinux }
func (g *Group) OOMKills() int              { return 0 }
func (g *Group) MemoryUsage() int64         { return 0 }
func (g *Group) Kill() error                { return errNotLinux }
func (g *Group) Destroy() error             { return errNotLinux }
func (g *Group) Describe() string           { return "none (cgroups are Linux-only)" }

func (h *Host) Sweep(minAge time.Duration) int { return 0 }
func (h *Host) Recover() (Recovered, error)    { return Recovered{}, nil }
func (h *Host) Parents() []string              { return nil }

// OwnedID returns a random id: there is no /proc to name an owner by.
func OwnedID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
