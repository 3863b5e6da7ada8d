//go:build linux

package native

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/codecell-dev/codecell/internal/sandboxinit"
	"github.com/codecell-dev/codecell/internal/workspace"
)

// Inside the sandbox, init is root of the user namespace and the program
// runs as an ordinary user.
const (
	initUID    = sandboxinit.InitUID
	programUID = 1000
)

// slots is how many sandboxes can hold distinct host uids at once; it also
// bounds the number of lock files.
const slots = 4096

// identity is how one sandbox's users map to the host.
type identity struct {
	// HostInit and HostProgram are the host uids (and gids) of init and of
	// the program. Without root, both are the caller's own.
	HostInit, HostProgram int
	// Rootless is true when codecell is not root: the user namespace can
	// then map the caller's own uid only, so the program runs as init's
	// uid (0 inside), with every capability dropped.
	Rootless bool
	lock     *os.File
}

// UIDMap returns the uid (and gid) mappings for the sandbox's user
// namespace.
func (id *identity) UIDMap() []syscall.SysProcIDMap {
	if id.Rootless {
		return []syscall.SysProcIDMap{{ContainerID: initUID, HostID: id.HostInit, Size: 1}}
	}
	return []syscall.SysProcIDMap{
		{ContainerID: initUID, HostID: id.HostInit, Size: 1},
		{ContainerID: programUID, HostID: id.HostProgram, Size: 1},
	}
}

// ProgramUID is the program's uid inside the sandbox.
// owners are who the host makes the files it writes into the sandbox
// belong to: init's (the runner's) and the program's (the workspace's);
// rootless, the caller's own, which it keeps.
func (id *identity) owners() (init, program workspace.Owner) {
	if id.Rootless {
		return workspace.KeepOwner, workspace.KeepOwner
	}
	return workspace.Owner{UID: id.HostInit, GID: id.HostInit}, workspace.Owner{UID: id.HostProgram, GID: id.HostProgram}
}

func (id *identity) ProgramUID() int {
	if id.Rootless {
		return initUID
	}
	return programUID
}

// release gives the slot back.
func (id *identity) release() {
	if id.lock != nil {
		id.lock.Close()
	}
}

// runDir returns /run/codecell, codecell's directory for state that lives
// as long as the host is up, when this process is root. Others may search it
// (sandboxes' inits, which run as other uids, reach their mountpoint through
// it) but not list or write it.
func runDir() (string, error) {
	if os.Geteuid() != 0 {
		return "", errors.New("only root keeps state in /run/codecell")
	}
	const dir = "/run/codecell"
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return "", err
	}
	return dir, os.Chmod(dir, 0o711)
}

// newIdentity picks the host uids of one sandbox. As root, every sandbox
// gets a slot of two host uids of its own, never root's: a process that
// escaped its namespaces would hold no host privilege, and could not signal
// or read another sandbox's processes, which run as other uids. A slot is
// claimed with an flock on a file of its own, which the kernel releases if
// codecell dies, so several codecell processes on a host share the range
// without colliding.
func newIdentity(base int) (*identity, error) {
	if os.Geteuid() != 0 {
		return &identity{HostInit: os.Geteuid(), HostProgram: os.Geteuid(), Rootless: true}, nil
	}
	dir, err := uidLockDir()
	if err != nil {
		return nil, err
	}
	start := rand.IntN(slots)
	for i := 0; i < slots; i++ {
		slot := (start + i) % slots
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("%d", slot)), os.O_CREATE|os.O_RDWR|syscall.O_CLOEXEC, 0o600)
		if err != nil {
			return nil, err
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			continue
		}
		return &identity{HostInit: base + 2*slot, HostProgram: base + 2*slot + 1, lock: f}, nil
	}
	return nil, fmt.Errorf("no free uid slot in %s", dir)
}

// uidLockDir is the directory of the uid slots' lock files.
func uidLockDir() (string, error) {
	dir := "/run/codecell/uids"
	if _, err := runDir(); err != nil || os.MkdirAll(dir, 0o700) != nil {
		dir = filepath.Join(os.TempDir(), "codecell-uids")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return "", fmt.Errorf("no directory for uid slot locks: %w", err)
		}
	}
	return dir, nil
}
