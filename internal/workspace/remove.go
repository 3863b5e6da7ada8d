package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// ErrNotEmpty reports a directory that Remove was not asked to remove with
// its contents.
var ErrNotEmpty = errors.New("directory not empty")

// Remove removes rel: a file, a symbolic link (never what it points to), or
// a directory, which must be empty unless recursive. The root itself cannot
// be removed. What is inside a directory is reached through descriptors
// opened without following links, so a link swapped in meanwhile leads
// nowhere outside.
func (r *Root) Remove(rel string, recursive bool) error {
	root, err := r.acquire()
	if err != nil {
		return err
	}
	defer r.mu.RUnlock()
	rel, err = CleanPath(rel)
	if err != nil {
		return err
	}
	dirfd, base, st, err := lookup(root, rel, "remove")
	if err != nil {
		return err
	}
	defer unix.Close(dirfd)
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return rmErr(rel, unix.Unlinkat(dirfd, base, 0))
	}
	if !recursive {
		err := unix.Unlinkat(dirfd, base, unix.AT_REMOVEDIR)
		if err == unix.ENOTEMPTY || err == unix.EEXIST {
			return fmt.Errorf("remove %q: %w", rel, ErrNotEmpty)
		}
		return rmErr(rel, err)
	}
	return removeAllAt(dirfd, base, rel, 0)
}

// RemoveAll removes dir and everything in it, as os.RemoveAll does, but
// without following links and, where this process is not root, opening
// up on its way the directories of its own whose permissions keep it out
// (chmod 000 or 0500), which os.RemoveAll fails on. A dir that is not there
// is no error.
func RemoveAll(dir string) error {
	parent, err := openDir(filepath.Dir(dir))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	defer unix.Close(parent)
	name := filepath.Base(dir)
	var st unix.Stat_t
	if err := unix.Fstatat(parent, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if err == unix.ENOENT {
			return nil
		}
		return &fs.PathError{Op: "remove", Path: dir, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return unlinkAt(parent, name, dir)
	}
	err = removeAllAt(parent, name, dir, 0)
	if err != nil && os.RemoveAll(dir) == nil {
		return nil // deeper than removeAllAt goes, say
	}
	return err
}

// removeAllAt removes the directory name in dirfd and everything in it.
func removeAllAt(dirfd int, name, p string, depth int) error {
	if depth >= maxDepth {
		return fmt.Errorf("remove %q: %w: nested more than %d directories deep", p, ErrTooLarge, maxDepth)
	}
	// A directory its owner may not list or change (an upload's, a
	// program's) stops anyone but root: open it up first.
	openUp(dirfd, name)
	fd, err := openat1(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return mapErr("remove", p, err)
	}
	// Entries are removed as they are read, so read until none is left:
	// a program may add some meanwhile, and a bound keeps that finite.
	for round := 0; ; round++ {
		names, err := readNames(fd, p)
		if err != nil {
			unix.Close(fd)
			return fmt.Errorf("remove %q: %w", p, err)
		}
		if len(names) == 0 || round == 100 {
			break
		}
		for _, n := range names {
			var st unix.Stat_t
			if err := unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				continue // gone meanwhile
			}
			sub := joinPath(p, n)
			if st.Mode&unix.S_IFMT == unix.S_IFDIR {
				err = removeAllAt(fd, n, sub, depth+1)
			} else if e := unix.Unlinkat(fd, n, 0); e != nil && e != unix.ENOENT {
				err = rmErr(sub, e)
			}
			if err != nil {
				unix.Close(fd)
				return err
			}
		}
	}
	unix.Close(fd)
	return rmErr(p, unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR))
}

// unlinkAt removes name in dirfd, whether a file, a link or an empty
// directory, as os.Remove does; a name that is not there is no error.
func unlinkAt(dirfd int, name, p string) error {
	err := unix.Unlinkat(dirfd, name, 0)
	if err == nil || err == unix.ENOENT {
		return nil
	}
	// The call must know whether name is a directory: try that too, and
	// report its failure unless name is none.
	e := unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR)
	if e == nil || e == unix.ENOENT {
		return nil
	}
	if e != unix.ENOTDIR {
		err = e
	}
	return rmErr(p, err)
}

func rmErr(p string, err error) error {
	if err == nil {
		return nil
	}
	return mapErr("remove", p, err)
}

// readNames lists a directory's entries, through a descriptor of its own
// so that each call reads from the start.
func readNames(fd int, p string) ([]string, error) {
	dup, err := openat1(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, err
	}
	d := os.NewFile(uintptr(dup), p)
	defer d.Close()
	return d.Readdirnames(-1)
}
