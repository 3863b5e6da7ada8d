package workspace

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The tests here attack Take, Diff, CopyTree and Apply with what a program
// can leave in its workspace: links to a directory outside that the test
// owns, fifos where files were, and corners a walk cannot read. Every
// attack is harmless if it gets through: the only file outside is the
// test's marker, which is checked, never needed.

// guard makes dir/marker, the file attacks aim at, and returns a check, for
// after an attack, that nothing in dir was written, added or removed and,
// where the filesystem keeps access times, that the marker was not read.
func guard(t *testing.T, dir string) (marker string, check func()) {
	t.Helper()
	marker = filepath.Join(dir, "marker")
	mustWrite(t, marker, "outside", 0o644)
	contents := snapshot(t, dir)
	old := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	// Reading moves an access time this old on, unless the filesystem
	// keeps none (noatime): find out by reading once.
	must(t, os.Chtimes(marker, old, old))
	if _, err := os.ReadFile(marker); err != nil {
		t.Fatal(err)
	}
	readsShow := !accessTime(t, marker).Equal(old)
	must(t, os.Chtimes(marker, old, old))
	return marker, func() {
		t.Helper()
		// Times first: comparing the contents reads the marker.
		if readsShow && !accessTime(t, marker).Equal(old) {
			t.Errorf("the marker outside was read")
		}
		if info, err := os.Lstat(marker); err != nil || !info.ModTime().Equal(old) {
			t.Errorf("the marker outside was written: %v", err)
		}
		if got := snapshot(t, dir); !reflect.DeepEqual(got, contents) {
			t.Errorf("outside changed: %v, was %v", got, contents)
		}
		must(t, os.Chtimes(marker, old, old))
	}
}

func accessTime(t *testing.T, p string) time.Time {
	t.Helper()
	var st unix.Stat_t
	must(t, unix.Lstat(p, &st))
	sec, nsec := st.Atim.Unix()
	return time.Unix(sec, nsec).UTC()
}

// noBlock runs f and fails if it does not return: a fifo opened for
// reading would block it. The fifos are then opened for writing, which
// lets such a reader go, so that the test ends either way.
func noBlock(t *testing.T, what string, fifos []string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		for _, p := range fifos {
			if fd, err := unix.Open(p, unix.O_WRONLY|unix.O_NONBLOCK, 0); err == nil {
				unix.Close(fd)
			}
		}
		<-done
		t.Fatalf("%s blocked on a fifo", what)
	}
}

func TestTakeAndDiffDoNotFollowLinks(t *testing.T) {
	bothResolvers(t, func(t *testing.T) {
		_, ws, outside, _ := setup(t)
		marker, check := guard(t, outside)
		mustSymlink(t, outside, filepath.Join(ws, "out"))
		mustSymlink(t, marker, filepath.Join(ws, "m"))
		mustSymlink(t, "../outside/marker", filepath.Join(ws, "rel"))
		mustWrite(t, filepath.Join(ws, "in.txt"), "inside", 0o644)

		s, err := Take(ws)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for p := range s.Entries {
			names = append(names, p)
		}
		slices.Sort(names)
		if want := []string{"in.txt", "m", "out", "rel"}; !slices.Equal(names, want) {
			t.Fatalf("Take listed %v, want %v", names, want)
		}
		for p, target := range map[string]string{"out": outside, "m": marker, "rel": "../outside/marker"} {
			e := s.Entries[p]
			if e.Mode&fs.ModeSymlink == 0 || e.Link != target || e.Size != int64(len(target)) {
				t.Errorf("%s: %+v, want a link to %s", p, e, target)
			}
		}

		// Diff hashes what the snapshot after lists as files: give it the
		// links as files, and a path through the linked directory.
		after := &Snapshot{Entries: map[string]Entry{"m": {}, "rel": {}, "out/marker": {}, "in.txt": {}}}
		changes, err := Diff(&Snapshot{Entries: map[string]Entry{}}, after, ws)
		if err != nil {
			t.Fatal(err)
		}
		inside := sha256.Sum256([]byte("inside"))
		for _, c := range changes {
			want := ""
			if c.Path == "in.txt" {
				want = hex.EncodeToString(inside[:])
			}
			if c.SHA256 != want {
				t.Errorf("%s hashed as %q, want %q", c.Path, c.SHA256, want)
			}
		}
		check()
	})
}

