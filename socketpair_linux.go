package codecell

import "golang.org/x/sys/unix"

// socketpair makes a connected pair of stream sockets, close-on-exec from
// the start: no program started meanwhile inherits them.
func socketpair() ([2]int, error) {
	return unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
}
