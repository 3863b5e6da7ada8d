package workspace

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// A program can give one file of its workspace as many names as the
// workspace takes entries (100,000 hard links cost a tmpfs nothing more),
// so what the host does once per name it must do once per file: a digest
// is computed once per inode (hasher), and a copy makes the other names
// links to the file it copied first (linker), not copies of their own.

// inodeKey names a file on its filesystem.
type inodeKey struct{ dev, ino uint64 }

func keyOf(st *unix.Stat_t) inodeKey { return inodeKey{uint64(st.Dev), st.Ino} }

// digest is what hashing one file gave.
type digest struct {
	sum  string
	size int64
	mime string
}

// hasher hashes the files of one listing: each inode once, and holes up
// to a budget (see HoleBudget).
type hasher struct {
	budget int64
	seen   map[inodeKey]digest
}

func newHasher() *hasher { return &hasher{budget: holeBudget, seen: map[inodeKey]digest{}} }

// hash hashes the regular file f of stat st (taken when it was opened),
// reading at most st.Size bytes: a file growing as it is read cannot keep
// the host busy. A file with more holes than the budget left is
// errTooSparse, not read. Another name of a file already hashed costs
// nothing: a listing is taken of a tree that holds still, or at least of
// one whose changes meanwhile it need not see.
func (h *hasher) hash(f *os.File, st *unix.Stat_t) (digest, error) {
	linked := st.Nlink > 1
	if d, ok := h.seen[keyOf(st)]; linked && ok {
		return d, nil
	}
	hole := holes(st)
	if hole > h.budget {
		return digest{}, errTooSparse
	}
	h.budget -= hole
	sum := sha256.New()
	head := &headWriter{}
	n, err := io.Copy(io.MultiWriter(sum, head), io.LimitReader(f, st.Size))
	if err != nil {
		return digest{}, err
	}
	d := digest{hex.EncodeToString(sum.Sum(nil)), n, MIMEOf(head.b)}
	if linked {
		h.seen[keyOf(st)] = d
	}
	return d, nil
}

// linker remembers, for a copy into the tree root, where the first name
// of each source file with more than one name was copied to, so that its
// other names become links to that copy.
type linker struct {
	root  int
	first map[inodeKey]string
}

func newLinker(root int) *linker { return &linker{root: root, first: map[inodeKey]string{}} }

// link makes name in dirfd (p is its path beneath the root) another name
// of the copy already made of the source file of stat st, replacing what
// is there unless it is a directory; as runs what writes. It reports
// whether it did: false when no copy of that file was made yet (copy it,
// then call made), or the copy can take no more names (EMLINK: the next
// copy is the one to link to).
func (l *linker) link(st *unix.Stat_t, dirfd int, name, p string, as func(func() error) error) (bool, error) {
	if st.Nlink < 2 {
		return false, nil
	}
	first, ok := l.first[keyOf(st)]
	if !ok {
		return false, nil
	}
	dir, base := splitPath(first)
	var done bool
	err := as(func() error {
		fd, err := openBeneath(l.root, orDot(dir), oPath|unix.O_DIRECTORY)
		if err != nil {
			return mapErr("open", dir, err)
		}
		defer unix.Close(fd)
		// A new name beside the target, renamed over it: what is there may
		// be a link to a file elsewhere, which must keep its content.
		tmp := tempPrefix + rand.Text()
		if err := unix.Linkat(fd, base, dirfd, tmp, 0); err != nil {
			if errors.Is(err, unix.EMLINK) || errors.Is(err, unix.ENOENT) {
				delete(l.first, keyOf(st))
				return nil
			}
			return mapErr("link", p, err)
		}
		if err := unix.Renameat(dirfd, tmp, dirfd, name); err != nil {
			unix.Unlinkat(dirfd, tmp, 0)
			return mapErr("rename", p, err)
		}
		done = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("linking %q to %q: %w", p, first, err)
	}
	return done, nil
}

// made records that the source file of stat st was copied to p.
func (l *linker) made(st *unix.Stat_t, p string) {
	if st.Nlink > 1 {
		l.first[keyOf(st)] = p
	}
}
