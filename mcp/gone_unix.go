//go:build unix

package mcp

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// readerGone reports, for an out that is a pipe or a socket, whether the
// process that read it has closed its end: poll(2) says POLLERR or POLLHUP
// then. For anything else (a file, a terminal, a writer of the process's
// own), it never reports so.
func readerGone(out io.Writer) func() bool {
	f, ok := out.(*os.File)
	if !ok {
		return func() bool { return false }
	}
	fd := int(f.Fd())
	return func() bool {
		fds := []unix.PollFd{{Fd: int32(fd), Events: 0}}
		n, err := unix.Poll(fds, 0)
		return err == nil && n > 0 && fds[0].Revents&(unix.POLLERR|unix.POLLHUP) != 0
	}
}
