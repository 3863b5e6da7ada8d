// Package workspace is the one place codecell touches a program's workspace
// from the host: it records what is in it before and after a run and lists
// what changed (Take, Changes), copies it into a sandbox and the changes
// back (CopyTree, Apply), and reads and writes files in it on a caller's
// behalf (Root). It never follows a symbolic link: what the program left
// there is data, not a path to trust.
//
// A workspace is written by untrusted code, so any path component in it may
// be a symbolic link to anywhere, and may turn into one at any moment. Every
// operation here therefore resolves its path relative to an open directory
// fd of the workspace root with openat2(RESOLVE_BENEATH|
// RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS), or, where openat2 is missing,
// with an equivalent walk that opens one component at a time with
// O_NOFOLLOW; a walk of the tree (Take, CopyTree, List, WriteTar) goes from
// directory fd to directory fd, looking at each entry with
// fstatat(AT_SYMLINK_NOFOLLOW). No symbolic link is ever followed and
// nothing outside the root is ever reached; a path is never checked first
// and then used again by name. Only the root itself, the directory a caller
// names, is trusted and opened by name. Paths are relative, slash-separated
// and may not contain "..". Backslashes are ordinary name characters, as
// they are on Linux.
package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/sys/unix"
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
	// Blocks is the bytes of disk the file holds, which may be far fewer
	// than Size (see HoleBudget). Diff does not compare it: a filesystem
	// may allocate a file's blocks after its writes have returned.
	Blocks int64
}

// Snapshot maps slash-separated paths, relative to the workspace, to entries.
type Snapshot struct {
	Entries map[string]Entry
	// Incomplete is set when the walk stopped at MaxEntries.
	Incomplete bool
	// Unlisted are the directories and files the walk could not read (a
	// directory without permission, a path longer than the system allows,
	// a directory nested more than maxDepth deep), slash-separated and
	// relative: what lies there is in neither the list nor the diff. At
	// most maxUnlisted are kept; Unreadable counts all.
	Unlisted   []string
	Unreadable int
	// Special are the pipes, sockets and device nodes the walk passed,
	// which are neither listed nor copied: at most maxUnlisted are named;
	// Specials counts all.
	Special  []string
	Specials int

	left *Left // what the copy taken left out (see ChangesLeaving)
}

// Left is what a copy of a workspace left where it was (a container's,
// read back through its engine's archive), for ChangesLeaving.
type Left struct {
	// Files are the files not brought back, by name; NFiles counts all.
	// None of them is taken for deleted; when NFiles is more than the
	// names, no file at all is.
	Files  []string
	NFiles int
	// Incomplete says the copy may lack more than Files: no file is taken
	// for deleted.
	Incomplete bool
	// Special are the pipes, sockets and device nodes the copy left,
	// named as a Snapshot names them; Specials counts all.
	Special  []string
	Specials int
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
		w = append(w, fmt.Sprintf("%d places in the workspace could not be read (no permission, a path longer than the system allows, or directories nested too deep): %s%s; what is there was neither listed nor copied, and nothing there was removed",
			s.Unreadable, strings.Join(s.Unlisted, ", "), more))
	}
	return w
}

// Cost is what the snapshot's files would cost a quota once on a disk (see
// Root.Usage): each file's content in whole blocks, at least one, a block
// for each link, and one for each directory that holds any of them. A
// tmpfs counts content alone, so a workspace within its size in a sandbox
// may cost its host more.
func (s *Snapshot) Cost() int64 {
	var total int64
	dirs := map[string]bool{}
	files := map[uint64]bool{}
	for p, e := range s.Entries {
		switch {
		case e.Mode&fs.ModeSymlink != 0:
			total += InodeCost
		case e.Inode == 0 || !files[e.Inode]:
			// Copies keep holes and hard links: a file costs the data it
			// holds, once whatever its names.
			files[e.Inode] = true
			total += chargeFor(min(e.Size, e.Blocks))
		}
		for d := path.Dir(p); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
			total += InodeCost
		}
	}
	return total
}

