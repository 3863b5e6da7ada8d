package workspace

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Sentinel errors. Errors returned by this package wrap them with context,
// and usually the system error too; test with errors.Is.
var (
	// ErrBadPath reports a path that is absolute, empty, longer than 4096
	// bytes, or contains a ".." element or a NUL byte.
	ErrBadPath = errors.New("bad path")
	// ErrNotFound reports a missing file or directory. errors.Is(err,
	// fs.ErrNotExist) holds for it too.
	ErrNotFound error = notFoundError{}
	// ErrSymlink reports a symbolic link on the way to, or at, a path.
	ErrSymlink = errors.New("symbolic link in path")
	// ErrQuota reports that the workspace size quota would be exceeded.
	ErrQuota = errors.New("workspace quota exceeded")
	// ErrNotRegular reports a file of the wrong type: a device, fifo or
	// socket where a regular file is needed, a directory where a file is
	// needed, or a file where a directory is needed.
	ErrNotRegular = errors.New("wrong file type")
	// ErrUnsafeArchive reports a tar entry that ExtractTar refuses.
	ErrUnsafeArchive = errors.New("unsafe archive entry")
	// ErrBadArchive reports an archive ExtractTar cannot read: not a tar
	// (or gzipped tar) stream, cut short, or with headers that do not
	// agree with what follows them. The error also wraps what failed to
	// read, such as an *http.MaxBytesError of the stream it came from.
	ErrBadArchive = errors.New("not a readable tar archive")
	// ErrTooLarge reports a listing with more entries than allowed, or a
	// directory tree nested deeper than maxDepth.
	ErrTooLarge = errors.New("too large")
	// ErrTooManyEntries reports an upload that would take the workspace
	// past MaxWorkspaceEntries, or an archive of more entries than an
	// upload may hold. errors.Is(err, ErrQuota) holds for it too.
	ErrTooManyEntries = fmt.Errorf("%w: too many entries", ErrQuota)
)

// MaxWorkspaceEntries bounds the files, directories and links a workspace
// may hold after an upload.
const MaxWorkspaceEntries = 100_000

type notFoundError struct{}

func (notFoundError) Error() string { return "not found" }

func (notFoundError) Is(target error) bool { return target == fs.ErrNotExist }

const (
	maxPath           = 4096   // longest path CleanPath accepts, in bytes
	defaultMaxEntries = 100000 // for List and ExtractTar when given 0
	// maxDepth bounds how deep List, Usage and WriteTar descend. Each level
	// holds one open fd, so a tree built to be absurdly deep cannot exhaust
	// the process's descriptors.
	maxDepth   = 256
	tempPrefix = ".wsfs-tmp-"
)

// CleanPath returns p as a clean relative slash path: "a/./b/" becomes "a/b".
// It refuses (ErrBadPath) absolute paths, any ".." element (even in
// "a/../b"), NUL bytes, paths longer than 4096 bytes, and paths that name
// the root itself ("", ".").
func CleanPath(p string) (string, error) {
	c, err := clean(p)
	if err == nil && c == "" {
		err = fmt.Errorf("%w %q: names the workspace root", ErrBadPath, p)
	}
	return c, err
}

// clean is CleanPath that also accepts the root, returned as "".
func clean(p string) (string, error) {
	switch {
	case len(p) > maxPath:
		return "", fmt.Errorf("%w: longer than %d bytes", ErrBadPath, maxPath)
	case strings.IndexByte(p, 0) >= 0:
		return "", fmt.Errorf("%w %q: contains NUL", ErrBadPath, p)
	case strings.HasPrefix(p, "/"):
		return "", fmt.Errorf("%w %q: absolute", ErrBadPath, p)
	}
	var parts []string
	for _, e := range strings.Split(p, "/") {
		switch e {
		case "", ".":
			continue
		case "..":
			return "", fmt.Errorf("%w %q: contains \"..\"", ErrBadPath, p)
		}
		parts = append(parts, e)
	}
	return strings.Join(parts, "/"), nil
}

// Root is an open workspace directory. Its methods may be called
// concurrently; Close waits for calls in progress.
type Root struct {
	mu sync.RWMutex
	fd int // -1 once closed
}

// Open opens the workspace directory dir. dir itself is trusted: it is
// opened by name, following symbolic links.
func Open(dir string) (*Root, error) {
	fd, err := openDir(dir)
	if err != nil {
		return nil, err
	}
	return &Root{fd: fd}, nil
}