func TestCopyTreeDoesNotFollowLinks(t *testing.T) {
	bothResolvers(t, func(t *testing.T) {
		base, src, outside, _ := setup(t)
		marker, check := guard(t, outside)
		mustSymlink(t, outside, filepath.Join(src, "out"))
		mustSymlink(t, marker, filepath.Join(src, "m"))
		mustWrite(t, filepath.Join(src, "dir/f.txt"), "inside", 0o640)

		dst := filepath.Join(base, "dst")
		must(t, os.Mkdir(dst, 0o755))
		if err := CopyTree(src, dst, KeepOwner); err != nil {
			t.Fatal(err)
		}
		want := map[string]string{".": "dir", "out": "-> " + outside, "m": "-> " + marker, "dir": "dir", "dir/f.txt": "inside"}
		if got := snapshot(t, dst); !reflect.DeepEqual(got, want) {
			t.Errorf("copied %v, want %v", got, want)
		}
		check()

		// A destination with links where the tree puts a directory and a
		// file: neither is written through.
		for _, c := range []struct{ link, target, file string }{
			{"dir", outside, "dir/f.txt"},
			{"m", marker, "m"},
		} {
			dst := t.TempDir()
			mustSymlink(t, c.target, filepath.Join(dst, c.link))
			from := t.TempDir()
			mustWrite(t, filepath.Join(from, c.file), "program", 0o644)
			if err := CopyTree(from, dst, KeepOwner); err == nil {
				t.Errorf("CopyTree wrote %s through a link", c.file)
			}
			check()
		}
	})
}

func TestApplyDoesNotFollowLinks(t *testing.T) {
	bothResolvers(t, func(t *testing.T) {
		base, to, outside, _ := setup(t)
		marker, check := guard(t, outside)
		from := filepath.Join(base, "from")
		mustWrite(t, filepath.Join(from, "dir/new.txt"), "program", 0o644)
		mustWrite(t, filepath.Join(from, "m"), "program", 0o644)
		mustWrite(t, filepath.Join(from, "ok.txt"), "program", 0o644)
		mustSymlink(t, marker, filepath.Join(from, "evil"))
		mustSymlink(t, outside, filepath.Join(from, "via"))
		mustSymlink(t, outside, filepath.Join(to, "dir"))
		mustSymlink(t, marker, filepath.Join(to, "m"))

		changes := []Change{
			{Path: "dir/new.txt", Kind: "created"},                   // into a linked directory
			{Path: "dir/marker", Kind: "deleted"},                    // out of one
			{Path: "evil", Kind: "created"},                          // a link dressed as a file
			{Path: "via/marker", Kind: "created"},                    // read through a link
			{Path: "../outside/marker", Kind: "deleted"},             // a path that leaves
			{Path: "lnk", Kind: "created", Symlink: "../outside/mk"}, // a link is data
			{Path: "m", Kind: "modified"},                            // the link is replaced
			{Path: "ok.txt", Kind: "created"},
		}
		errs := Apply(changes, from, to, KeepOwner)
		var failed []string
		for _, err := range errs {
			failed = append(failed, strings.SplitN(err.Error(), ":", 2)[0])
		}
		if want := []string{"dir/new.txt", "dir/marker", "evil", "via/marker", "../outside/marker"}; !slices.Equal(failed, want) {
			t.Fatalf("failed %v, want %v: %v", failed, want, errs)
		}
		if !errors.Is(errs[len(errs)-1], ErrBadPath) {
			t.Errorf("a path out of the directory: %v", errs[len(errs)-1])
		}
		want := map[string]string{".": "dir", "dir": "-> " + outside, "lnk": "-> ../outside/mk", "m": "program", "ok.txt": "program"}
		if got := snapshot(t, to); !reflect.DeepEqual(got, want) {
			t.Errorf("applied %v, want %v", got, want)
		}
		check()
	})
}

