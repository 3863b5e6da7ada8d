//go:build linux

package native

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/codecell-dev/codecell/internal/cgroup"
)

// Recover removes what the sandboxes of codecell processes that died
// (SIGKILL gives them no chance to clean up) left on this host; a server
// calls it once when it starts, after setting Default's fields.
//
// A dead process's inits die with it (Pdeathsig) and take their pid
// namespaces down, so normally only cgroups are left: every sandbox cgroup
// whose owner is dead is emptied and removed (cgroup.Host.Recover); those
// of live codecell processes are never touched. As root, a process still
// running as a sandbox's host uid whose slot no live codecell holds is
// killed too: it would otherwise share its uid with the next sandbox given
// that slot, and without cgroups nothing else finds it.
//
// On disk the tier keeps nothing per sandbox: a sandbox's files live in
// tmpfs mounts of its own mount namespace, which end with it. The shared
// mountpoint (/run/codecell/root) and the uid slots' lock files (at most
// one per slot, released by the kernel when their holder dies) are reused,
// not leaked.
func Recover() (Recovered, error) {
	var r Recovered
	var errs []error
	if h := cgroup.Detect(); h.Version != 0 {
		cr, err := h.Recover()
		r.Groups, r.Processes = cr.Groups, cr.Processes
		if err != nil {
			errs = append(errs, err)
		}
	}
	if os.Geteuid() == 0 {
		dir, err := uidLockDir()
		if err == nil {
			var n int
			n, err = killOrphans(Default.uidBase(), dir)
			r.Processes += n
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return r, errors.Join(errs...)
}

// killOrphans kills the processes whose real, effective or saved uid is a
// sandbox's host uid (base to base+2*slots) when that slot's lock file
// exists and no one holds it. The lock is held meanwhile, so no new
// sandbox can take the slot, and until the killed processes are gone. A
// slot without a lock file was never handed out from dir, and its uids are
// left alone.
func killOrphans(base int, dir string) (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	bySlot := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if slot, ok := sandboxSlot(pid, base); ok {
			bySlot[slot] = append(bySlot[slot], pid)
		}
	}
	killed := 0
	var errs []error
	for slot, pids := range bySlot {
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(slot)), os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
			f.Close() // a live sandbox's
			continue
		}
		var fds []int
		for _, pid := range pids {
			// Pinned first, then checked: the pid may have been reused
			// since /proc was listed.
			fd, err := unix.PidfdOpen(pid, 0)
			if err != nil {
				continue
			}
			if s, ok := sandboxSlot(pid, base); !ok || s != slot {
				unix.Close(fd)
				continue
			}
			if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil {
				unix.Close(fd)
				if !errors.Is(err, unix.ESRCH) {
					errs = append(errs, fmt.Errorf("killing process %d of uid slot %d: %w", pid, slot, err))
				}
				continue
			}
			killed++
			fds = append(fds, fd)
		}
		// A pidfd becomes readable when its process has exited.
		for _, fd := range fds {
			unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 2000)
			unix.Close(fd)
		}
		f.Close()
	}
	return killed, errors.Join(errs...)
}

// sandboxSlot says whether any of a process's real, effective and saved
// uids is a sandbox's host uid, and which slot's. A zombie is no one's: it
// runs nothing, and a dead codecell's inits wait as zombies for the host's
// init to reap them.
func sandboxSlot(pid, base int) (int, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, false
	}
	for line := range strings.Lines(string(data)) {
		if state, ok := strings.CutPrefix(line, "State:"); ok {
			if s := strings.TrimSpace(state); strings.HasPrefix(s, "Z") || strings.HasPrefix(s, "X") {
				return 0, false
			}
			continue
		}
		rest, ok := strings.CutPrefix(line, "Uid:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		for _, s := range f[:min(3, len(f))] {
			uid, err := strconv.Atoi(s)
			if err == nil && uid >= base && uid < base+2*slots {
				return (uid - base) / 2, true
			}
		}
		return 0, false
	}
	return 0, false
}