// openDir opens dir as Open does, for the functions that take a workspace
// by name (Take, Diff, CopyTree, Apply) and use it for the call alone: the
// fd is theirs to close, and no lock guards it.
func openDir(dir string) (int, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	return fd, nil
}

// Close closes the root. Files returned by Open stay open.
func (r *Root) Close() error {
	// The lock keeps the fd number from being closed, and perhaps reused
	// for another workspace, while a call still resolves paths against it.
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fd < 0 {
		return os.ErrClosed
	}
	err := unix.Close(r.fd)
	r.fd = -1
	return err
}

// acquire read-locks r and returns its fd; the caller must r.mu.RUnlock.
func (r *Root) acquire() (int, error) {
	r.mu.RLock()
	if r.fd < 0 {
		r.mu.RUnlock()
		return -1, os.ErrClosed
	}
	return r.fd, nil
}

// WriteFile creates or replaces rel with the content of src, making missing
// parent directories (0755, less the umask), and gives it the permission
// bits of mode (exactly; the umask does not apply). It returns the number
// of bytes written.
//
// The content goes to a temporary file in the same directory, which is then
// renamed over rel: a reader never sees half a file, a symbolic link at rel
// is replaced rather than followed, and an existing file is never written
// in place (it may be a hard link to a file outside the workspace).
//
// quota, if positive, is the most the regular files of the workspace may
// total after the write. WriteFile stops reading src once the new content
// would pass it, removes the temporary file and returns ErrQuota. The
// check is not atomic with other writers of the workspace.
func (r *Root) WriteFile(rel string, src io.Reader, mode fs.FileMode, quota int64) (int64, error) {
	root, err := r.acquire()
	if err != nil {
		return 0, err
	}
	defer r.mu.RUnlock()
	rel, err = CleanPath(rel)
	if err != nil {
		return 0, err
	}
	if err := checkDepth(rel); err != nil {
		return 0, err
	}
	dir, base := splitPath(rel)
	dirfd, err := mkdirAll(root, dir)
	if err != nil {
		return 0, err
	}
	defer unix.Close(dirfd)
	limit := int64(-1)
	if quota > 0 {
		// usage counts the directories just made for rel: each costs a
		// block, as any inode does.
		used, _, err := usage(root)
		if err != nil {
			return 0, err
		}
		// What the file may hold: the room left, with what a file it
		// replaces frees, in whole blocks; a new file costs one at least.
		limit = (quota - used + replacedSize(dirfd, base)) / InodeCost * InodeCost
		if limit < InodeCost {
			return 0, fmt.Errorf("write %q: %w (each file costs at least %d bytes)", rel, ErrQuota, InodeCost)
		}
	}
	return writeAt(dirfd, base, rel, src, uint32(mode.Perm()), limit)
}

// Symlink makes rel a symbolic link to target, making missing parent
// directories as WriteFile does. target is kept as it is and never
// followed here; what is at rel already is kept, and the call fails
// (fs.ErrExist). No link on the way to rel is followed (ErrSymlink).
func (r *Root) Symlink(target, rel string) error {
	root, err := r.acquire()
	if err != nil {
		return err
	}
	defer r.mu.RUnlock()
	rel, err = CleanPath(rel)
	if err != nil {
		return err
	}
	dir, base := splitPath(rel)
	dirfd, err := mkdirAll(root, dir)
	if err != nil {
		return err
	}
	defer unix.Close(dirfd)
	return symlinkAt(target, dirfd, base, rel)
}

