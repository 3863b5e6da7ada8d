//go:build linux

package instdir

import (
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// oddPermsUnprivileged removes a leftover owned by nobody from a thread
// whose filesystem uid is nobody's: changing it from 0 drops the thread's
// CAP_DAC_OVERRIDE and CAP_FOWNER, so the kernel's permission checks apply
// as they would to an unprivileged server.
func oddPermsUnprivileged(t *testing.T, mkLeftover func(*testing.T, string) string) {
	const nobody = 65534
	container := filepath.Join(t.TempDir(), "inst")
	dead := mkLeftover(t, container)
	err := filepath.WalkDir(container, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, nobody, nobody)
	})
	if err != nil {
		t.Fatal(err)
	}
	cfd, err := unix.Open(container, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(cfd)
	done := make(chan error, 1)
	go func() {
		// Never unlocked: the thread, with its changed fsuid, ends with
		// the goroutine.
		runtime.LockOSThread()
		if err := unix.Setfsuid(nobody); err != nil {
			done <- err
			return
		}
		// Proof that the thread is unprivileged now.
		if fd, err := unix.Openat(cfd, filepath.Base(dead)+"/closed", unix.O_RDONLY|unix.O_DIRECTORY, 0); err == nil {
			unix.Close(fd)
			done <- os.ErrInvalid
			return
		}
		done <- removeTree(cfd, filepath.Base(dead), dead, 0, true)
	}()
	if err := <-done; err == os.ErrInvalid {
		t.Fatal("the thread could open a 0000 directory: it is still privileged, the test proves nothing")
	} else if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(dead); err == nil {
		t.Errorf("%s is still there", dead)
	}
}
