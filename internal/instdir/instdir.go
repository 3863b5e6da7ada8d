//go:build unix

// Package instdir gives a process a directory of its own under a shared
// base, which outlives its owner only until the next Claim: a process
// killed with SIGKILL cannot remove its directory, so each Claim first
// removes the directories of owners that are gone.
//
// A directory is held by an exclusive flock on its ".lock" file. The kernel
// drops the lock when the owner dies, however it dies, so a free lock is
// proof that the owner is gone; no pid is trusted, since pids are reused.
package instdir

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

const (
	lockName  = ".lock"
	tmpSuffix = ".tmp"
	// tmpAge is how old a half-made directory must be before it is taken
	// for a dead owner's (see Claim).
	tmpAge = time.Minute
)

// tmpfsMagic is a tmpfs's statfs type.
const tmpfsMagic = 0x01021994

// TmpfsBase is a base for this user's instance directories on a tmpfs,
// /dev/shm/codecell-<euid>, where files cost no disk I/O; "" when /dev/shm
// is not a tmpfs this user may write.
func TmpfsBase() string {
	var st unix.Statfs_t
	if unix.Statfs("/dev/shm", &st) != nil || int64(st.Type) != tmpfsMagic || unix.Access("/dev/shm", unix.W_OK) != nil {
		return ""
	}
	return filepath.Join("/dev/shm", fmt.Sprintf("codecell-%d", os.Geteuid()))
}

// Bases are the directories under which this user's instance directories
// may go, best first: TmpfsBase, when there is one, then
// <os.TempDir()>/codecell-<euid>, then this user's cache directory
// (~/.cache/codecell/tmp). The first two are names in directories every
// user may write, so another user may have made one of them first, a
// directory of theirs that Claim refuses; the cache directory is under
// this user's home, where no one else can.
func Bases() []string {
	var bases []string
	if b := TmpfsBase(); b != "" {
		bases = append(bases, b)
	}
	bases = append(bases, filepath.Join(os.TempDir(), fmt.Sprintf("codecell-%d", os.Geteuid())))
	if d, err := os.UserCacheDir(); err == nil && filepath.IsAbs(d) {
		bases = append(bases, filepath.Join(d, "codecell", "tmp"))
	}
	return bases
}