// covers reports whether p was in reach of the walk: neither under an
// unlisted place nor cut off by MaxEntries.
func (s *Snapshot) covers(p string) bool {
	if s.Incomplete {
		return false
	}
	if l := s.left; l != nil {
		if l.Incomplete || l.NFiles > len(l.Files) || slices.Contains(l.Files, p) {
			return false
		}
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

// Take records the regular files and symbolic links under dir. dir itself
// is trusted, as by Open; below it, the walk goes from directory fd to
// directory fd and follows no link. It goes on past what it cannot read,
// naming it in Unlisted: only a dir it cannot read at all is an error.
func Take(dir string) (*Snapshot, error) {
	s := &Snapshot{Entries: map[string]Entry{}}
	fd, err := openDir(dir)
	if err != nil {
		return s, err
	}
	return s, walkAround(fd, "", 0, s.add, func(p string, err error) error {
		if p == "" {
			return err
		}
		// An unreadable corner is skipped, not fatal, and named: its
		// files are neither listed nor taken for deleted.
		s.unlist(p)
		return nil
	})
}

// add records name in dirfd, at path p, for Take's walk.
func (s *Snapshot) add(dirfd int, name, p string, st *unix.Stat_t) error {
	if len(p) >= maxPath {
		// The kernel takes no path of PATH_MAX bytes with its NUL: Diff
		// could not open this one again, nor could whoever reads the list.
		s.unlist(p)
		return fs.SkipDir
	}
	t := st.Mode & unix.S_IFMT
	if t == unix.S_IFDIR {
		return nil
	}
	if len(s.Entries) >= maxEntries {
		s.Incomplete = true
		return fs.SkipAll
	}
	if t != unix.S_IFREG && t != unix.S_IFLNK {
		// Devices, pipes and sockets are not files to report or copy,
		// but Changes says that they were left.
		s.Specials++
		if len(s.Special) < maxUnlisted {
			s.Special = append(s.Special, p)
		}
		return nil
	}
	e := Entry{Size: st.Size, ModTime: modTime(st).UnixNano(), Mode: fileMode(st), Inode: uint64(st.Ino), Blocks: st.Blocks * 512}
	if t == unix.S_IFLNK {
		target, err := readlinkAt(dirfd, name)
		if err != nil {
			return nil // gone meanwhile, or no longer a link
		}
		e.Link, e.Size = target, int64(len(target))
	}
	s.Entries[p] = e
	return nil
}

// unlist names p as a place the walk could not read.
func (s *Snapshot) unlist(p string) {
	s.Unreadable++
	if len(s.Unlisted) < maxUnlisted {
		s.Unlisted = append(s.Unlisted, p)
	}
}

// Change is one difference between two snapshots.
type Change struct {
	Path    string
	Kind    string // "created", "modified" or "deleted"
	Size    int64
	SHA256  string
	Symlink string
	// MIME is the content's media type, sniffed from its first bytes (see
	// MIMEOf); empty for deleted, empty and unreadable files and for links.
	MIME string
}

// Diff lists what changed from before to after, sorted by path, hashing the
// created and modified regular files under dir. A file counts as modified
// when its size, modification time, type or inode changed.
func Diff(before, after *Snapshot, dir string) ([]Change, error) {
	changes, _, err := diff(before, after, dir)
	return changes, err
}

// diff is Diff, and the files it did not hash for their holes (see
// HoleBudget).
func diff(before, after *Snapshot, dir string) (out []Change, unhashed []string, err error) {
	root, err := openDir(dir)
	if err != nil {
		return nil, nil, err
	}
	defer unix.Close(root)
	h := newHasher()
	for p, a := range after.Entries {
		b, existed := before.Entries[p]
		if b.Blocks = a.Blocks; existed && b == a {
			continue
		}
		c := Change{Path: p, Kind: "created", Size: a.Size}
		if existed {
			c.Kind = "modified"
		}
		if a.Mode&fs.ModeSymlink != 0 {
			c.Symlink = a.Link
		} else if c.SHA256, c.Size, c.MIME, err = hashFile(root, p, h); err != nil {
			c.SHA256, c.MIME = "", ""
			c.Size = a.Size
			if errors.Is(err, errTooSparse) {
				unhashed = append(unhashed, p)
			}
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
	sort.Strings(unhashed)
	return out, unhashed, nil
}

// hashFile hashes the regular file p beneath root without following a
// symbolic link in any component of its path, and without blocking on a
// FIFO put in its place; it sniffs the media type from the same read. h
// hashes each file once and reads holes up to its budget: a file past it
// is errTooSparse.
func hashFile(root int, p string, h *hasher) (sum string, size int64, mime string, err error) {
	p, err = CleanPath(p)
	if err != nil {
		return "", 0, "", err
	}
	f, st, err := openRead(root, p)
	if err != nil {
		return "", 0, "", err
	}
	defer f.Close()
	d, err := h.hash(f, &st)
	if err != nil {
		return "", 0, "", fmt.Errorf("hashing %s: %w", p, err)
	}
	return d.sum, d.size, d.mime, nil
}

// SniffLen is how many of a file's first bytes MIMEOf looks at.
const SniffLen = 512

// MIMEOf is the media type of content that begins with head (its first
// SniffLen bytes, or all of it when shorter), by the WHATWG sniffing rules
// that http.DetectContentType follows: "image/png", "text/plain;
// charset=utf-8", "application/octet-stream" when nothing matches. Empty
// content has none: "". The content decides, never the file's name: a
// program names its files as it likes.
func MIMEOf(head []byte) string {
	if len(head) == 0 {
		return ""
	}
	return http.DetectContentType(head)
}

// headWriter keeps the first SniffLen bytes written to it.
type headWriter struct{ b []byte }

func (w *headWriter) Write(p []byte) (int, error) {
	if room := SniffLen - len(w.b); room > 0 {
		w.b = append(w.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// Changes takes the snapshot after a run and lists what changed since
// before: the one way a run's file list is made, by the Engine and by a tier
// that runs the program on a copy (which keeps after, to compare with the
// next run or to bring the changes back). warnings say what could not be
// listed; a workspace that cannot be read at all gives no changes, a nil
// after and a warning.
func Changes(before *Snapshot, dir string) (changes []Change, after *Snapshot, warnings []string) {
	return ChangesLeaving(before, dir, nil)
}

// ChangesLeaving is Changes for dir, a copy of a workspace that left out
// what left names: a file left is neither listed nor taken for deleted,
// and the pipes, sockets and device nodes left are said to be left as
// Changes says it of those it finds.
func ChangesLeaving(before *Snapshot, dir string, left *Left) (changes []Change, after *Snapshot, warnings []string) {
	after, err := Take(dir)
	if err != nil {
		return nil, nil, []string{"the workspace could not be read after the run: " + err.Error()}
	}
	if left != nil {
		after.left = left
		after.Specials += left.Specials
		for _, p := range left.Special {
			if len(after.Special) < maxUnlisted {
				after.Special = append(after.Special, p)
			}
		}
	}
	warnings = after.Warnings()
	changes, unhashed, err := diff(before, after, dir)
	if err != nil {
		warnings = append(warnings, "listing changed files: "+err.Error())
	}
	if w := before.specialsWarning(after); w != "" {
		warnings = append(warnings, w)
	}
	if w := invalidNamesWarning(changes); w != "" {
		warnings = append(warnings, w)
	}
	if n := len(unhashed); n > 0 {
		if n > maxUnlisted {
			unhashed = append(unhashed[:maxUnlisted:maxUnlisted], fmt.Sprintf("and %d more", n-maxUnlisted))
		}
		warnings = append(warnings, fmt.Sprintf("%s listed without a sha256: a length far past the data held (as truncate makes), and more holes than the %d MiB a listing reads: %s",
			plural(n, "file is", "files are"), holeBudget>>20, strings.Join(unhashed, ", ")))
	}
	return changes, after, warnings
}

// plural is one when n is 1, else n and many.
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// specialsWarning says which pipes, sockets and device nodes after holds
// that s, taken before, did not: they are in no list and are not copied
// back, and a caller should know they were left. "" when there are none.
func (s *Snapshot) specialsWarning(after *Snapshot) string {
	var named []string
	for _, p := range after.Special {
		if !slices.Contains(s.Special, p) {
			named = append(named, p)
		}
	}
	n := max(after.Specials-s.Specials, len(named))
	if n == 0 {
		return ""
	}
	if n > len(named) {
		named = append(named, fmt.Sprintf("and %d more", n-len(named)))
	}
	what := plural(n, "pipe, socket or device node left in the workspace is", "pipes, sockets or device nodes left in the workspace are")
	return fmt.Sprintf("%s in no list and not copied back (only regular files, directories and symbolic links are): %s", what, strings.Join(named, ", "))
}

// invalidNamesWarning says which changed paths are not valid UTF-8: a
// Result in JSON shows each invalid byte as U+FFFD, so two such names may
// look the same and neither can be asked for by the name shown. "" when
// all are valid.
func invalidNamesWarning(changes []Change) string {
	var named []string
	n := 0
	for _, c := range changes {
		if !utf8.ValidString(c.Path) {
			if n++; len(named) < maxUnlisted {
				named = append(named, strconv.QuoteToASCII(c.Path))
			}
		}
	}
	if n == 0 {
		return ""
	}
	if n > len(named) {
		named = append(named, fmt.Sprintf("and %d more", n-len(named)))
	}
	return fmt.Sprintf("%s not valid UTF-8 (quoted here with Go escapes): a list in JSON shows each invalid byte as U+FFFD, so rename to valid UTF-8 what you need to address by name: %s",
		plural(n, "changed path is", "changed paths are"), strings.Join(named, ", "))
}
