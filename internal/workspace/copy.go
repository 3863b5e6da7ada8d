package workspace

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Owner is who copied files should belong to; -1 keeps the copier's.
type Owner struct{ UID, GID int }

// KeepOwner leaves copied files to whoever copies them.
var KeepOwner = Owner{-1, -1}

// OwnerOf is who owns dir, for the files copied into it: KeepOwner when
// dir cannot be read, or when this process is not root and so cannot
// give a file away (what it writes is its own already).
func OwnerOf(dir string) Owner {
	if os.Geteuid() != 0 {
		return KeepOwner
	}
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return KeepOwner
	}
	return Owner{UID: int(st.Uid), GID: int(st.Gid)}
}

// CopyTree copies the regular files, directories and symbolic links under
// src into dst, which must exist, keeping their modes and modification
// times. Links are copied as links, never followed; nothing is read outside
// src nor written outside dst: both trees are reached only through
// directory descriptors, as a Root reaches its files. src and dst
// themselves are trusted, as by Open. A tree nested deeper than maxDepth is
// an error (ErrTooLarge).
//
// Unless creator is KeepOwner, what CopyTree creates is created under that
// file-system identity (fsuid and fsgid, on Linux), and so belongs to it from
// the start: a filesystem mounted inside a user namespace refuses to create
// a file owned by a uid the namespace does not map, such as the host's root
// (EOVERFLOW), so a chown afterwards would come too late. Sources are still
// opened with the caller's own identity.
func CopyTree(src, dst string, creator Owner) error {
	return copyTreeWith(src, dst, creator, nil)
}

func copyTreeWith(src, dst string, creator Owner, perms map[string]uint32) error {
	if creator == KeepOwner {
		return copyTree(src, dst, asSelf, perms)
	}
	return asCreator(creator, func(as func(func() error) error) error {
		return copyTree(src, dst, as, perms)
	})
}

// asSelf runs f with the caller's own identity: the as of KeepOwner.
func asSelf(f func() error) error { return f() }

func copyTree(src, dst string, as func(func() error) error, perms map[string]uint32) error {
	to, err := openDir(dst)
	if err != nil {
		return err
	}
	defer unix.Close(to)
	from, err := openDir(src)
	if err != nil {
		return err
	}
	return copier{as, newLinker(to), perms}.dir(from, to, "", 0)
}

// copier copies a tree; as runs what writes to the destination, and links
// keeps a file's names, in the copy, names of one file.
type copier struct {
	as    func(func() error) error
	links *linker
	perms map[string]uint32 // files' permissions before Unlock, by path
}

// dir copies what the directory from holds (from is taken over and closed)
// into the directory to; p is their path in the tree, for errors.
func (c copier) dir(from, to int, p string, depth int) error {
	d := os.NewFile(uintptr(from), orDot(p))
	defer d.Close()
	// Each level holds two descriptors, one of each tree.
	if depth >= maxDepth {
		return fmt.Errorf("copy %q: %w: nested more than %d directories deep", p, ErrTooLarge, maxDepth)
	}
	names, err := d.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("read directory %q: %w", orDot(p), err)
	}
	for _, name := range names {
		if err := c.entry(from, to, name, joinPath(p, name), depth); err != nil {
			return err
		}
	}
	return nil
}

// entry copies name from the directory from into the directory to.
func (c copier) entry(from, to int, name, p string, depth int) error {
	var st unix.Stat_t
	if err := unix.Fstatat(from, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if err == unix.ENOENT {
			return nil // gone meanwhile
		}
		return mapErr("stat", p, err)
	}
	var err error
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		err = c.subdir(from, to, name, p, &st, depth)
	case unix.S_IFREG:
		err = c.file(from, to, name, p, &st)
	case unix.S_IFLNK:
		return c.link(from, to, name, p) // a link keeps the time it is made
	default:
		return nil // devices, pipes and sockets are not workspace files
	}
	if err != nil {
		return err
	}
	// A directory gets its time after it is filled: filling it changes it.
	return c.as(func() error { return setTimes(to, name, p, &st) })
}

// subdir makes the directory name in to (or takes the one there) and
// copies into it what name in from holds.
func (c copier) subdir(from, to int, name, p string, st *unix.Stat_t, depth int) error {
	err := c.as(func() error { return unix.Mkdirat(to, name, uint32(st.Mode&0o777)|0o700) })
	if err != nil && err != unix.EEXIST {
		return mapErr("mkdir", p, err)
	}
	src, err := openBeneath(from, name, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return mapErr("open", p, err)
	}
	var dst int
	err = c.as(func() (err error) {
		dst, err = openBeneath(to, name, oPath|unix.O_DIRECTORY)
		return err
	})
	if err != nil {
		unix.Close(src)
		return mapErr("open", p, err)
	}
	defer unix.Close(dst)
	return c.dir(src, dst, p, depth+1)
}

// file copies the regular file name from from into a new file in to.
func (c copier) file(from, to int, name, p string, st *unix.Stat_t) error {
	in, now, err := openRead(from, name)
	if err != nil {
		return fmt.Errorf("copy %q: %w", p, err)
	}
	defer in.Close()
	if linked, err := c.links.link(&now, to, name, p, c.as); linked || err != nil {
		return err
	}
	perm := uint32(st.Mode & 0o777)
	if was, ok := c.perms[p]; ok {
		perm = was
	}
	var fd int
	err = c.as(func() (err error) {
		fd, err = createNew(to, name, p, perm)
		return err
	})
	if err != nil {
		return err
	}
	out := os.NewFile(uintptr(fd), p)
	_, err = copySparse(out, in, &now)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		c.links.made(&now, p)
	}
	return err
}

