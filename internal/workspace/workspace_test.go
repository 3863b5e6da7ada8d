package workspace

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// A listing cut short at the entry limit deletes nothing: a file of the
// user's the walk did not reach is not taken for deleted, and copy-back
// leaves it where it is. The warnings say the list is incomplete.
func TestIncompleteListingDeletesNothing(t *testing.T) {
	defer func(n int) { maxEntries = n }(maxEntries)
	maxEntries = 50
	user, sandbox := t.TempDir(), t.TempDir()
	for _, dir := range []string{user, sandbox} {
		for i := range 40 {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("keep-%02d.txt", i)), []byte("the user's\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	before, err := Take(sandbox)
	if err != nil || before.Incomplete {
		t.Fatal(before.Incomplete, err)
	}
	// The program makes many files: the walk after it stops short of some
	// of the user's.
	if err := os.Mkdir(filepath.Join(sandbox, "a-many"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if err := os.WriteFile(filepath.Join(sandbox, "a-many", fmt.Sprint(i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	after, err := Take(sandbox)
	if err != nil || !after.Incomplete {
		t.Fatal(after.Incomplete, err)
	}
	changes, err := Diff(before, after, sandbox)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range changes {
		if c.Kind == "deleted" {
			t.Fatalf("an unlisted file was taken for deleted: %+v", c)
		}
	}
	if errs := Apply(changes, sandbox, user, KeepOwner); len(errs) > 0 {
		t.Fatal(errs)
	}
	for i := range 40 {
		if _, err := os.Stat(filepath.Join(user, fmt.Sprintf("keep-%02d.txt", i))); err != nil {
			t.Fatalf("the user's file was lost: %v", err)
		}
	}
	if w := strings.Join(after.Warnings(), " "); !strings.Contains(w, "only 50 were listed") {
		t.Fatalf("warnings: %q", w)
	}
}

// A tree nested past PATH_MAX cannot be listed by path: what lies past the
// limit is named in the warnings, not silently left out, and nothing there
// is taken for deleted.
func TestDeepTreeIsNamed(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "top.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// 30 levels of 200-character names: 6,000 bytes of path, made one
	// directory at a time relative to the last, as a program can.
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.Repeat("d", 200)
	for range 30 {
		if err := unix.Mkdirat(fd, name, 0o755); err != nil {
			t.Fatal(err)
		}
		next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
	}
	f, err := unix.Openat(fd, "deep.txt", unix.O_CREAT|unix.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(f)
	unix.Close(fd)
	t.Cleanup(func() { removeDeep(dir, name) })

	before, err := Take(dir)
	if err != nil {
		t.Fatal(err)
	}
	if before.Unreadable == 0 || len(before.Unlisted) == 0 || !strings.Contains(strings.Join(before.Warnings(), " "), "could not be read") {
		t.Fatalf("the deep tree is not named: %+v", before.Warnings())
	}
	if _, ok := before.Entries["top.txt"]; !ok {
		t.Fatal("the shallow file is not listed")
	}
	// Nothing past the limit is taken for deleted, even if the listing
	// before had it by some other way.
	unlisted := before.Unlisted[0] + "/deep.txt"
	fake := &Snapshot{Entries: map[string]Entry{"top.txt": before.Entries["top.txt"], unlisted: {}}}
	changes, err := Diff(fake, before, dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range changes {
		if c.Kind == "deleted" {
			t.Fatalf("a file past the limit was taken for deleted: %+v", c)
		}
	}
}

// removeDeep removes the chain TestDeepTreeIsNamed made, one level at a
// time from the bottom, relative to directory descriptors.
func removeDeep(dir, name string) {
	fds := []int{}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	for err == nil {
		fds = append(fds, fd)
		fd, err = unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	}
	last := fds[len(fds)-1]
	_ = unix.Unlinkat(last, "deep.txt", 0)
	for i := len(fds) - 1; i > 0; i-- {
		_ = unix.Unlinkat(fds[i-1], name, unix.AT_REMOVEDIR)
	}
	for _, f := range fds {
		unix.Close(f)
	}
}

// Each created or modified file carries the media type its content says,
// whatever its name: a PNG named .txt is a PNG, text named .png is text,
// an empty file has none, and a link and a deleted file have none.
func TestChangesSniffMIME(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("gone.txt", []byte("bye"))
	before, err := Take(dir)
	if err != nil {
		t.Fatal(err)
	}
	png := append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 600)...)
	write("plot.txt", png)
	write("notes.png", []byte("just words\n"))
	write("empty", nil)
	write("blob", []byte{0, 1, 2, 3, 0xff})
	write("pic.webp", []byte("RIFF\x10\x00\x00\x00WEBPVP8 "))
	if err := os.Symlink("plot.txt", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "gone.txt")); err != nil {
		t.Fatal(err)
	}
	changes, after, warnings := Changes(before, dir)
	if len(warnings) > 0 {
		t.Fatal(warnings)
	}
	if after == nil || len(after.Entries) == 0 {
		t.Fatalf("no snapshot after: %+v", after)
	}
	if again, _, _ := Changes(after, dir); len(again) != 0 {
		t.Errorf("changes since the snapshot after: %+v", again)
	}
	want := map[string]string{"plot.txt": "image/png", "notes.png": "text/plain; charset=utf-8", "empty": "",
		"blob": "application/octet-stream", "pic.webp": "image/webp", "link": "", "gone.txt": ""}
	if len(changes) != len(want) {
		t.Fatalf("changes: %+v", changes)
	}
	for _, c := range changes {
		if m, ok := want[c.Path]; !ok || c.MIME != m {
			t.Errorf("%s: mime %q, want %q", c.Path, c.MIME, m)
		}
	}
}

// A snapshot's cost is its files' blocks, at least one each, a block for
// each link and one for each directory holding any of them: what Usage
// would say of the same tree on a disk.
func TestSnapshotCost(t *testing.T) {
	s := &Snapshot{Entries: map[string]Entry{
		"a/b/one":   {Size: 1, Blocks: 4096},
		"a/b/two":   {Size: 4097, Blocks: 8192},
		"a/three":   {Size: 0},
		"link":      {Mode: fs.ModeSymlink, Size: 5},
		"top.txt":   {Size: 4096, Blocks: 4096},
		"c/d/e/f/g": {Size: 10, Blocks: 4096},
		// Mostly holes: copies keep them, so only its data costs.
		"sparse": {Size: 1 << 40, Blocks: 8192},
	}}
	files := int64(1+2+1+1+1+1+2) * InodeCost // one, two, three, link, top.txt, g, sparse
	dirs := int64(2+4) * InodeCost            // a, a/b; c, c/d, c/d/e, c/d/e/f
	if got := s.Cost(); got != files+dirs {
		t.Errorf("cost %d, want %d", got, files+dirs)
	}
}
