//go:build !linux

package workspace

import "golang.org/x/sys/unix"

// oPath opens a handle to look at a file. Without Linux's O_PATH this is a
// read-only open; O_NONBLOCK keeps it from blocking on a fifo.
const oPath = unix.O_RDONLY | unix.O_NONBLOCK | unix.O_NOCTTY

// forceWalk has no effect here: walkOpen is always used.
var forceWalk bool

// openBeneath opens rel (a cleaned path, or ".") beneath dirfd without ever
// following a symbolic link: a link anywhere in rel, the last element
// included, gives ELOOP. Errors are bare errno values, for mapErr. Without
// openat2 it walks one component at a time.
func openBeneath(dirfd int, rel string, flags int) (int, error) {
	return walkOpen(dirfd, rel, flags)
}

// haveOpenat2 reports whether openat2 can be used: never, outside Linux.
func haveOpenat2() bool { return false }

// fchown gives the file fd to uid and gid.
func fchown(fd, uid, gid int) error { return unix.Fchown(fd, uid, gid) }