// Open opens rel for reading: a regular file, or a directory ("" is the
// root). It never goes through a symbolic link (ErrSymlink) and refuses
// other file types (ErrNotRegular). It returns the file and its FileInfo.
func (r *Root) Open(rel string) (*os.File, fs.FileInfo, error) {
	root, err := r.acquire()
	if err != nil {
		return nil, nil, err
	}
	defer r.mu.RUnlock()
	rel, err = clean(rel)
	if err != nil {
		return nil, nil, err
	}
	name := orDot(rel)

	// Look at what is there through an O_PATH fd first: opening a fifo for
	// reading would block, and opening a device can have side effects, so
	// only regular files and directories are opened for real.
	probe, err := openBeneath(root, name, oPath)
	if err != nil {
		return nil, nil, mapErr("open", name, err)
	}
	var want unix.Stat_t
	err = unix.Fstat(probe, &want)
	unix.Close(probe)
	if err != nil {
		return nil, nil, &fs.PathError{Op: "stat", Path: name, Err: err}
	}
	var fd int
	var got unix.Stat_t
	switch want.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		fd, err = openBeneath(root, name, unix.O_RDONLY|unix.O_DIRECTORY)
		if err != nil {
			return nil, nil, mapErr("open", name, err)
		}
		if err := unix.Fstat(fd, &got); err != nil {
			unix.Close(fd)
			return nil, nil, &fs.PathError{Op: "stat", Path: name, Err: err}
		}
	case unix.S_IFREG:
		if fd, got, err = openReadFd(root, name); err != nil {
			return nil, nil, err
		}
	case unix.S_IFLNK:
		return nil, nil, fmt.Errorf("open %q: %w", name, ErrSymlink)
	default:
		return nil, nil, fmt.Errorf("open %q: %w", name, ErrNotRegular)
	}
	// The second open went by name again, so make sure it found the same
	// file the probe saw.
	if got.Dev != want.Dev || got.Ino != want.Ino {
		unix.Close(fd)
		return nil, nil, fmt.Errorf("open %q: file replaced while opening", name)
	}
	f := os.NewFile(uintptr(fd), name)
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// Usage returns what the workspace costs its disk, in bytes: for every
// inode under the root (files, directories, symbolic links; each
// hard-linked inode once, links never followed), the blocks it has
// allocated, and at least one block (InodeCost) even when it has none: an
// empty file or directory takes an inode and a block's worth of metadata,
// and a quota that counted only content would let a run spend the disk on
// a million empty directories.
func (r *Root) Usage() (int64, error) {
	root, err := r.acquire()
	if err != nil {
		return 0, err
	}
	defer r.mu.RUnlock()
	used, _, err := usage(root)
	return used, err
}

// InodeCost is the least an inode costs against a quota.
const InodeCost = 4096

// cost is what one inode costs against a quota: the blocks it has
// allocated, at least InodeCost.
func cost(st *unix.Stat_t) int64 {
	return max(st.Blocks*512, InodeCost)
}

// chargeFor is what content of n bytes costs against a quota once written:
// whole blocks, at least one.
func chargeFor(n int64) int64 {
	return max((n+InodeCost-1)/InodeCost*InodeCost, InodeCost)
}

// usage returns the workspace's cost (see Usage) and how many entries it
// holds.
func usage(root int) (int64, int, error) {
	fd, err := openBeneath(root, ".", unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return 0, 0, mapErr("open", ".", err)
	}
	type inode struct{ dev, ino uint64 }
	seen := map[inode]bool{}
	var total int64
	entries := 0
	err = walkTree(fd, "", 0, func(_ int, _, _ string, st *unix.Stat_t) error {
		entries++
		if st.Nlink > 1 && st.Mode&unix.S_IFMT != unix.S_IFDIR {
			k := inode{uint64(st.Dev), st.Ino}
			if seen[k] {
				return nil
			}
			seen[k] = true
		}
		total += cost(st)
		return nil
	})
	return total, entries, err
}

// ListEntry is one item of a listing.
type ListEntry struct {
	Path   string      `json:"path"`             // relative to the root, slash-separated
	Type   string      `json:"type"`             // "file", "dir", "symlink" or "other"
	Size   int64       `json:"size"`             // bytes, for files; 0 otherwise
	Mode   fs.FileMode `json:"mode"`             // type and permission bits
	SHA256 string      `json:"sha256,omitempty"` // hex digest of the content, files only
	Target string      `json:"target,omitempty"` // what a symlink points to; never followed
}

