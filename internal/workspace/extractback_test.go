package workspace

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// TestExtractTarWithLeave: as a copy back, a hard link to a file extracted
// before comes back as a copy of it; what cannot come back (a hard link to
// nothing, to a directory, through a link or out of the workspace, a file past the quota, a
// fifo, a device) is left, each told to Leave, and the rest comes back;
// nothing outside the directory is read or written.
func TestExtractTarWithLeave(t *testing.T) {
	_, ws, outside, r := setup(t)
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	data := makeTar(t,
		file("a.txt", "hello"),
		tarEntry{name: "d/b.txt", typ: tar.TypeLink, linkname: "a.txt"},
		link("out", "d"),
		tarEntry{name: "via", typ: tar.TypeLink, linkname: "out/b.txt"},
		tarEntry{name: "up", typ: tar.TypeLink, linkname: "../outside/secret"},
		tarEntry{name: "abs", typ: tar.TypeLink, linkname: secret},
		tarEntry{name: "none", typ: tar.TypeLink, linkname: "missing"},
		tarEntry{name: "dir", typ: tar.TypeLink, linkname: "d"},
		file("big", strings.Repeat("x", 5000)),
		tarEntry{name: "fifo", typ: tar.TypeFifo},
		tarEntry{name: "null", typ: tar.TypeChar},
		file("z.txt", "z"),
	)
	var left []string
	var whys []string
	_, n, err := r.ExtractTarWith("", bytes.NewReader(data), ExtractOptions{Quota: 4096, Leave: func(name, why string) {
		left = append(left, name)
		whys = append(whys, why)
	}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"via", "up", "abs", "none", "dir", "big", "fifo", "null"}; !slices.Equal(left, want) {
		t.Errorf("left %q, want %q; why %q", left, want, whys)
	}
	if n != 11 {
		t.Errorf("%d bytes written, want 11", n)
	}
	for name, want := range map[string]string{"a.txt": "hello", "d/b.txt": "hello", "z.txt": "z"} {
		if b, err := os.ReadFile(filepath.Join(ws, name)); err != nil || string(b) != want {
			t.Errorf("%s = %q, %v", name, b, err)
		}
	}
	var a, b syscall.Stat_t
	syscall.Stat(filepath.Join(ws, "a.txt"), &a)
	syscall.Stat(filepath.Join(ws, "d/b.txt"), &b)
	if a.Ino == b.Ino || a.Nlink != 1 {
		t.Errorf("d/b.txt is not a copy of its own")
	}
	for _, name := range []string{"via", "up", "abs", "none", "dir", "big", "fifo", "null"} {
		if _, err := os.Lstat(filepath.Join(ws, name)); err == nil {
			t.Errorf("%s came back", name)
		}
	}
	if want := "it is 5000 bytes long, past the 4086 bytes left of the 4096-byte quota (holes, as truncate makes, count as the zeros an archive carries)"; whys[5] != want {
		t.Errorf("why big: %q", whys[5])
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 1 {
		t.Errorf("outside holds %v", entries)
	}
}

// TestExtractTarWithLeaveCopiesInQuota: copies of a hard link are charged
// to the quota, and one past it is left, the next that fits coming back;
// entries are not charged the block a disk would spend on each, which the
// tmpfs they come from does not count.
func TestExtractTarWithLeaveCopiesInQuota(t *testing.T) {
	_, ws, _, r := setup(t)
	entries := []tarEntry{file("a", strings.Repeat("a", 3000)), tarEntry{name: "b", typ: tar.TypeLink, linkname: "a"}, file("c", "c")}
	for i := range 100 {
		entries = append(entries, file("empty/"+strings.Repeat("e", i+1), ""))
	}
	var left []string
	got, _, err := r.ExtractTarWith("", bytes.NewReader(makeTar(t, entries...)), ExtractOptions{Quota: 4000, Leave: func(name, why string) { left = append(left, name) }})
	// The entry left is counted as one seen.
	if err != nil || !slices.Equal(left, []string{"b"}) || got != 103 {
		t.Fatalf("%d entries, left %q, %v", got, left, err)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "c")); err != nil || string(b) != "c" {
		t.Errorf("c = %q, %v", b, err)
	}
	// As an upload, the same archive is refused.
	_, _, _, r2 := setup(t)
	if _, _, err := r2.ExtractTar("", bytes.NewReader(makeTar(t, entries...)), 4000, 0); err == nil {
		t.Errorf("the upload was taken")
	}
}
