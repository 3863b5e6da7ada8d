//go:build linux

package workspace

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Unlock makes the tree at dir readable by this process wherever only
// permissions stand in the way and this process owns what they are on:
// directories get the owner's read and search bits, files the owner's
// read bit. A host that is not root reads a sandbox's workspace as the
// owner of its files (its user namespace maps the program's user to the
// host's), and a program may leave a file or a directory with none of
// its permissions (chmod 000): without this, neither would be listed
// nor copied back.
//
// Unlock is for a sandbox's tree, or a workspace that is copied at once
// and given its permissions back with Restore (into a sandbox, into a
// fork): it changes permissions, and a tree of the caller's own must
// not keep the change. Each entry is changed through a descriptor of
// the entry itself, opened without following a link, so a program still
// running cannot turn the change onto anything else. What it cannot
// change stays as it is, and a listing says so as before. The copies
// Locked.Apply and Locked.CopyTree make get the permissions their files
// had; Restore puts them back on the tree itself.
func Unlock(dir string) *Locked {
	l := &Locked{perms: map[string]uint32{}}
	uid := uint32(os.Geteuid())
	if uid == 0 {
		return l // root reads whatever the permissions say
	}
	l.open(unix.AT_FDCWD, dir, "", uid) // a program may chmod its workspace too
	fd, err := openDir(dir)
	if err != nil {
		return l
	}
	_ = walkAround(fd, "", 0, func(dirfd int, name, p string, st *unix.Stat_t) error {
		if st.Uid == uid && st.Mode&need(st.Mode) != need(st.Mode) {
			l.open(dirfd, name, p, uid)
		}
		return nil
	}, func(string, error) error { return nil })
	return l
}

// need is what Unlock gives an entry of mode m: nothing but to
// directories and regular files.
func need(m uint32) uint32 {
	switch m & unix.S_IFMT {
	case unix.S_IFDIR:
		return 0o500
	case unix.S_IFREG:
		return 0o400
	}
	return 0
}

// open adds what the entry name of dirfd needs, when this process owns
// it, and notes its permissions before under p.
func (l *Locked) open(dirfd int, name, p string, uid uint32) {
	fd, err := unix.Openat(dirfd, name, oPath|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Uid != uid || need(st.Mode) == 0 || st.Mode&need(st.Mode) == need(st.Mode) {
		return
	}
	if setPerm(fd, (st.Mode|need(st.Mode))&0o777) == nil {
		l.perms[p] = st.Mode & 0o777
		l.order = append(l.order, p)
	}
}

// setPerm changes the permissions of what the O_PATH descriptor fd is,
// through its /proc/self/fd link (fchmod refuses such a descriptor): the
// entry itself, whatever its name now leads to.
func setPerm(fd int, perm uint32) error {
	return unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), perm)
}

// Restore gives the entries of the tree at dir that Unlock opened their
// permissions back, what a directory holds before the directory: for a
// tree that stays in use (a live session's workspace).
func (l *Locked) Restore(dir string) {
	if len(l.order) == 0 {
		return
	}
	root, err := unix.Open(dir, oPath|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(root)
	for i := len(l.order) - 1; i >= 0; i-- {
		p := l.order[i]
		fd, err := root, error(nil)
		if p != "" {
			if fd, err = openBeneath(root, p, oPath|unix.O_NOFOLLOW); err != nil {
				continue
			}
		}
		var st unix.Stat_t
		if unix.Fstat(fd, &st) == nil && need(st.Mode) != 0 {
			_ = setPerm(fd, l.perms[p])
		}
		if fd != root {
			unix.Close(fd)
		}
	}
}

// openUp gives the directory name in dirfd its owner's read, write and
// search permissions, when this process owns it and is not root (which
// needs none), so that what it holds can be listed and removed. As Unlock
// does, through a descriptor of the entry itself, never a link's target.
func openUp(dirfd int, name string) {
	uid := uint32(os.Geteuid())
	if uid == 0 {
		return
	}
	fd, err := unix.Openat(dirfd, name, oPath|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Uid != uid || st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Mode&0o700 == 0o700 {
		return
	}
	_ = setPerm(fd, (st.Mode|0o700)&0o777)
}