// List returns the entries under rel ("" is the root), recursively, sorted
// by path, without following symbolic links; the paths are relative to the
// root. If rel is not a directory, the listing is rel's own entry. Files
// are read to compute their SHA256. More than maxEntries entries (0 means
// 100000) is an error (ErrTooLarge).
func (r *Root) List(rel string, maxEntries int) ([]ListEntry, error) {
	root, err := r.acquire()
	if err != nil {
		return nil, err
	}
	defer r.mu.RUnlock()
	rel, err = clean(rel)
	if err != nil {
		return nil, err
	}
	if maxEntries <= 0 {
		maxEntries = defaultMaxEntries
	}
	var entries []ListEntry
	h := newHasher()
	add := func(dirfd int, name, p string, st *unix.Stat_t) error {
		if len(entries) >= maxEntries {
			return fmt.Errorf("list %q: %w: more than %d entries", orDot(rel), ErrTooLarge, maxEntries)
		}
		e, ok, err := entryFor(dirfd, name, p, st, h)
		if ok {
			entries = append(entries, e)
		}
		return err
	}
	if err := visit(root, rel, "list", add); err != nil {
		return nil, err
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Path < entries[j].Path })
	return entries, nil
}

// visit calls fn for what is under rel ("" is the root), with paths relative
// to the root, or for rel alone if it is not a directory.
func visit(root int, rel, op string, fn walkFunc) error {
	if rel == "" {
		fd, err := openBeneath(root, ".", unix.O_RDONLY|unix.O_DIRECTORY)
		if err != nil {
			return mapErr(op, ".", err)
		}
		return walkTree(fd, "", 0, fn)
	}
	dirfd, base, st, err := lookup(root, rel, op)
	if err != nil {
		return err
	}
	defer unix.Close(dirfd)
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fn(dirfd, base, rel, &st)
	}
	fd, err := openBeneath(dirfd, base, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return mapErr(op, rel, err)
	}
	return walkTree(fd, rel, 0, fn)
}

// lookup opens the directory holding rel (not the root) and stats rel's
// last element in it without following it.
func lookup(root int, rel, op string) (dirfd int, base string, st unix.Stat_t, err error) {
	dir, base := splitPath(rel)
	dirfd, err = openBeneath(root, orDot(dir), oPath|unix.O_DIRECTORY)
	if err != nil {
		return -1, "", st, mapErr(op, rel, err)
	}
	if err := unix.Fstatat(dirfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		unix.Close(dirfd)
		return -1, "", st, mapErr(op, rel, err)
	}
	return dirfd, base, st, nil
}

// entryFor describes name in dirfd, at path p, hashing a file with h (a
// file with more holes than h may read has no SHA256). ok is false if the
// entry vanished meanwhile.
func entryFor(dirfd int, name, p string, st *unix.Stat_t, h *hasher) (e ListEntry, ok bool, err error) {
	e = ListEntry{Path: p, Mode: fileMode(st), Type: "other"}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		e.Type = "dir"
	case unix.S_IFLNK:
		e.Type = "symlink"
		if e.Target, err = readlinkAt(dirfd, name); err != nil {
			return e, false, ignoreVanished(mapErr("readlink", p, err))
		}
	case unix.S_IFREG:
		f, now, err := openRead(dirfd, name)
		if errors.Is(err, ErrNotRegular) || errors.Is(err, ErrSymlink) {
			return e, false, nil // replaced by something else meanwhile
		}
		if errors.Is(err, fs.ErrPermission) {
			// codecell, not root here, owns the file, whose permissions
			// deny its owner reading it: listed as it stands, without
			// a digest.
			e.Type, e.Size = "file", st.Size
			return e, true, nil
		}
		if err != nil {
			return e, false, ignoreVanished(err)
		}
		defer f.Close()
		// Hash at most the size seen now, so that a file growing as it is
		// read cannot keep List busy; Size is what was hashed.
		e.Type, e.Mode, e.Size = "file", fileMode(&now), now.Size
		d, err := h.hash(f, &now)
		if errors.Is(err, errTooSparse) {
			return e, true, nil
		}
		if err != nil {
			return e, false, fmt.Errorf("read %q: %w", p, err)
		}
		e.Size, e.SHA256 = d.size, d.sum
	}
	return e, true, nil
}