func TestFifoDoesNotBlock(t *testing.T) {
	bothResolvers(t, func(t *testing.T) {
		base, ws, _, _ := setup(t)
		to := filepath.Join(base, "to")
		must(t, os.Mkdir(to, 0o755))
		p, q := filepath.Join(ws, "p"), filepath.Join(to, "q")
		must(t, unix.Mkfifo(p, 0o644))
		must(t, unix.Mkfifo(q, 0o644))
		mustWrite(t, filepath.Join(ws, "q"), "program", 0o644)
		fifos := []string{p, q}

		noBlock(t, "Take", fifos, func() {
			s, err := Take(ws)
			if err != nil || len(s.Entries) != 1 {
				t.Errorf("Take: %v, %v", s.Entries, err)
			}
		})
		// A fifo put where the listing saw a file.
		noBlock(t, "Diff", fifos, func() {
			after := &Snapshot{Entries: map[string]Entry{"p": {Size: 3}}}
			changes, err := Diff(&Snapshot{Entries: map[string]Entry{}}, after, ws)
			if err != nil || len(changes) != 1 || changes[0].SHA256 != "" || changes[0].Size != 3 {
				t.Errorf("Diff: %+v, %v", changes, err)
			}
		})
		// A fifo to copy from is refused; one to copy over is replaced.
		noBlock(t, "Apply", fifos, func() {
			errs := Apply([]Change{{Path: "p", Kind: "created"}, {Path: "q", Kind: "modified"}}, ws, to, KeepOwner)
			if len(errs) != 1 || !errors.Is(errs[0], ErrNotRegular) {
				t.Errorf("Apply: %v", errs)
			}
		})
		if got, want := snapshot(t, to), map[string]string{".": "dir", "q": "program"}; !reflect.DeepEqual(got, want) {
			t.Errorf("applied %v, want %v", got, want)
		}
		dst := filepath.Join(base, "dst")
		must(t, os.Mkdir(dst, 0o755))
		noBlock(t, "CopyTree", fifos, func() {
			if err := CopyTree(ws, dst, KeepOwner); err != nil {
				t.Errorf("CopyTree: %v", err)
			}
		})
		if got, want := snapshot(t, dst), map[string]string{".": "dir", "q": "program"}; !reflect.DeepEqual(got, want) {
			t.Errorf("copied %v, want %v", got, want)
		}
	})
}

// A tree nested deeper than maxDepth is named as unlisted where it passes
// the bound, and the walk goes on: what comes after it, and what is above
// the bound in it, is listed; nothing below is taken for deleted. CopyTree
// refuses it.
func TestTakeGoesPastTooDeep(t *testing.T) {
	ws := t.TempDir()
	mustWrite(t, filepath.Join(ws, "a.txt"), "a", 0o644)
	mustWrite(t, filepath.Join(ws, "z.txt"), "z", 0o644)
	deep := strings.Repeat("d/", maxDepth+10)
	mustWrite(t, filepath.Join(ws, deep, "bottom.txt"), "deep", 0o644)
	mid := strings.Repeat("d/", maxDepth-1) + "mid.txt"
	mustWrite(t, filepath.Join(ws, mid), "mid", 0o644)

	s, err := Take(ws)
	if err != nil {
		t.Fatal(err)
	}
	unlisted := strings.TrimSuffix(strings.Repeat("d/", maxDepth), "/")
	if s.Unreadable != 1 || !slices.Equal(s.Unlisted, []string{unlisted}) {
		t.Fatalf("unreadable %d, unlisted %v", s.Unreadable, s.Unlisted)
	}
	for _, p := range []string{"a.txt", "z.txt", mid} {
		if _, ok := s.Entries[p]; !ok {
			t.Errorf("%s is not listed", p)
		}
	}
	if len(s.Entries) != 3 {
		t.Errorf("listed %d entries", len(s.Entries))
	}
	bottom := deep + "bottom.txt"
	before := &Snapshot{Entries: map[string]Entry{bottom: {Size: 4}}}
	for k, v := range s.Entries {
		before.Entries[k] = v
	}
	changes, err := Diff(before, s, ws)
	if err != nil || len(changes) != 0 {
		t.Errorf("Diff: %v, %v", changes, err)
	}
	if err := CopyTree(ws, t.TempDir(), KeepOwner); !errors.Is(err, ErrTooLarge) {
		t.Errorf("CopyTree: %v", err)
	}
}

