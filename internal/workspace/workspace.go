// Package workspace is the one place codecell touches a program's workspace
// from the host: it records what is in it before and after a run and lists
// what changed (Take, Changes), copies it into a sandbox and the changes
// back (CopyTree, Apply), and reads and writes files in it on a caller's
// behalf (Root). It never follows a symbolic link: what the program left
// there is data, not a path to trust.
//
// A workspace is written by untrusted code, so any path component in it may
// be a symbolic link to anywhere, and may turn into one at any moment. Every
// operation of a Root therefore resolves its path relative to an open
// directory fd of the workspace root with openat2(RESOLVE_BENEATH|
// RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS), or, where openat2 is missing,
// with an equivalent walk that opens one component at a time with
// O_NOFOLLOW. No symbolic link is ever followed and nothing outside the root
// is ever reached; a path is never checked first and then used again by
// name. Paths are relative, slash-separated and may not contain "..".
// Backslashes are ordinary name characters, as they are on Linux.
package workspace

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// MaxEntries bounds how many entries a snapshot records; a program that
// creates more gets a warning, not an unbounded walk.
const MaxEntries = 100_000

// maxEntries is MaxEntries, lowered by tests.
var maxEntries = MaxEntries

// Entry is one regular file or symbolic link in a snapshot.
type Entry struct {
	Size    int64
	ModTime int64 // nanoseconds since the epoch
	Mode    fs.FileMode
	Inode   uint64
	Link    string // the target, for a symbolic link
}

// Snapshot maps slash-separated paths, relative to the workspace, to entries.
type Snapshot struct {
	Entries map[string]Entry
	// Incomplete is set when the walk stopped at MaxEntries.
	Incomplete bool
	// Unlisted are the directories and files the walk could not read (a
	// directory without permission, a path longer than the system allows),
	// slash-separated and relative: what lies there is in neither the list
	// nor the diff. At most maxUnlisted are kept; Unreadable counts all.
	Unlisted   []string
	Unreadable int
}

const maxUnlisted = 20

// Warnings say what the snapshot could not list, for a Result's warnings.
func (s *Snapshot) Warnings() []string {
	var w []string
	if s.Incomplete {
		w = append(w, fmt.Sprintf("the workspace holds more than %d entries: only %d were listed, and no file was reported deleted or removed from your directory", maxEntries, maxEntries))
	}
	if s.Unreadable > 0 {
		more := ""
		if s.Unreadable > len(s.Unlisted) {
			more = fmt.Sprintf(" and %d more", s.Unreadable-len(s.Unlisted))
		}
		w = append(w, fmt.Sprintf("%d places in the workspace could not be read (no permission, or a path longer than the system allows): %s%s; what is there was neither listed nor copied, and nothing there was removed",
			s.Unreadable, strings.Join(s.Unlisted, ", "), more))
	}
	return w
}

// covers reports whether p was in reach of the walk: neither under an
// unlisted place nor cut off by MaxEntries.
func (s *Snapshot) covers(p string) bool {
	if s.Incomplete {
		return false
	}
	if s.Unreadable > len(s.Unlisted) {
		return false // some places are not named: trust no absence
	}
	for _, u := range s.Unlisted {
		if p == u || strings.HasPrefix(p, u+"/") {
			return false
		}
	}
	return true
}

// Take records the regular files and symbolic links under dir.
func Take(dir string) (*Snapshot, error) {
	s := &Snapshot{Entries: map[string]Entry{}}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == dir {
				return err
			}
			// An unreadable corner is skipped, not fatal, and named: its
			// files are neither listed nor taken for deleted.
			s.Unreadable++
			if len(s.Unlisted) < maxUnlisted {
				rel, _ := filepath.Rel(dir, p)
				s.Unlisted = append(s.Unlisted, filepath.ToSlash(rel))
			}
			if d != nil && d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if p == dir || d.IsDir() {
			return nil
		}
		if len(s.Entries) >= maxEntries {
			s.Incomplete = true
			return filepath.SkipAll
		}
		t := d.Type()
		if t != 0 && t != fs.ModeSymlink {
			return nil // devices, pipes and sockets are not files to report
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		e := Entry{Size: info.Size(), ModTime: info.ModTime().UnixNano(), Mode: info.Mode()}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			e.Inode = st.Ino
		}
		if t == fs.ModeSymlink {
			e.Link, _ = os.Readlink(p)
			e.Size = int64(len(e.Link))
		}
		s.Entries[filepath.ToSlash(rel)] = e
		return nil
	})
	return s, err
}

// Change is one difference between two snapshots.
type Change struct {
	Path    string
	Kind    string // "created", "modified" or "deleted"
	Size    int64
	SHA256  string
	Symlink string
}

// Diff lists what changed from before to after, sorted by path, hashing the
// created and modified regular files under dir. A file counts as modified
// when its size, modification time, type or inode changed.
func Diff(before, after *Snapshot, dir string) ([]Change, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	var out []Change
	for p, a := range after.Entries {
		b, existed := before.Entries[p]
		if existed && b == a {
			continue
		}
		c := Change{Path: p, Kind: "created", Size: a.Size}
		if existed {
			c.Kind = "modified"
		}
		if a.Mode&fs.ModeSymlink != 0 {
			c.Symlink = a.Link
		} else if c.SHA256, c.Size, err = hashFile(root, p); err != nil {
			c.SHA256 = ""
			c.Size = a.Size
		}
		out = append(out, c)
	}
	for p, b := range before.Entries {
		// A file is deleted only if the walk after the run could have seen
		// it and did not: a listing cut short or a corner it could not read
		// never deletes a file of the user's.
		if _, still := after.Entries[p]; !still && after.covers(p) {
			out = append(out, Change{Path: p, Kind: "deleted", Size: b.Size})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// hashFile hashes a regular file without following a symbolic link in any
// component of its path, and without blocking on a FIFO put in its place.
func hashFile(root *os.Root, p string) (string, int64, error) {
	f, err := root.OpenFile(filepath.FromSlash(p), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return "", 0, err
	}
	if !info.Mode().IsRegular() {
		return "", 0, errors.New("not a regular file")
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, fmt.Errorf("hashing %s: %w", p, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// Changes takes the snapshot after a run and lists what changed since
// before: the one way a run's file list is made, by the Engine and by a tier
// that runs the program on a copy. warnings say what could not be listed;
// a workspace that cannot be read at all gives no changes and a warning.
func Changes(before *Snapshot, dir string) (changes []Change, warnings []string) {
	after, err := Take(dir)
	if err != nil {
		return nil, []string{"the workspace could not be read after the run: " + err.Error()}
	}
	warnings = after.Warnings()
	changes, err = Diff(before, after, dir)
	if err != nil {
		warnings = append(warnings, "listing changed files: "+err.Error())
	}
	return changes, warnings
}