// ignoreVanished turns a not-found error into nil: untrusted code may
// remove files while they are walked.
func ignoreVanished(err error) error {
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

// walkFunc is called for each entry of a walk: name in dirfd, at path p.
// It may return fs.SkipDir to leave out what a directory holds, or
// fs.SkipAll to end the walk there without an error.
type walkFunc func(dirfd int, name, p string, st *unix.Stat_t) error

// walkTree calls fn for each entry under the directory fd (which it takes
// over and closes), depth first, in name order, with paths prefixed by
// prefix. It descends into directories by opening each one relative to its
// parent fd without following links, so what is walked stays under fd
// however the tree changes meanwhile; entries that vanish are skipped. A
// place it cannot read ends the walk with an error.
func walkTree(fd int, prefix string, depth int, fn walkFunc) error {
	return walkAround(fd, prefix, depth, fn, func(_ string, err error) error { return err })
}

// walkAround is walkTree for a tree parts of which may be out of reach:
// each place it cannot read (a directory it cannot open or list, or one
// nested deeper than maxDepth; an entry it cannot stat) is given to
// unreadable with why, and the walk goes on past it if unreadable returns
// nil. The place is at path p; "" is the directory fd itself.
func walkAround(fd int, prefix string, depth int, fn walkFunc, unreadable func(p string, err error) error) error {
	err := walkIn(fd, prefix, depth, fn, unreadable)
	if err == fs.SkipAll {
		return nil
	}
	return err
}

// walkIn is the walk itself, for walkAround; fs.SkipAll comes back out of
// it.
func walkIn(fd int, prefix string, depth int, fn walkFunc, unreadable func(string, error) error) error {
	d := os.NewFile(uintptr(fd), orDot(prefix))
	defer d.Close()
	if depth >= maxDepth {
		return unreadable(prefix, fmt.Errorf("walk %q: %w: nested more than %d directories deep", prefix, ErrTooLarge, maxDepth))
	}
	names, err := d.Readdirnames(-1)
	if err != nil {
		return unreadable(prefix, fmt.Errorf("read directory %q: %w", orDot(prefix), err))
	}
	sort.Strings(names)
	for _, name := range names {
		p := joinPath(prefix, name)
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if err == unix.ENOENT {
				continue
			}
			if err := unreadable(p, &fs.PathError{Op: "stat", Path: p, Err: err}); err != nil {
				return err
			}
			continue
		}
		switch err := fn(fd, name, p, &st); err {
		case nil:
		case fs.SkipDir:
			continue
		default:
			return err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			continue
		}
		sub, err := openBeneath(fd, name, unix.O_RDONLY|unix.O_DIRECTORY)
		switch err {
		case nil:
			err = walkIn(sub, p, depth+1, fn, unreadable)
		case unix.ENOENT, unix.ENOTDIR, unix.ELOOP:
			continue // replaced meanwhile; not a directory to walk any more
		default:
			err = unreadable(p, mapErr("open", p, err))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// walkOpen is openBeneath done by hand: each component is opened relative
// to the previous one with O_NOFOLLOW, so no link is followed and, as rel
// holds no "..", nothing outside dirfd is reached.
func walkOpen(dirfd int, rel string, flags int) (int, error) {
	names := strings.Split(rel, "/")
	cur := dirfd
	for i, name := range names {
		if name == "" || name == ".." {
			// clean never produces these; refuse rather than trust it.
			if cur != dirfd {
				unix.Close(cur)
			}
			return -1, unix.EXDEV
		}
		fl := oPath | unix.O_DIRECTORY
		if i == len(names)-1 {
			fl = flags
		}
		fd, err := openat1(cur, name, fl)
		if cur != dirfd {
			unix.Close(cur)
		}
		if err != nil || i == len(names)-1 {
			return fd, err
		}
		cur = fd
	}
	panic("unreachable")
}

// openat1 opens the single name in dirfd with O_NOFOLLOW, reporting a
// symbolic link there as ELOOP whatever the flags.
func openat1(dirfd int, name string, flags int) (int, error) {
	fd, err := unix.Openat(dirfd, name, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	var st unix.Stat_t
	switch {
	case err == nil && flags&unix.O_DIRECTORY == 0:
		// With O_PATH and O_NOFOLLOW, Linux opens a link itself.
		if unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			unix.Close(fd)
			return -1, unix.ELOOP
		}
	case err == unix.ENOTDIR:
		// O_DIRECTORY|O_NOFOLLOW on a link fails with ENOTDIR; say what
		// it really was. This stat only picks the error.
		if unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			return -1, unix.ELOOP
		}
	}
	return fd, err
}

// mkdirAll opens directory rel ("" for dirfd itself) beneath dirfd,
// creating what is missing with mode 0755, one component at a time so that
// a link swapped in at any moment is refused rather than followed. It
// returns a directory fd usable with the *at calls.
func mkdirAll(dirfd int, rel string) (int, error) {
	fd, _, err := mkdirAllMade(dirfd, rel)
	return fd, err
}

// mkdirAllMade is mkdirAll, and says how many directories it made: each
// costs an inode and a block, which a quota charges.
func mkdirAllMade(dirfd int, rel string) (fd, made int, err error) {
	cur, err := openBeneath(dirfd, ".", oPath|unix.O_DIRECTORY)
	if err != nil {
		return -1, 0, mapErr("open", ".", err)
	}
	if rel == "" {
		return cur, 0, nil
	}
	done := ""
	for _, name := range strings.Split(rel, "/") {
		done = joinPath(done, name)
		next, err := openBeneath(cur, name, oPath|unix.O_DIRECTORY)
		if err == unix.ENOENT {
			err = unix.Mkdirat(cur, name, 0o755)
			if err == nil {
				made++
			}
			if err == nil || err == unix.EEXIST {
				// Open whatever is there now, which need not be what we
				// made; a link put there meanwhile is refused.
				next, err = openBeneath(cur, name, oPath|unix.O_DIRECTORY)
			}
		}
		unix.Close(cur)
		if err != nil {
			return -1, made, mapErr("mkdir", done, err)
		}
		cur = next
	}
	return cur, made, nil
}

// checkDepth refuses a path nested deeper than the walks that list and
// measure a workspace (List, Usage, WriteTar) descend: what they could not
// see, a quota could not charge.
func checkDepth(rel string) error {
	if n := strings.Count(rel, "/") + 1; rel != "" && n >= maxDepth {
		return fmt.Errorf("%q: %w: nested %d directories deep, and a workspace holds at most %d", rel, ErrBadPath, n, maxDepth-1)
	}
	return nil
}

// openRead opens name beneath dirfd for reading if it is a regular file,
// and returns it with its stat.
func openRead(dirfd int, name string) (*os.File, unix.Stat_t, error) {
	fd, st, err := openReadFd(dirfd, name)
	if err != nil {
		return nil, st, err
	}
	return os.NewFile(uintptr(fd), name), st, nil
}

// openReadFd is openRead returning the bare fd. O_NONBLOCK keeps a fifo
// put there meanwhile from blocking the open; the fstat after it refuses
// anything but a regular file.
func openReadFd(dirfd int, name string) (int, unix.Stat_t, error) {
	var st unix.Stat_t
	fd, err := openBeneath(dirfd, name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY)
	if err != nil {
		return -1, st, mapErr("open", name, err)
	}
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, st, &fs.PathError{Op: "stat", Path: name, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return -1, st, fmt.Errorf("open %q: %w", name, ErrNotRegular)
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return -1, st, err
	}
	return fd, st, nil
}

// writeAt writes src to a new temporary file in dirfd and renames it to
// name (p is name's path, for errors), with permission bits perm. If limit
// is not negative, more than limit bytes is ErrQuota; a sparseFile is
// copied with its holes, and no limit. The temporary file
// is removed on failure.
func writeAt(dirfd int, name, p string, src io.Reader, perm uint32, limit int64) (int64, error) {
	tmp, fd, err := createTemp(dirfd)
	if err != nil {
		return 0, &fs.PathError{Op: "create", Path: p, Err: err}
	}
	f := os.NewFile(uintptr(fd), tmp)
	done := false
	defer func() {
		if !done {
			f.Close()
			unix.Unlinkat(dirfd, tmp, 0)
		}
	}()
	var n int64
	if sf, ok := src.(sparseFile); ok {
		n, err = copySparse(f, sf.f, sf.st)
	} else {
		in := src
		if limit >= 0 {
			// One byte past the limit is enough to know it is passed.
			in = io.LimitReader(src, limit+1)
		}
		n, err = io.Copy(f, in)
	}
	if err != nil {
		return 0, fmt.Errorf("write %q: %w", p, err)
	}
	if limit >= 0 && n > limit {
		return 0, fmt.Errorf("write %q: %w", p, ErrQuota)
	}
	if err := unix.Fchmod(fd, perm); err != nil {
		return 0, &fs.PathError{Op: "chmod", Path: p, Err: err}
	}
	if err := f.Close(); err != nil {
		return 0, fmt.Errorf("write %q: %w", p, err)
	}
	// rename(2) replaces whatever non-directory is at name, link or not,
	// and never follows it; it fails on a directory.
	if err := unix.Renameat(dirfd, tmp, dirfd, name); err != nil {
		unix.Unlinkat(dirfd, tmp, 0)
		done = true
		return 0, mapErr("rename", p, err)
	}
	done = true
	return n, nil
}

// createTemp creates a new empty file in dirfd, readable and writable only
// by its owner. O_EXCL never follows a link at the name.
func createTemp(dirfd int) (string, int, error) {
	for {
		name := tempPrefix + rand.Text()
		fd, err := unix.Openat(dirfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != unix.EEXIST {
			return name, fd, err
		}
	}
}

// replaceAt puts a new name in dirfd in place of name, the way writeAt
// does for files: create is given a fresh temporary name to create.
func replaceAt(dirfd int, name, p string, create func(tmp string) error) error {
	for {
		tmp := tempPrefix + rand.Text()
		err := create(tmp)
		if err == unix.EEXIST {
			continue
		}
		if err != nil {
			return mapErr("create", p, err)
		}
		if err := unix.Renameat(dirfd, tmp, dirfd, name); err != nil {
			unix.Unlinkat(dirfd, tmp, 0)
			return mapErr("rename", p, err)
		}
		return nil
	}
}

// replacedSize is the space freed by replacing name in dirfd: its size if
// it is a regular file with no other links, else 0.
func replacedSize(dirfd int, name string) int64 {
	var st unix.Stat_t
	if unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return 0
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Nlink != 1 {
		return 0
	}
	return cost(&st)
}

// readlinkAt reads the link name in dirfd.
func readlinkAt(dirfd int, name string) (string, error) {
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(dirfd, name, buf)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
}

// symlinkAt makes name in dirfd a symbolic link to target.
func symlinkAt(target string, dirfd int, name, p string) error {
	if err := unix.Symlinkat(target, dirfd, name); err != nil {
		return mapErr("symlink", p, err)
	}
	return nil
}

// setTimes gives name in dirfd the modification time of st, as its access
// time too, without following a link.
func setTimes(dirfd int, name, p string, st *unix.Stat_t) error {
	ts := []unix.Timespec{st.Mtim, st.Mtim}
	if err := unix.UtimesNanoAt(dirfd, name, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return mapErr("chtimes", p, err)
	}
	return nil
}

// lchownAt gives name in dirfd (a link itself, not what it points to) to o.
func lchownAt(dirfd int, name, p string, o Owner) error {
	if err := unix.Fchownat(dirfd, name, o.UID, o.GID, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return mapErr("chown", p, err)
	}
	return nil
}

// mapErr wraps a system error from resolving p with the package's
// sentinel for it, keeping the system error too.
func mapErr(op, p string, err error) error {
	var kind error
	switch err {
	case unix.ELOOP:
		kind = ErrSymlink
	case unix.ENOENT:
		kind = ErrNotFound
	case unix.ENOTDIR, unix.EISDIR:
		kind = ErrNotRegular
	case unix.EXDEV:
		// RESOLVE_BENEATH refused to leave the root.
		kind = ErrBadPath
	default:
		return &fs.PathError{Op: op, Path: p, Err: err}
	}
	return fmt.Errorf("%s %q: %w (%w)", op, p, kind, err)
}

// fileMode converts a stat mode to an fs.FileMode.
func fileMode(st *unix.Stat_t) fs.FileMode {
	m := fs.FileMode(st.Mode & 0o777)
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		m |= fs.ModeDir
	case unix.S_IFLNK:
		m |= fs.ModeSymlink
	case unix.S_IFIFO:
		m |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		m |= fs.ModeSocket
	case unix.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		m |= fs.ModeDevice
	}
	if st.Mode&unix.S_ISUID != 0 {
		m |= fs.ModeSetuid
	}
	if st.Mode&unix.S_ISGID != 0 {
		m |= fs.ModeSetgid
	}
	if st.Mode&unix.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}

func modTime(st *unix.Stat_t) time.Time {
	sec, nsec := st.Mtim.Unix()
	return time.Unix(sec, nsec)
}

// splitPath splits a cleaned path into its directory ("" for the root) and
// last element.
func splitPath(p string) (dir, base string) {
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return "", p
	}
	return p[:i], p[i+1:]
}

func joinPath(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// orDot returns p, or "." for the root.
func orDot(p string) string {
	if p == "" {
		return "."
	}
	return p
}
