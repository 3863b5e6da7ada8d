//go:build linux

package native

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// A process running as a sandbox's host uid is killed when its slot's lock
// is free, and left alone when the slot is held or was never handed out.
// The uids are a range of the test's own, above DefaultUIDBase's.
func TestKillOrphans(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run processes as other uids")
	}
	const base = 2_140_000_000
	dir := t.TempDir()
	start := func(slot int) *exec.Cmd {
		t.Helper()
		cmd := exec.Command("sleep", "30")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(base + 2*slot + 1), Gid: 65534}}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	lockFile := func(slot int) *os.File {
		t.Helper()
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(slot)), os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	lockFile(5)
	orphan := start(5)
	held := lockFile(6)
	if err := unix.Flock(int(held.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	live := start(6)
	unknown := start(7) // no lock file

	n, err := killOrphans(base, dir)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("killed %d processes, want 1", n)
	}
	var ee *exec.ExitError
	if err := orphan.Wait(); !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("the orphan ended with %v, not SIGKILL", err)
	}
	for _, c := range []*exec.Cmd{live, unknown} {
		if err := c.Process.Signal(syscall.Signal(0)); err != nil {
			t.Errorf("process %d was killed: %v", c.Process.Pid, err)
		}
	}
}
