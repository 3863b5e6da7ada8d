//go:build unix && !linux

package codecell

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// socketpair makes a connected pair of stream sockets. Without
// SOCK_CLOEXEC, the fork lock keeps a program started meanwhile from
// inheriting them before they are marked close-on-exec.
func socketpair() ([2]int, error) {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		return fds, err
	}
	unix.CloseOnExec(fds[0])
	unix.CloseOnExec(fds[1])
	return fds, nil
}
