//go:build linux

package docker

import (
	"os"
	"path/filepath"
	"sort"

	"golang.org/x/sys/unix"

	"github.com/codecell-dev/codecell/internal/workspace"
)

// leaveWalkMax bounds the entries leave looks at: past the entries a
// read-back takes (workspace.MaxWorkspaceEntries), the read-back stops in
// any case.
const leaveWalkMax = workspace.MaxWorkspaceEntries + 1000

// leave is the launcher's last look at the workspace dir, run as the
// program's user once every process of the program has ended: it removes
// the fifos, sockets and device nodes, and the regular files whose length
// would take the lengths of those before them, in the order of a walk by
// name (the engines' archives go by name too), past budget (0: no bound).
// Each name of a file counts its length: the host brings hard links back
// as copies. It reports what it removed, or nil when there was nothing.
// A directory the program made unreadable or unwritable to its owner
// (the launcher's user) is opened for the look and given its mode back.
func leave(dir string, budget int64) *leaveReport {
	rep := &leaveReport{}
	var total int64
	seen := 0
	var walk func(rel string, depth int)
	walk = func(rel string, depth int) {
		if depth > 255 {
			return
		}
		p := filepath.Join(dir, rel)
		defer openUp(p)()
		d, err := os.Open(p)
		if err != nil {
			return
		}
		names, err := d.Readdirnames(-1)
		d.Close()
		if err != nil {
			return
		}
		sort.Strings(names)
		for _, name := range names {
			if seen++; seen > leaveWalkMax {
				return
			}
			r := filepath.Join(rel, name)
			var st unix.Stat_t
			if unix.Lstat(filepath.Join(p, name), &st) != nil {
				continue
			}
			switch st.Mode & unix.S_IFMT {
			case unix.S_IFDIR:
				walk(r, depth+1)
			case unix.S_IFLNK:
			case unix.S_IFREG:
				if budget <= 0 || total+st.Size <= budget {
					total += st.Size
					continue
				}
				if remove(p, name) != nil {
					continue
				}
				if rep.NFiles++; len(rep.Files) < maxSkipped {
					rep.Files = append(rep.Files, leftFile{Name: []byte(r), Size: st.Size, Data: min(st.Size, st.Blocks*512)})
				}
			default:
				if remove(p, name) != nil {
					continue
				}
				if rep.NSpecial++; len(rep.Specials) < maxSkipped {
					rep.Specials = append(rep.Specials, []byte(r))
				}
			}
		}
	}
	walk("", 0)
	if rep.NFiles == 0 && rep.NSpecial == 0 {
		return nil
	}
	return rep
}

// remove removes name from the directory dir (which openUp opened).
func remove(dir, name string) error {
	return unix.Unlink(filepath.Join(dir, name))
}

// openUp gives the directory dir, when it is this process's own and denies
// its owner reading, writing or searching it (as a program may leave it),
// those permissions, and returns what gives it its mode back.
func openUp(dir string) (restore func()) {
	var st unix.Stat_t
	if unix.Lstat(dir, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR || int(st.Uid) != os.Geteuid() || st.Mode&0o700 == 0o700 {
		return func() {}
	}
	mode := st.Mode & 0o7777
	if unix.Chmod(dir, mode|0o700) != nil {
		return func() {}
	}
	return func() { _ = unix.Chmod(dir, mode) }
}
