// Package cgroup is the host side of one sandbox's resource limits: it finds
// what cgroup v2 or v1 offers here and puts each sandbox in its own cgroup.
//
// Detect inspects the host once; Host.New makes a Group for one sandbox with
// memory, process and CPU limits; the sandbox's first process enters it
// through clone's CLONE_INTO_CGROUP (v2, Group.FD) or Group.Add (either
// version), and Group.Destroy kills whatever is left and removes it. Where
// neither version is usable, Detect says why and callers fall back to
// rlimits. A group named with OwnedID names its process, so that
// Host.Recover can remove what a codecell process killed with SIGKILL left.
package cgroup

import (
	"errors"
	"fmt"
	"math"
	"os"
	"sync"
)

// Host describes what this host offers.
type Host struct {
	Version     int      // 2 or 1; 0 when none is usable
	Controllers []string // the usable ones among memory, pids, cpu
	Reason      string   // why cgroups are not usable, or what is missing ("" when fine)

	sys *system

	v2Parent  string            // v2: the directory the sandboxes' cgroups are made in
	v1Parents map[string]string // v1: controller -> that directory in its hierarchy
	v1Mounts  map[string]mount  // v1: controller -> the mount of its hierarchy
	swap      bool              // the kernel accounts swap, so it can be capped
}

// mount is one line of the mount table.
type mount struct {
	root, point, fstype string
	super               []string // super options; v1 lists its controllers here
}

// Limits are what one sandbox gets.
type Limits struct {
	Memory    int64   // bytes; 0 = no limit. Swap is never allowed beyond it.
	Processes int     // 0 = no limit (the kernel counts threads too)
	CPU       float64 // cores; 0 = no limit (cpu.max on v2, cpu.cfs_quota_us/period on v1)
}

func (l Limits) check() error {
	switch {
	case l.Memory < 0:
		return fmt.Errorf("cgroup: negative memory limit %d", l.Memory)
	case l.Processes < 0:
		return fmt.Errorf("cgroup: negative process limit %d", l.Processes)
	case math.IsNaN(l.CPU) || l.CPU < 0 || l.CPU > maxCPU:
		return fmt.Errorf("cgroup: CPU limit %v is not between 0 and %d cores", l.CPU, maxCPU)
	}
	return nil
}

// maxCPU keeps the CFS quota far from overflowing; no host has this many cores.
const maxCPU = 1 << 20

// Group is the cgroup of one sandbox: one directory on v2, one per hierarchy
// in use on v1.
type Group struct {
	host  *Host
	dirs  map[string]string // controller (memory, pids, cpu, freezer) -> directory
	paths []string          // the distinct directories, in creation order

	mu        sync.Mutex
	fd        int      // v2: open directory for CLONE_INTO_CGROUP; -1 otherwise
	usage     *os.File // the memory usage file, once MemoryUsage has opened it
	applied   Limits   // the limits the kernel accepted, for Describe
	destroyed bool
}

var errDestroyed = errors.New("cgroup: group already destroyed")

// system is how the package reaches the kernel. Tests replace it to run the
// detection and the v2 logic against a fake cgroupfs in a temporary directory.
type system struct {
	mountinfo  string // the file listing mounts (/proc/self/mountinfo)
	selfCgroup string // the file listing the process's cgroups (/proc/self/cgroup)
	euid, pid  int
	write      func(path, value string) error // one write to a control file
	mkdir      func(path string) error
	rmdir      func(path string) error
}

// validID accepts what callers are meant to pass, a short lowercase hex
// string, possibly in fields separated by "-" (OwnedID's form), so that an
// id can never name another directory ("..", "/").
func validID(id string) bool {
	if id == "" || len(id) > 64 || id[0] == '-' {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || c == '-') {
			return false
		}
	}
	return true
}

// Recovered is what Host.Recover removed.
type Recovered struct {
	Groups    int // groups removed
	Processes int // processes killed in them
}