// ClaimFirst claims a directory as Claim does, under the first of bases
// that takes one; it returns the errors of the bases that refused only
// when none took one.
func ClaimFirst(bases []string, prefix string) (*Dir, []string, error) {
	var errs []error
	for _, base := range bases {
		d, removed, err := Claim(base, prefix)
		if d != nil {
			return d, removed, err
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		errs = append(errs, errors.New("instdir: no base directory"))
	}
	return nil, nil, errors.Join(errs...)
}

// A process's own directories: one under the first of Bases (Process),
// and one under the first of them that is on disk (ProcessOnDisk).
type processClaim struct {
	claimed bool
	dir     *Dir
	err     error
}

var (
	processMu       sync.Mutex
	processReleased bool
	processMem      processClaim
	processDisk     processClaim
)

// errProcessReleased is what Process says once ReleaseProcess ran.
var errProcessReleased = errors.New("instdir: this process's directory was released as it exits")

// Process is this process's own directory, claimed with the prefix
// "proc-" under the first of Bases that takes one, at the first call, and
// held until ReleaseProcess or the end of the process: its lock goes with
// the process, so the next codecell process of this user to call Process
// removes what a killed one left. It is for temporary files that must not
// outlive the process for long: runner directories, interpreters' files.
// The error says why there is none; a path with an error is usable (only
// the removal of some leftovers failed). The Dir is kept here, and only
// its path given out.
func Process() (string, error) {
	return claimProcess(&processMem, Bases())
}

// ProcessOnDisk is as Process, under the first of Bases that is not on a
// tmpfs: for files that may grow as large as a program makes them (a
// workspace a program writes in place), which on a tmpfs would take the
// machine's memory.
func ProcessOnDisk() (string, error) {
	var disk []string
	tmpfs := TmpfsBase()
	for _, b := range Bases() {
		if b != tmpfs {
			disk = append(disk, b)
		}
	}
	return claimProcess(&processDisk, disk)
}

func claimProcess(c *processClaim, bases []string) (string, error) {
	processMu.Lock()
	defer processMu.Unlock()
	if processReleased {
		return "", errProcessReleased
	}
	if !c.claimed {
		c.claimed = true
		c.dir, _, c.err = ClaimFirst(bases, "proc-")
	}
	if c.dir == nil {
		return "", c.err
	}
	return c.dir.Path, c.err
}

// ReleaseProcess removes this process's own directories (Process and
// ProcessOnDisk), those it claimed, with all they hold, as a command that
// ends normally does last, so that it leaves nothing for the next process
// to remove. Later calls of either return an error, and no directory.
func ReleaseProcess() error {
	processMu.Lock()
	defer processMu.Unlock()
	processReleased = true
	var errs []error
	for _, c := range []*processClaim{&processMem, &processDisk} {
		if c.dir != nil {
			errs = append(errs, c.dir.Release())
			// The base too, when this was the last directory in it (a
			// Claim that opened it meanwhile makes it again).
			_ = unix.Rmdir(filepath.Dir(c.dir.Path))
		}
	}
	return errors.Join(errs...)
}

// Dir is a directory held by this process, until Release or the end of
// the process. The lock is a raw descriptor, not an *os.File: a Dir that is
// dropped and collected must not close it (a finalizer would) and let
// another process take the directory for a dead one's while it is in use.
type Dir struct {
	Path string // absolute

	mu      sync.Mutex
	base    int // open base directory
	name    string
	lock    int // the descriptor that holds the flock
	dev     uint64
	removed bool
}

// Claim makes a new directory under base (created 0700 if missing) named
// "<prefix><pid>-<random>", held by an exclusive flock on "<dir>/.lock" for
// the life of the returned Dir. It first removes every such directory under
// base whose lock is free (its owner is gone), and reports them.
//
// base must be a real directory (not a symbolic link) owned by this euid
// and not writable by group or others; Claim refuses it otherwise. Leftovers
// are removed without following symbolic links or entering other
// filesystems, and only when they are directories owned by this euid.
//
// When only the removal of some leftovers failed, Claim returns the Dir
// together with an error that says which; the Dir is valid.
func Claim(base, prefix string) (*Dir, []string, error) {
	if prefix == "" || strings.ContainsAny(prefix, "/\x00") || strings.HasPrefix(prefix, ".") {
		return nil, nil, fmt.Errorf("instdir: invalid prefix %q", prefix)
	}
	base, err := filepath.Abs(base)
	if err != nil {
		return nil, nil, fmt.Errorf("instdir: %w", err)
	}
	for attempt := 0; ; attempt++ {
		bfd, dev, err := openBase(base)
		if err != nil {
			return nil, nil, err
		}
		removed, sweepErr := sweep(bfd, base, prefix, dev)
		d, err := create(bfd, base, prefix)
		if err != nil {
			unix.Close(bfd)
			if errors.Is(err, unix.ENOENT) && attempt == 0 {
				// The base was removed after it was opened, empty, by the
				// process that held the last directory in it (see
				// ReleaseProcess): it is made again.
				continue
			}
			return nil, removed, errors.Join(err, sweepErr)
		}
		d.dev = dev
		return d, removed, sweepErr
	}
}

// Release removes the directory and everything in it, then drops the lock.
// Releasing twice is harmless.
func (d *Dir) Release() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.removed {
		return nil
	}
	d.removed = true
	err := removeTree(d.base, d.name, d.Path, d.dev, true)
	unix.Close(d.lock)
	unix.Close(d.base)
	return err
}