// link copies the symbolic link name from from into to, as a link.
func (c copier) link(from, to int, name, p string) error {
	target, err := readlinkAt(from, name)
	if err != nil {
		return mapErr("readlink", p, err)
	}
	return c.as(func() error { return symlinkAt(target, to, name, p) })
}

// Apply brings changes found in the directory from into the directory to:
// created and modified files are copied (links as links), deleted ones are
// removed. Both directories are reached as by a Root: from a descriptor of
// each, following no link. Files it writes are given to owner: unless owner
// is KeepOwner, what it creates is created under that file-system
// identity, as CopyTree does, and so may be created on a filesystem of a
// user namespace that does not map the caller. It returns one error per
// change it could not apply, so that one bad path costs one file.
func Apply(changes []Change, from, to string, owner Owner) []error {
	return applyChanges(changes, from, to, owner, nil)
}

func applyChanges(changes []Change, from, to string, owner Owner, perms map[string]uint32) []error {
	src, err := openDir(from)
	if err != nil {
		return []error{err}
	}
	defer unix.Close(src)
	dst, err := openDir(to)
	if err != nil {
		return []error{err}
	}
	defer unix.Close(dst)
	var errs []error
	links := newLinker(dst)
	apply := func(as func(func() error) error) error {
		for _, c := range changes {
			if err := applyOne(c, src, dst, owner, links, perms, as); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", c.Path, err))
			}
		}
		return nil
	}
	if owner == KeepOwner {
		_ = apply(asSelf)
	} else if err := asCreator(owner, apply); err != nil {
		errs = append(errs, err) // apply itself returns none
	}
	return errs
}

// applyOne applies one change from the tree from to the tree to; as runs
// what writes to to, and links makes another name of a file copied already
// a link to its copy.
func applyOne(c Change, from, to int, owner Owner, links *linker, perms map[string]uint32, as func(func() error) error) error {
	p, err := CleanPath(c.Path)
	if err != nil {
		return err
	}
	dir, base := splitPath(p)
	if c.Kind == "deleted" {
		return as(func() error { return removeIn(to, dir, base, p) })
	}
	var in *os.File
	var st unix.Stat_t
	if c.Symlink == "" {
		// The source first: a change that cannot be read makes nothing.
		if in, st, err = openRead(from, p); err != nil {
			return err
		}
		defer in.Close()
	}
	dirfd, err := makeParent(to, dir, owner, as)
	if err != nil {
		return err
	}
	defer unix.Close(dirfd)
	if c.Symlink != "" {
		err = as(func() error {
			if err := unlinkAt(dirfd, base, p); err != nil {
				return err
			}
			return symlinkAt(c.Symlink, dirfd, base, p)
		})
	} else if linked, lerr := links.link(&st, dirfd, base, p, as); linked || lerr != nil {
		err = lerr
	} else if err = copyFile(in, &st, perms, dirfd, base, p, as); err == nil {
		links.made(&st, p)
	}
	if err != nil {
		return err
	}
	if owner.UID >= 0 {
		return as(func() error { return lchownAt(dirfd, base, p, owner) })
	}
	return nil
}

// makeParent opens directory dir ("" for the root) beneath root, making
// what is missing (0755), and gives it to owner when owner names a user.
func makeParent(root int, dir string, owner Owner, as func(func() error) error) (int, error) {
	var fd int
	err := as(func() (err error) {
		fd, err = mkdirAll(root, dir)
		return err
	})
	if err != nil {
		return -1, err
	}
	if dir != "" && owner.UID >= 0 {
		_ = as(func() error { return fchown(fd, owner.UID, owner.GID) })
	}
	return fd, nil
}

// removeIn removes name from directory dir beneath root, for a deleted
// change: a file, a link or an empty directory. What is gone already, or
// was never there, is no error.
func removeIn(root int, dir, name, p string) error {
	fd, err := openBeneath(root, orDot(dir), oPath|unix.O_DIRECTORY)
	if err == unix.ENOENT {
		return nil
	}
	if err != nil {
		return mapErr("remove", p, err)
	}
	defer unix.Close(fd)
	return unlinkAt(fd, name, p)
}

// copyFile copies the regular file in, of stat st, to name in dirfd (p is
// its path, for errors), replacing what is there unless it is a directory.
// No link there is followed. The copy is written to a new file beside the
// target and renamed over it, never written into the file that was there:
// that file may be a hard link shared with a file outside the directory (a
// package store, another checkout), which must keep its content. as runs
// what writes.
func copyFile(in *os.File, st *unix.Stat_t, perms map[string]uint32, dirfd int, name, p string, as func(func() error) error) error {
	perm := uint32(st.Mode & 0o777)
	if was, ok := perms[p]; ok {
		perm = was // as it was before Unlock
	}
	var there unix.Stat_t
	if unix.Fstatat(dirfd, name, &there, unix.AT_SYMLINK_NOFOLLOW) == nil && there.Mode&unix.S_IFMT == unix.S_IFDIR {
		return errors.New("a directory stands where the file goes")
	}
	return as(func() error {
		if _, err := writeAt(dirfd, name, p, sparseFile{in, st}, perm, -1); err != nil {
			return err
		}
		_ = setTimes(dirfd, name, p, st)
		return nil
	})
}