// A directory the walk has no permission for is named as unlisted, and the
// walk goes on. Root reads anything, so as root the walk is made as nobody.
func TestTakeGoesPastUnreadableDir(t *testing.T) {
	asNobody := os.Geteuid() == 0
	if asNobody && runtime.GOOS != "linux" {
		t.Skip("as root, this needs Linux's per-thread file-system identity")
	}
	ws := t.TempDir()
	// Nobody must reach the workspace to be refused inside it.
	must(t, os.Chmod(filepath.Dir(ws), 0o755))
	must(t, os.Chmod(ws, 0o755))
	mustWrite(t, filepath.Join(ws, "a.txt"), "a", 0o644)
	mustWrite(t, filepath.Join(ws, "locked/secret.txt"), "s", 0o644)
	mustWrite(t, filepath.Join(ws, "z/z.txt"), "z", 0o644)
	locked := filepath.Join(ws, "locked")
	must(t, os.Chmod(locked, 0))
	t.Cleanup(func() { os.Chmod(locked, 0o755) })

	var s *Snapshot
	var err error
	take := func() error {
		s, err = Take(ws)
		return nil
	}
	if asNobody {
		must(t, asCreator(Owner{65534, 65534}, func(as func(func() error) error) error { return as(take) }))
	} else {
		_ = take()
	}
	if err != nil {
		t.Fatal(err)
	}
	if s.Unreadable != 1 || !slices.Equal(s.Unlisted, []string{"locked"}) {
		t.Fatalf("unreadable %d, unlisted %v", s.Unreadable, s.Unlisted)
	}
	if _, ok := s.Entries["z/z.txt"]; !ok || len(s.Entries) != 2 {
		t.Errorf("listed %v", s.Entries)
	}
	if w := strings.Join(s.Warnings(), " "); !strings.Contains(w, "locked") {
		t.Errorf("warnings: %q", w)
	}
}

// A program swaps a directory of its workspace for a link to outside and
// back while Take, Diff, CopyTree and Apply run: none of them ever reaches
// outside.
func TestTreeSwapRace(t *testing.T) {
	bothResolvers(t, func(t *testing.T) {
		base, ws, outside, _ := setup(t)
		_, check := guard(t, outside)
		d := filepath.Join(ws, "d")
		mustWrite(t, filepath.Join(ws, "d/marker"), "inside", 0o644)
		from := filepath.Join(base, "from")
		mustWrite(t, filepath.Join(from, "d/marker"), "program", 0o644)
		copies := filepath.Join(base, "copies")
		must(t, os.Mkdir(copies, 0o755))

		stop := swapLinkAndDir(d, outside, func() {
			os.WriteFile(filepath.Join(d, "marker"), []byte("inside"), 0o644)
		})

		deadline := time.Now().Add(800 * time.Millisecond) // twice, within 2s
		empty := &Snapshot{Entries: map[string]Entry{}}
		markerInode := inodeOf(t, filepath.Join(outside, "marker"))
		var i int
		for i = 0; i < 500 && time.Now().Before(deadline); i++ {
			if s, err := Take(ws); err == nil {
				if e, ok := s.Entries["d/marker"]; ok && e.Inode == markerInode {
					t.Errorf("Take listed the marker outside")
				}
				_, _ = Diff(empty, s, ws)
			}
			dst, err := os.MkdirTemp(copies, "")
			must(t, err)
			_ = CopyTree(ws, dst, KeepOwner)
			must(t, os.RemoveAll(dst))
			_ = Apply([]Change{{Path: "d/marker", Kind: "modified"}}, from, ws, KeepOwner)
			_ = Apply([]Change{{Path: "d/marker", Kind: "deleted"}}, from, ws, KeepOwner)
		}
		stop()
		check()
		t.Logf("%d rounds", i)
	})
}

func inodeOf(t *testing.T, p string) uint64 {
	t.Helper()
	var st unix.Stat_t
	must(t, unix.Lstat(p, &st))
	return uint64(st.Ino)
}
