package workspace

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"syscall"
)

// Owner is who copied files should belong to; -1 keeps the copier's.
type Owner struct{ UID, GID int }

// KeepOwner leaves copied files to whoever copies them.
var KeepOwner = Owner{-1, -1}

// CopyTree copies the regular files, directories and symbolic links under
// src into dst, which must exist, keeping their modes and modification
// times. Links are copied as links, never followed; nothing is written
// outside dst (os.Root refuses paths that would leave it).
//
// Unless creator is KeepOwner, what CopyTree creates is created under that
// file-system identity (fsuid and fsgid, on Linux), and so belongs to it from
// the start: a filesystem mounted inside a user namespace refuses to create
// a file owned by a uid the namespace does not map, such as the host's root
// (EOVERFLOW), so a chown afterwards would come too late. Sources are still
// opened with the caller's own identity.
func CopyTree(src, dst string, creator Owner) error {
	if creator == KeepOwner {
		return copyTree(src, dst, func(f func() error) error { return f() })
	}
	return asCreator(creator, func(as func(func() error) error) error {
		return copyTree(src, dst, as)
	})
}

func copyTree(src, dst string, as func(func() error) error) error {
	to, err := os.OpenRoot(dst)
	if err != nil {
		return err
	}
	defer to.Close()
	from, err := os.OpenRoot(src)
	if err != nil {
		return err
	}
	defer from.Close()
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == src {
			return nil
		}
		rel, _ := filepath.Rel(src, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			err := as(func() error { return to.Mkdir(rel, info.Mode().Perm()|0o700) })
			if err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
		case d.Type() == fs.ModeSymlink:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if err := as(func() error { return to.Symlink(target, rel) }); err != nil {
				return err
			}
			return nil
		case d.Type().IsRegular():
			in, err := openRegular(from, rel)
			if err != nil {
				return err
			}
			var out *os.File
			err = as(func() (err error) {
				out, err = to.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, info.Mode().Perm())
				return err
			})
			if err == nil {
				_, err = io.Copy(out, in)
				if cerr := out.Close(); err == nil {
					err = cerr
				}
			}
			in.Close()
			if err != nil {
				return err
			}
		default:
			return nil // devices, pipes and sockets are not workspace files
		}
		return as(func() error { return to.Chtimes(rel, info.ModTime(), info.ModTime()) })
	})
}

// openRegular opens a regular file without following a link in its last
// component, and without blocking on a FIFO put in its place.
func openRegular(root *os.Root, rel string) (*os.File, error) {
	in, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	if info, err := in.Stat(); err != nil || !info.Mode().IsRegular() {
		in.Close()
		return nil, errors.New("not a regular file")
	}
	return in, nil
}

// Apply brings changes found in the directory from into the directory to:
// created and modified files are copied (links as links), deleted ones are
// removed. Files it writes are given to owner: unless owner is KeepOwner,
// what it creates is created under that file-system identity, as CopyTree
// does, and so may be created on a filesystem of a user namespace that
// does not map the caller. It returns one error per change it could not
// apply, so that one bad path costs one file.
func Apply(changes []Change, from, to string, owner Owner) []error {
	src, err := os.OpenRoot(from)
	if err != nil {
		return []error{err}
	}
	defer src.Close()
	dst, err := os.OpenRoot(to)
	if err != nil {
		return []error{err}
	}
	defer dst.Close()
	var errs []error
	apply := func(as func(func() error) error) error {
		for _, c := range changes {
			rel := filepath.FromSlash(c.Path)
			if err := applyOne(c, rel, src, dst, owner, as); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", c.Path, err))
			}
		}
		return nil
	}
	if owner == KeepOwner {
		_ = apply(func(f func() error) error { return f() })
	} else {
		_ = asCreator(owner, apply)
	}
	return errs
}

// applyOne applies one change; as runs what writes to dst.
func applyOne(c Change, rel string, src, dst *os.Root, owner Owner, as func(func() error) error) error {
	if c.Kind == "deleted" {
		if err := as(func() error { return dst.Remove(rel) }); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	if d := path.Dir(c.Path); d != "." {
		if err := as(func() error { return dst.MkdirAll(filepath.FromSlash(d), 0o755) }); err != nil {
			return err
		}
		if owner.UID >= 0 {
			_ = as(func() error { return dst.Lchown(filepath.FromSlash(d), owner.UID, owner.GID) })
		}
	}
	if c.Symlink != "" {
		if err := as(func() error { return dst.Remove(rel) }); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err := as(func() error { return dst.Symlink(c.Symlink, rel) }); err != nil {
			return err
		}
	} else {
		info, err := src.Lstat(rel)
		if err != nil {
			return err
		}
		if err := copyFile(src, dst, rel, info.Mode().Perm(), as); err != nil {
			return err
		}
		_ = as(func() error { return dst.Chtimes(rel, info.ModTime(), info.ModTime()) })
	}
	if owner.UID >= 0 {
		return as(func() error { return dst.Lchown(rel, owner.UID, owner.GID) })
	}
	return nil
}

// copyFile copies one regular file between roots, replacing what dst held
// at that path unless it is a directory. Neither end follows a link in the
// last component. The copy is written to a new file beside the target and
// renamed over it, never written into the file that was there: that file
// may be a hard link shared with a file outside the directory (a package
// store, another checkout), which must keep its content.
func copyFile(from, to *os.Root, rel string, mode fs.FileMode, as func(func() error) error) error {
	in, err := openRegular(from, rel)
	if err != nil {
		return err
	}
	defer in.Close()
	if info, err := to.Lstat(rel); err == nil && info.IsDir() {
		return errors.New("a directory stands where the file goes")
	}
	var tmp string
	var out *os.File
	err = as(func() (err error) {
		tmp, out, err = createBeside(to, rel, mode)
		return err
	})
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Chmod(mode)
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = as(func() error { return to.Rename(tmp, rel) })
	}
	if err != nil {
		_ = as(func() error { return to.Remove(tmp) })
	}
	return err
}

// createBeside creates a new, empty file in the directory of rel, under a
// name no one else uses, and returns its path in the root.
func createBeside(root *os.Root, rel string, mode fs.FileMode) (string, *os.File, error) {
	dir := filepath.Dir(rel)
	for range 10 {
		var b [6]byte
		_, _ = rand.Read(b[:])
		tmp := filepath.Join(dir, ".codecell-"+hex.EncodeToString(b[:]))
		f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, mode&0o700|0o600)
		if err == nil {
			return tmp, f, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", nil, err
		}
	}
	return "", nil, errors.New("no free name for a temporary file")
}
