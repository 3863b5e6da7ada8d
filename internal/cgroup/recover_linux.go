//go:build linux

package cgroup

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/codecell-dev/codecell/internal/proc"
	"golang.org/x/sys/unix"
)

// An owned id names the process that made the group, so that a later
// process can tell a group whose owner died (SIGKILL leaves no chance to
// clean up) from one in use:
//
//	<pid namespace inode>-<pid>-<start time>-<random>
//
// all in lowercase hex. The start time (clock ticks after boot, field 22 of
// /proc/<pid>/stat) tells the owner from a later process that got its pid;
// the pid namespace keeps a process in another namespace, whose pids mean
// something else here, from judging the owner dead.
type owner struct {
	ns    uint64
	pid   int
	start uint64
}

func (o owner) id() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%x-%x-%x-%s", o.ns, o.pid, o.start, hex.EncodeToString(b[:]))
}

// self is this process as an owner; ok is false when /proc cannot say.
var self = sync.OnceValues(func() (owner, bool) {
	ns, err := pidNamespace()
	if err != nil {
		return owner{}, false
	}
	p, ok := proc.Stat(os.Getpid())
	if !ok {
		return owner{}, false
	}
	return owner{ns: ns, pid: p.PID, start: p.Start}, true
})

// OwnedID returns a new group id owned by this process (see Recover). Where
// /proc cannot identify this process it returns a plain random id, which
// Recover then leaves to the age rule.
func OwnedID() string {
	if o, ok := self(); ok {
		return o.id()
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ownedIDOf is OwnedID for another process of this pid namespace.
func ownedIDOf(pid int) (string, error) {
	ns, err := pidNamespace()
	if err != nil {
		return "", err
	}
	p, ok := proc.Stat(pid)
	if !ok {
		return "", fmt.Errorf("cgroup: cannot read /proc/%d/stat", pid)
	}
	return owner{ns: ns, pid: pid, start: p.Start}.id(), nil
}

func parseOwner(id string) (owner, bool) {
	f := strings.Split(id, "-")
	if len(f) != 4 || slices.Contains(f, "") {
		return owner{}, false
	}
	ns, err1 := strconv.ParseUint(f[0], 16, 64)
	pid, err2 := strconv.ParseUint(f[1], 16, 31)
	start, err3 := strconv.ParseUint(f[2], 16, 64)
	if err1 != nil || err2 != nil || err3 != nil || pid == 0 {
		return owner{}, false
	}
	return owner{ns: ns, pid: int(pid), start: start}, true
}

// ownerAlive says whether the process that made the group id lives. known
// is false when the id names no owner (an old-style id) or when this
// process cannot tell (another pid namespace, an unreadable /proc): such a
// group must be treated as possibly in use.
func ownerAlive(id string) (alive, known bool) {
	o, ok := parseOwner(id)
	if !ok {
		return false, false
	}
	if me, ok := self(); !ok || me.ns != o.ns {
		return false, false
	}
	// kill(pid, 0) tells a missing pid apart even where /proc hides other
	// users' processes (hidepid): ESRCH only when there is no such process.
	if err := unix.Kill(o.pid, 0); errors.Is(err, unix.ESRCH) {
		return false, true
	}
	p, ok := proc.Stat(o.pid)
	switch {
	case !ok:
		if _, err := os.Stat("/proc/" + strconv.Itoa(o.pid)); errors.Is(err, os.ErrNotExist) {
			return false, true // exited meanwhile
		}
		return false, false // /proc cannot say
	case p.Start != o.start:
		return false, true // the pid was reused
	case p.Dead():
		return false, true // exited, not yet reaped
	}
	return true, true
}

func pidNamespace() (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/pid", &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// Parents lists the directories the groups are made in: one on v2, one per
// hierarchy in use on v1.
func (h *Host) Parents() []string {
	var ps []string
	switch h.Version {
	case 2:
		ps = []string{h.v2Parent}
	case 1:
		for _, c := range v1Controllers {
			if p := h.v1Parents[c]; p != "" && !slices.Contains(ps, p) {
				ps = append(ps, p)
			}
		}
	}
	return ps
}

// Recover removes what codecell processes that died left behind, as a
// server does once when it starts: every group whose owner (see OwnedID) is
// known to be dead is emptied (Kill: freeze, SIGKILL, wait, at most 5 s)
// and removed, in every hierarchy. A group whose owner lives is never
// touched. A group with no known owner (an old-style id, another pid
// namespace's) is removed only when it is empty and older than a minute, as
// Sweep always did. Failures do not stop it; they are returned together.
func (h *Host) Recover() (Recovered, error) { return h.sweep(time.Minute) }

// Sweep is Recover run in the background (at a tier's probe), with minAge
// for groups with no known owner. It returns how many groups it removed.
func (h *Host) Sweep(minAge time.Duration) int {
	r, _ := h.sweep(minAge)
	return r.Groups
}

func (h *Host) sweep(minAge time.Duration) (Recovered, error) {
	var r Recovered
	var errs []error
	parents := h.Parents()
	var ids []string
	for _, parent := range parents {
		entries, err := os.ReadDir(parent)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("cgroup: %w", err))
			}
			continue
		}
		for _, e := range entries {
			if e.IsDir() && validID(e.Name()) && !slices.Contains(ids, e.Name()) {
				ids = append(ids, e.Name())
			}
		}
	}
	cutoff := time.Now().Add(-minAge)
	for _, id := range ids {
		alive, known := ownerAlive(id)
		switch {
		case known && alive:
			continue
		case known:
			n, err := h.reclaim(parents, id)
			r.Processes += n
			if err != nil {
				errs = append(errs, err)
				continue
			}
			r.Groups++
		default:
			// Empty and old, or left alone: rmdir refuses a group that
			// holds a process or a child, and a group being set up is
			// younger than minAge.
			removed := false
			for _, parent := range parents {
				dir := filepath.Join(parent, id)
				info, err := os.Stat(dir)
				if err != nil || info.ModTime().After(cutoff) {
					continue
				}
				if h.sys.rmdir(dir) == nil {
					removed = true
				}
			}
			if removed {
				r.Groups++
			}
		}
	}
	return r, errors.Join(errs...)
}

// reclaim kills every process in the group id of a dead owner and removes
// its directories, with any child cgroups in them. It returns how many
// processes it killed.
func (h *Host) reclaim(parents []string, id string) (int, error) {
	g := &Group{host: h, fd: -1, dirs: map[string]string{}}
	for _, parent := range parents {
		dir := filepath.Join(parent, id)
		if info, err := os.Lstat(dir); err != nil || !info.IsDir() {
			continue
		}
		// Pre-order, so that removeDirs, which goes backwards, removes
		// children before their parents; on v2 paths[0] stays the group.
		filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				g.paths = append(g.paths, p)
			}
			return nil
		})
		switch h.Version {
		case 2:
			for _, c := range h.Controllers {
				g.dirs[c] = dir
			}
		case 1:
			for c, p := range h.v1Parents {
				if p == parent {
					g.dirs[c] = dir
				}
			}
		}
	}
	if len(g.paths) == 0 {
		return 0, nil
	}
	n, err := g.kill()
	if err != nil {
		return n, err
	}
	return n, g.removeDirs()
}