// openBase makes base if missing and opens it, refusing a base that another
// user could change (a link, someone else's, group or world writable): what
// is removed under it must be what this process's kind put there.
func openBase(base string) (int, uint64, error) {
	if err := os.MkdirAll(base, 0o700); err != nil {
		return -1, 0, fmt.Errorf("instdir: %w", err)
	}
	fd, err := unix.Open(base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return -1, 0, fmt.Errorf("instdir: refusing base %s: it is a symbolic link or not a directory", base)
		}
		return -1, 0, fmt.Errorf("instdir: open %s: %w", base, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, 0, fmt.Errorf("instdir: stat %s: %w", base, err)
	}
	switch {
	case int(st.Uid) != os.Geteuid():
		err = fmt.Errorf("instdir: refusing base %s: it belongs to uid %d, not to this process's uid %d", base, st.Uid, os.Geteuid())
	case st.Mode&0o022 != 0:
		err = fmt.Errorf("instdir: refusing base %s: it is writable by group or others (mode %#o)", base, st.Mode&0o7777)
	}
	if err != nil {
		unix.Close(fd)
		return -1, 0, err
	}
	return fd, uint64(st.Dev), nil
}

// create makes the directory. It is made under a temporary name, its lock
// file created and locked inside, and only then renamed to its final name:
// a directory under a final name is locked from the moment it appears, so
// another Claim that finds its lock free knows the owner is gone, never
// that the owner has not locked it yet. A temporary directory left by an
// owner that died before the rename is removed by sweep once it is old.
func create(bfd int, base, prefix string) (*Dir, error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := prefix + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
	tmp := "." + name + tmpSuffix
	if err := unix.Mkdirat(bfd, tmp, 0o700); err != nil {
		return nil, fmt.Errorf("instdir: mkdir %s: %w", filepath.Join(base, tmp), err)
	}
	fail := func(err error) (*Dir, error) {
		removeTree(bfd, tmp, filepath.Join(base, tmp), 0, false)
		return nil, fmt.Errorf("instdir: %w", err)
	}
	tfd, err := unix.Openat(bfd, tmp, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail(err)
	}
	lfd, err := unix.Openat(tfd, lockName, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	unix.Close(tfd)
	if err != nil {
		return fail(err)
	}
	if err := unix.Flock(lfd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		unix.Close(lfd)
		return fail(fmt.Errorf("lock %s: %w", filepath.Join(base, tmp, lockName), err))
	}
	if err := unix.Renameat(bfd, tmp, bfd, name); err != nil {
		unix.Close(lfd)
		return fail(fmt.Errorf("rename %s: %w", filepath.Join(base, tmp), err))
	}
	return &Dir{Path: filepath.Join(base, name), base: bfd, name: name, lock: lfd}, nil
}

// leftover reports whether name is a directory name Claim makes with
// prefix, final ("<prefix><pid>-<12 hex>") or temporary ("." + that +
// ".tmp"). Other names under base are never touched.
func leftover(name, prefix string) (ok, tmp bool) {
	if rest, found := strings.CutPrefix(name, "."); found {
		if rest, found = strings.CutSuffix(rest, tmpSuffix); !found {
			return false, false
		}
		name, tmp = rest, true
	}
	rest, found := strings.CutPrefix(name, prefix)
	if !found {
		return false, false
	}
	pid, rnd, found := strings.Cut(rest, "-")
	if !found || len(rnd) != 12 {
		return false, false
	}
	if n, err := strconv.Atoi(pid); err != nil || n <= 0 || strconv.Itoa(n) != pid {
		return false, false
	}
	if _, err := hex.DecodeString(rnd); err != nil || strings.ToLower(rnd) != rnd {
		return false, false
	}
	return true, tmp
}

// sweep removes the directories of dead owners under base.
func sweep(bfd int, base, prefix string, dev uint64) ([]string, error) {
	lfd, err := unix.Openat(bfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("instdir: %w", err)
	}
	list := os.NewFile(uintptr(lfd), base)
	names, err := list.Readdirnames(-1)
	list.Close()
	if err != nil {
		return nil, fmt.Errorf("instdir: list %s: %w", base, err)
	}
	var removed []string
	var errs []error
	for _, name := range names {
		ok, tmp := leftover(name, prefix)
		if !ok {
			continue
		}
		path := filepath.Join(base, name)
		done, err := removeIfDead(bfd, name, path, dev, tmp)
		if err != nil {
			errs = append(errs, err)
		}
		if done {
			removed = append(removed, path)
		}
	}
	return removed, errors.Join(errs...)
}

// removeIfDead removes base/name when it is a directory of this euid's
// whose lock is free or missing (for a temporary one: and it is old), and
// holds that lock while it does.
func removeIfDead(bfd int, name, path string, dev uint64, tmp bool) (bool, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(bfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return false, nil // gone meanwhile
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || int(st.Uid) != os.Geteuid() {
		return false, nil // not one this process's kind made
	}
	if tmp && time.Since(time.Unix(st.Mtim.Unix())) < tmpAge {
		return false, nil // its owner may be between mkdir and rename
	}
	dfd, err := unix.Openat(bfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		return false, fmt.Errorf("instdir: open %s: %w", path, err)
	}
	// O_NONBLOCK: a FIFO named .lock must not hang the open.
	lfd, err := unix.Openat(dfd, lockName, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	unix.Close(dfd)
	switch {
	case errors.Is(err, unix.ENOENT):
		// No lock: a final directory always appears locked, so this one's
		// owner died while removing it.
	case err != nil:
		return false, fmt.Errorf("instdir: open %s: %w", filepath.Join(path, lockName), err)
	default:
		defer unix.Close(lfd)
		if err := unix.Flock(lfd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
			return false, nil // its owner lives
		}
	}
	if err := removeTree(bfd, name, path, dev, true); err != nil {
		return false, err
	}
	return true, nil
}

// removeTree removes the directory name under the directory pfd with all it
// holds, without following symbolic links (a link is removed, not its
// target) and without entering another filesystem (dev; 0 means the
// directory's own). Directories whose permissions keep their owner out are
// opened up first. In the top directory, .lock goes last when lockLast is
// set, so that another sweep never finds it missing while the rest is still
// there. path is for messages.
func removeTree(pfd int, name, path string, dev uint64, lockLast bool) error {
	var st unix.Stat_t
	if err := unix.Fstatat(pfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return notExistOK(err, path)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return notExistOK(unix.Unlinkat(pfd, name, 0), path)
	}
	if dev == 0 {
		dev = uint64(st.Dev)
	}
	if uint64(st.Dev) != dev {
		return fmt.Errorf("instdir: not removing %s: another filesystem is mounted there", path)
	}
	if st.Mode&0o700 != 0o700 {
		// The entry was just seen to be a directory, not a link; only this
		// euid can write where it is, so it cannot have been swapped since.
		if err := unix.Fchmodat(pfd, name, 0o700, 0); err != nil {
			return notExistOK(err, path)
		}
	}
	fd, err := unix.Openat(pfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return notExistOK(err, path)
	}
	dir := os.NewFile(uintptr(fd), path)
	defer dir.Close()
	// Listed in full before removing: a directory changed while being read
	// may skip entries.
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("instdir: list %s: %w", path, err)
	}
	var errs []error
	for _, child := range names {
		if lockLast && child == lockName {
			continue
		}
		if err := removeTree(fd, child, filepath.Join(path, child), dev, false); err != nil {
			errs = append(errs, err)
		}
	}
	if lockLast {
		if err := notExistOK(unix.Unlinkat(fd, lockName, 0), filepath.Join(path, lockName)); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		if err := notExistOK(unix.Unlinkat(pfd, name, unix.AT_REMOVEDIR), path); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func notExistOK(err error, path string) error {
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	return &os.PathError{Op: "remove", Path: path, Err: err}
}
