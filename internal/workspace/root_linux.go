//go:build linux

package workspace

import (
	"sync"

	"golang.org/x/sys/unix"
)

// oPath opens a handle that only names a file: it needs no permission on
// the file, has no side effects on devices and does not block on fifos.
const oPath = unix.O_PATH

// forceWalk makes openBeneath use walkOpen even where openat2 works, so
// tests can cover the fallback. Set it only while no other call runs.
var forceWalk bool

var (
	openat2Once sync.Once
	openat2OK   bool
)

// haveOpenat2 reports whether openat2 can be used. It is missing before
// Linux 5.6 (ENOSYS), and some seccomp profiles refuse it with EPERM; an
// O_PATH open of "." cannot fail with those for any other reason.
func haveOpenat2() bool {
	openat2Once.Do(func() {
		fd, err := unix.Openat2(unix.AT_FDCWD, ".", &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_BENEATH,
		})
		if err == nil {
			unix.Close(fd)
		}
		openat2OK = err != unix.ENOSYS && err != unix.EPERM
	})
	return openat2OK
}

// openBeneath opens rel (a cleaned path, or ".") beneath dirfd without ever
// following a symbolic link: a link anywhere in rel, the last element
// included, gives ELOOP. Errors are bare errno values, for mapErr.
//
// openat2 does the whole resolution in the kernel, which refuses links
// (RESOLVE_NO_SYMLINKS, RESOLVE_NO_MAGICLINKS) and any step out of dirfd
// (RESOLVE_BENEATH) as it walks, so swapping a component for a link at
// any moment gains nothing. Without openat2, walkOpen does the same one
// component at a time.
func openBeneath(dirfd int, rel string, flags int) (int, error) {
	if forceWalk || !haveOpenat2() {
		return walkOpen(dirfd, rel, flags)
	}
	// RESOLVE_NO_SYMLINKS already refuses a trailing link with ELOOP.
	// O_NOFOLLOW is added to plain opens for good measure, but not with
	// O_PATH, where it would open the link itself, nor with O_DIRECTORY,
	// where it turns ELOOP into a less telling ENOTDIR.
	if flags&(unix.O_PATH|unix.O_DIRECTORY) == 0 {
		flags |= unix.O_NOFOLLOW
	}
	how := &unix.OpenHow{
		Flags:   uint64(flags | unix.O_CLOEXEC),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	}
	for try := 0; ; try++ {
		fd, err := unix.Openat2(dirfd, rel, how)
		// EAGAIN: the kernel saw a concurrent rename and could not vouch
		// for the walk; it asks to be retried.
		if (err == unix.EINTR || err == unix.EAGAIN) && try < 16 {
			continue
		}
		if err == unix.ENOSYS {
			return walkOpen(dirfd, rel, flags)
		}
		return fd, err
	}
}

// fchown gives the file fd, an O_PATH one too, to uid and gid.
func fchown(fd, uid, gid int) error {
	return unix.Fchownat(fd, "", uid, gid, unix.AT_EMPTY_PATH)
}
