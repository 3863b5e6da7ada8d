package workspace

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// setup makes base/ws (the workspace, opened as r) and base/outside, a
// directory attacks aim at. Both belong to the test.
func setup(t *testing.T) (base, ws, outside string, r *Root) {
	t.Helper()
	base = t.TempDir()
	ws = filepath.Join(base, "ws")
	outside = filepath.Join(base, "outside")
	for _, d := range []string{ws, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r, err := Open(ws)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return base, ws, outside, r
}

// bothResolvers runs fn with openat2 and with the component-by-component
// fallback walk.
func bothResolvers(t *testing.T, fn func(t *testing.T)) {
	t.Run("openat2", func(t *testing.T) {
		if !haveOpenat2() {
			t.Skip("openat2 not available")
		}
		fn(t)
	})
	t.Run("walk", func(t *testing.T) {
		forceWalk = true
		defer func() { forceWalk = false }()
		fn(t)
	})
}

// snapshot maps each path under dir to its content (files), "dir", or
// "-> target" (links).
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{".": "dir"}
	var walk func(rel string)
	walk = func(rel string) {
		entries, err := os.ReadDir(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			p := filepath.Join(rel, e.Name())
			full := filepath.Join(dir, p)
			switch {
			case e.Type()&fs.ModeSymlink != 0:
				target, err := os.Readlink(full)
				if err != nil {
					t.Fatal(err)
				}
				m[p] = "-> " + target
			case e.IsDir():
				m[p] = "dir"
				walk(p)
			case e.Type().IsRegular():
				b, err := os.ReadFile(full)
				if err != nil {
					t.Fatal(err)
				}
				m[p] = string(b)
			default:
				m[p] = "other"
			}
		}
	}
	walk("")
	return m
}

func mustWrite(t *testing.T, p, content string, perm fs.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, perm); err != nil {
		t.Fatal(err)
	}
}

func mustSymlink(t *testing.T, target, p string) {
	t.Helper()
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}

func readAll(t *testing.T, r *Root, rel string) string {
	t.Helper()
	f, _, err := r.Open(rel)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// noTempFiles fails if a temporary file of this package is left in ws.
func noTempFiles(t *testing.T, ws string) {
	t.Helper()
	for p := range snapshot(t, ws) {
		if strings.HasPrefix(filepath.Base(p), tempPrefix) {
			t.Errorf("temporary file left: %s", p)
		}
	}
}

func TestCleanPath(t *testing.T) {
	long := strings.Repeat("a/", maxPath/2) + "a"
	tests := []struct {
		in, want string
		bad      bool
	}{
		{in: "a", want: "a"},
		{in: "a/./b/", want: "a/b"},
		{in: "./a//b", want: "a/b"},
		{in: "a/b/c.txt", want: "a/b/c.txt"},
		{in: "...", want: "..."},
		{in: "a..b/..c", want: "a..b/..c"},
		{in: `a\b`, want: `a\b`},
		{in: "", bad: true},
		{in: ".", bad: true},
		{in: "./", bad: true},
		{in: "/", bad: true},
		{in: "/etc/passwd", bad: true},
		{in: "..", bad: true},
		{in: "../x", bad: true},
		{in: "a/../b", bad: true},
		{in: "a/..", bad: true},
		{in: "a\x00b", bad: true},
		{in: long, bad: true},
		{in: long[:maxPath], want: long[:maxPath-1]},
	}
	for _, tt := range tests {
		got, err := CleanPath(tt.in)
		if tt.bad {
			if !errors.Is(err, ErrBadPath) {
				t.Errorf("CleanPath(%.20q) = %q, %v; want ErrBadPath", tt.in, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("CleanPath(%.20q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestWriteReadRoundTrip(t *testing.T) {
	bothResolvers(t, func(t *testing.T) {
		_, ws, _, r := setup(t)
		n, err := r.WriteFile("a.txt", strings.NewReader("hello"), 0o640, 0)
		if err != nil || n != 5 {
			t.Fatalf("WriteFile = %d, %v", n, err)
		}
		f, fi, err := r.Open("a.txt")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(f)
		f.Close()
		if string(b) != "hello" || fi.Size() != 5 || fi.Mode() != 0o640 || fi.Name() != "a.txt" {
			t.Errorf("read %q, info %v %d %v", b, fi.Name(), fi.Size(), fi.Mode())
		}
		// Replacing keeps readers whole and takes the new mode.
		if _, err := r.WriteFile("a.txt", strings.NewReader("bye"), 0o600, 0); err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, r, "a.txt"); got != "bye" {
			t.Errorf("after replace: %q", got)
		}
		if fi, _ := os.Stat(filepath.Join(ws, "a.txt")); fi.Mode() != 0o600 {
			t.Errorf("mode %v", fi.Mode())
		}
		noTempFiles(t, ws)
	})
}

func TestWriteFileMakesDirs(t *testing.T) {
	bothResolvers(t, func(t *testing.T) {
		_, ws, _, r := setup(t)
		if _, err := r.WriteFile("x/y/z.txt", strings.NewReader("z"), 0o644, 0); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Lstat(filepath.Join(ws, "x/y")); err != nil || !fi.IsDir() {
			t.Fatalf("x/y: %v %v", fi, err)
		}
		if got := readAll(t, r, "x/y/z.txt"); got != "z" {
			t.Errorf("got %q", got)
		}
		// A file where a directory is needed.
		if _, err := r.WriteFile("x/y/z.txt/w", strings.NewReader("w"), 0o644, 0); !errors.Is(err, ErrNotRegular) {
			t.Errorf("through a file: %v, want ErrNotRegular", err)
		}
		// A directory where a file is needed.
		if _, err := r.WriteFile("x/y", strings.NewReader("w"), 0o644, 0); !errors.Is(err, ErrNotRegular) {
			t.Errorf("over a dir: %v, want ErrNotRegular", err)
		}
		noTempFiles(t, ws)
	})
}

func TestWriteFileThroughSymlinkedDir(t *testing.T) {
	bothResolvers(t, func(t *testing.T) {
		_, ws, outside, r := setup(t)
		mustSymlink(t, outside, filepath.Join(ws, "link"))
		mustWrite(t, filepath.Join(ws, "d/keep"), "k", 0o644)
		mustSymlink(t, outside, filepath.Join(ws, "d/link"))
		for _, p := range []string{"link/evil", "link/sub/evil", "d/link/evil"} {
			if _, err := r.WriteFile(p, strings.NewReader("evil"), 0o644, 0); !errors.Is(err, ErrSymlink) {
				t.Errorf("WriteFile(%q) = %v, want ErrSymlink", p, err)
			}
		}
		if got := snapshot(t, outside); len(got) != 1 {
			t.Errorf("outside changed: %v", got)
		}
	})
}

// WriteFile on a path that is a symbolic link replaces the link with a
// regular file; the link's target is untouched.
func TestWriteFileOverSymlink(t *testing.T) {
	bothResolvers(t, func(t *testing.T) {
		_, ws, outside, r := setup(t)
		secret := filepath.Join(outside, "secret")
		mustWrite(t, secret, "secret", 0o644)
		mustSymlink(t, secret, filepath.Join(ws, "s"))
		if _, err := r.WriteFile("s", strings.NewReader("new"), 0o644, 0); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(secret); string(b) != "secret" {
			t.Errorf("outside file changed: %q", b)
		}
		fi, err := os.Lstat(filepath.Join(ws, "s"))
		if err != nil || !fi.Mode().IsRegular() {
			t.Fatalf("s: %v %v", fi, err)
		}
		if got := readAll(t, r, "s"); got != "new" {
			t.Errorf("s = %q", got)
		}
	})
}

func TestOpen(t *testing.T) {
	bothResolvers(t, func(t *testing.T) {
		_, ws, outside, r := setup(t)
		mustWrite(t, filepath.Join(outside, "secret"), "secret", 0o644)
		mustWrite(t, filepath.Join(ws, "sub/f"), "f", 0o644)
		mustSymlink(t, "sub/f", filepath.Join(ws, "lf"))
		mustSymlink(t, filepath.Join(outside, "secret"), filepath.Join(ws, "lout"))
		mustSymlink(t, outside, filepath.Join(ws, "ldir"))
		if err := unix.Mkfifo(filepath.Join(ws, "fifo"), 0o644); err != nil {
			t.Fatal(err)
		}

		for _, tt := range []struct {
			rel  string
			want error
		}{
			{"lf", ErrSymlink},
			{"lout", ErrSymlink},
			{"ldir", ErrSymlink},
			{"ldir/secret", ErrSymlink},
			{"../x", ErrBadPath},
			{"sub/../../x", ErrBadPath},
			{"/etc/passwd", ErrBadPath},
			{"missing", ErrNotFound},
			{"sub/f/x", ErrNotRegular},
			{"fifo", ErrNotRegular},
		} {
			done := make(chan error, 1)
			go func() {
				f, _, err := r.Open(tt.rel)
				if err == nil {
					f.Close()
				}
				done <- err
			}()
			select {
			case err := <-done:
				if !errors.Is(err, tt.want) {
					t.Errorf("Open(%q) = %v, want %v", tt.rel, err, tt.want)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("Open(%q) blocked", tt.rel)
			}
		}
		if _, _, err := r.Open("missing"); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("missing: %v is not fs.ErrNotExist", err)
		}

		// Directories, the root included, open for reading.
		for _, rel := range []string{"", "sub"} {
			f, fi, err := r.Open(rel)
			if err != nil {
				t.Fatalf("Open(%q): %v", rel, err)
			}
			names, err := f.Readdirnames(-1)
			f.Close()
			if err != nil || !fi.IsDir() || len(names) == 0 {
				t.Errorf("Open(%q): %v %v %v", rel, names, fi.IsDir(), err)
			}
		}
	})
}

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func TestList(t *testing.T) {
	bothResolvers(t, func(t *testing.T) {
		_, ws, outside, r := setup(t)
		mustWrite(t, filepath.Join(outside, "secret"), "secret", 0o644)
		mustWrite(t, filepath.Join(ws, "a.txt"), "aaa", 0o644)
		mustWrite(t, filepath.Join(ws, "sub/b.txt"), "bb", 0o600)
		mustSymlink(t, outside, filepath.Join(ws, "ext"))
		mustSymlink(t, "a.txt", filepath.Join(ws, "sub/la"))
		if err := unix.Mkfifo(filepath.Join(ws, "fifo"), 0o644); err != nil {
			t.Fatal(err)
		}

		got, err := r.List("", 0)
		if err != nil {
			t.Fatal(err)
		}
		want := []ListEntry{
			{Path: "a.txt", Type: "file", Size: 3, Mode: 0o644, SHA256: sum("aaa")},
			{Path: "ext", Type: "symlink", Mode: fs.ModeSymlink | 0o777, Target: outside},
			{Path: "fifo", Type: "other", Mode: fs.ModeNamedPipe | 0o644},
			{Path: "sub", Type: "dir", Mode: fs.ModeDir | 0o755},
			{Path: "sub/b.txt", Type: "file", Size: 2, Mode: 0o600, SHA256: sum("bb")},
			{Path: "sub/la", Type: "symlink", Mode: fs.ModeSymlink | 0o777, Target: "a.txt"},
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("List:\n got %+v\nwant %+v", got, want)
		}

		got, err = r.List("sub", 0)
		if err != nil || !reflect.DeepEqual(got, want[4:]) {
			t.Errorf("List(sub) = %+v, %v", got, err)
		}
		got, err = r.List("a.txt", 0)
		if err != nil || !reflect.DeepEqual(got, want[:1]) {
			t.Errorf("List(a.txt) = %+v, %v", got, err)
		}
		if _, err := r.List("ext/", 0); err != nil {
			t.Errorf("List(ext) = %v; a link lists as itself", err)
		}
		if _, err := r.List("ext/secret", 0); !errors.Is(err, ErrSymlink) {
			t.Errorf("List(ext/secret) = %v, want ErrSymlink", err)
		}
		if _, err := r.List("", 5); !errors.Is(err, ErrTooLarge) {
			t.Errorf("List with 5 max = %v, want ErrTooLarge", err)
		}
		if _, err := r.List("", 6); err != nil {
			t.Errorf("List with 6 max = %v", err)
		}
	})
}

func TestUsage(t *testing.T) {
	bothResolvers(t, func(t *testing.T) {
		_, ws, outside, r := setup(t)
		mustWrite(t, filepath.Join(outside, "big"), strings.Repeat("x", 1000), 0o644)
		mustWrite(t, filepath.Join(ws, "a"), strings.Repeat("a", 10), 0o644)
		mustWrite(t, filepath.Join(ws, "d/b"), strings.Repeat("b", 20), 0o644)
		if err := os.Link(filepath.Join(ws, "d/b"), filepath.Join(ws, "hard")); err != nil {
			t.Fatal(err)
		}
		mustSymlink(t, filepath.Join(outside, "big"), filepath.Join(ws, "lbig"))
		mustSymlink(t, outside, filepath.Join(ws, "ldir"))
		// Five inodes (a, d, d/b and its hard link once, two links; the
		// links' targets outside not followed), each of one block at most.
		if n, err := r.Usage(); err != nil || n != 5*InodeCost {
			t.Errorf("Usage = %d, %v; want %d", n, err, 5*InodeCost)
		}
	})
}

func TestWriteFileQuota(t *testing.T) {
	_, ws, _, r := setup(t)
	const quota = 16 << 10 // four blocks
	if _, err := r.WriteFile("a", strings.NewReader(strings.Repeat("a", 9000)), 0o644, quota); err != nil {
		t.Fatal(err) // three blocks
	}
	_, err := r.WriteFile("b", strings.NewReader(strings.Repeat("b", 5000)), 0o644, quota)
	if !errors.Is(err, ErrQuota) {
		t.Fatalf("over quota: %v, want ErrQuota", err)
	}
	if _, err := os.Lstat(filepath.Join(ws, "b")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("b exists after ErrQuota: %v", err)
	}
	// Up to the quota is fine.
	if _, err := r.WriteFile("b", strings.NewReader(strings.Repeat("b", 4000)), 0o644, quota); err != nil {
		t.Errorf("up to the quota: %v", err)
	}
	// Replacing a file frees its blocks.
	if _, err := r.WriteFile("a", strings.NewReader(strings.Repeat("a", 9000)), 0o644, quota); err != nil {
		t.Errorf("replacing within quota: %v", err)
	}
	// An empty file costs a block too: none is left.
	if _, err := r.WriteFile("empty", strings.NewReader(""), 0o644, quota); !errors.Is(err, ErrQuota) {
		t.Errorf("an empty file past the quota: %v, want ErrQuota", err)
	}
	// Stops reading soon after the limit: an endless source still ends.
	if _, err := r.WriteFile("c", neverEnding{}, 0o644, quota); !errors.Is(err, ErrQuota) {
		t.Errorf("endless source: %v, want ErrQuota", err)
	}
	noTempFiles(t, ws)
	if n, _ := r.Usage(); n > quota {
		t.Errorf("Usage = %d, over the quota %d", n, quota)
	}
}

type neverEnding struct{}

func (neverEnding) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

// tarEntry describes one entry for makeTar; body is a file's content.
type tarEntry struct {
	name     string
	typ      byte
	body     string
	linkname string
	mode     int64
}

func makeTar(t testing.TB, entries ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.linkname, Mode: e.mode, Size: int64(len(e.body))}
		if hdr.Mode == 0 {
			hdr.Mode = 0o644
		}
		if e.typ != tar.TypeReg {
			hdr.Size = 0
		}
		if e.typ == tar.TypeChar {
			hdr.Devmajor, hdr.Devminor = 1, 3
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if hdr.Size > 0 {
			if _, err := io.WriteString(tw, e.body); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func file(name, body string) tarEntry { return tarEntry{name: name, typ: tar.TypeReg, body: body} }
func dir(name string) tarEntry        { return tarEntry{name: name, typ: tar.TypeDir, mode: 0o755} }
func link(name, target string) tarEntry {
	return tarEntry{name: name, typ: tar.TypeSymlink, linkname: target}
}

func TestExtractTarAttacks(t *testing.T) {
	// The attacks aim at the test's own directories (base, outside) rather
	// than /etc or /tmp, so that a success would be harmless.
	bothResolvers(t, func(t *testing.T) {
		probe := t.TempDir()
		absEvil := filepath.Join(probe, "abs-evil")
		outsideOf := func(base string) string { return filepath.Join(base, "outside") }
		tests := []struct {
			name     string
			entries  func(base string) []tarEntry
			pre      func(t *testing.T, ws, outside string)
			max      int
			wantSyml bool
		}{
			{name: "absolute", entries: func(string) []tarEntry { return []tarEntry{file(absEvil, "evil")} }},
			{name: "absolute-base", entries: func(base string) []tarEntry { return []tarEntry{file(filepath.Join(base, "evil"), "evil")} }},
			{name: "dotdot", entries: func(string) []tarEntry { return []tarEntry{file("../evil", "evil")} }},
			{name: "inner-dotdot", entries: func(string) []tarEntry { return []tarEntry{file("a/../../evil", "evil")} }},
			{name: "dotdot-dir", entries: func(string) []tarEntry { return []tarEntry{dir("../evildir")} }},
			{name: "abs-symlink-then-file", entries: func(base string) []tarEntry {
				return []tarEntry{link("l", outsideOf(base)), file("l/passwd", "evil")}
			}},
			{name: "climbing-symlink", entries: func(string) []tarEntry { return []tarEntry{link("l", "../..")} }},
			{name: "climbing-symlink-deep", entries: func(string) []tarEntry {
				return []tarEntry{dir("a"), link("a/l", "../../outside"), file("a/l/passwd", "evil")}
			}},
			{name: "inner-symlink-then-file", wantSyml: true, entries: func(string) []tarEntry {
				return []tarEntry{dir("sub"), link("l", "sub"), file("l/x", "evil")}
			}},
			{name: "existing-symlink-parent", wantSyml: true,
				pre:     func(t *testing.T, ws, outside string) { mustSymlink(t, outside, filepath.Join(ws, "pl")) },
				entries: func(string) []tarEntry { return []tarEntry{file("pl/passwd", "evil")} }},
			{name: "existing-symlink-dir-entry", wantSyml: true,
				pre:     func(t *testing.T, ws, outside string) { mustSymlink(t, outside, filepath.Join(ws, "pl")) },
				entries: func(string) []tarEntry { return []tarEntry{dir("pl/newdir")} }},
			{name: "hardlink-outside", entries: func(base string) []tarEntry {
				return []tarEntry{{name: "hl", typ: tar.TypeLink, linkname: filepath.Join(outsideOf(base), "secret")}}
			}},
			{name: "hardlink-inside", entries: func(string) []tarEntry {
				return []tarEntry{file("a", "a"), {name: "hl", typ: tar.TypeLink, linkname: "a"}}
			}},
			{name: "char-device", entries: func(string) []tarEntry { return []tarEntry{{name: "null", typ: tar.TypeChar}} }},
			{name: "block-device", entries: func(string) []tarEntry { return []tarEntry{{name: "sda", typ: tar.TypeBlock}} }},
			{name: "fifo", entries: func(string) []tarEntry { return []tarEntry{{name: "p", typ: tar.TypeFifo}} }},
			{name: "too-many", max: 3, entries: func(string) []tarEntry {
				return []tarEntry{file("1", "1"), file("2", "2"), file("3", "3"), file("4", "4"), file("5", "5")}
			}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				base, ws, outside, r := setup(t)
				mustWrite(t, filepath.Join(outside, "secret"), "secret", 0o644)
				if tt.pre != nil {
					tt.pre(t, ws, outside)
				}
				beforeOut := snapshot(t, outside)
				_, _, err := r.ExtractTar("", bytes.NewReader(makeTar(t, tt.entries(base)...)), 0, tt.max)
				if tt.max > 0 {
					if !errors.Is(err, ErrTooManyEntries) || !errors.Is(err, ErrQuota) {
						t.Errorf("ExtractTar = %v, want ErrTooManyEntries", err)
					}
				} else if !errors.Is(err, ErrUnsafeArchive) {
					t.Errorf("ExtractTar = %v, want ErrUnsafeArchive", err)
				}
				if tt.wantSyml && !errors.Is(err, ErrSymlink) {
					t.Errorf("ExtractTar = %v, want ErrSymlink too", err)
				}
				if got := snapshot(t, outside); !reflect.DeepEqual(got, beforeOut) {
					t.Errorf("outside changed: %v", got)
				}
				names, _ := os.ReadDir(base)
				if len(names) != 2 {
					t.Errorf("base has %v, want ws and outside only", names)
				}
				if _, err := os.Lstat(absEvil); err == nil {
					t.Errorf("%s created", absEvil)
				}
				for p, v := range snapshot(t, ws) {
					if v == "evil" {
						t.Errorf("evil content at %s", p)
					}
				}
				noTempFiles(t, ws)
			})
		}
	})
}

func TestExtractTarQuota(t *testing.T) {
	_, ws, _, r := setup(t)
	big := strings.Repeat("x", 6000)
	// Each 6,000-byte file costs two blocks: 8 KiB; two do not fit 12 KiB.
	_, _, err := r.ExtractTar("", bytes.NewReader(makeTar(t, file("a", big), file("b", big))), 12<<10, 0)
	if !errors.Is(err, ErrQuota) {
		t.Fatalf("ExtractTar = %v, want ErrQuota", err)
	}
	noTempFiles(t, ws)
	if _, err := os.Lstat(filepath.Join(ws, "b")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("b exists: %v", err)
	}
	if n, _ := r.Usage(); n < 6000 || n > 12<<10 {
		t.Errorf("Usage = %d, want the blocks of one file", n)
	}
	// Extracting the same file again replaces it, which frees its size.
	if _, _, err := r.ExtractTar("", bytes.NewReader(makeTar(t, file("a", big))), 12<<10, 0); err != nil {
		t.Errorf("re-extract: %v", err)
	}
	// Already over quota.
	if _, _, err := r.ExtractTar("", bytes.NewReader(makeTar(t, dir("d"))), 500, 0); !errors.Is(err, ErrQuota) {
		t.Errorf("over quota up front: %v", err)
	}
}

// Entries with no content cost their inodes: a small tar of many empty
// directories is charged what it spends on the disk, and refused past the
// quota, where counting content alone would have let it through.
func TestExtractTarChargesInodes(t *testing.T) {
	_, ws, _, r := setup(t)
	var entries []tarEntry
	for i := range 2000 {
		entries = append(entries, dir(fmt.Sprintf("d%04d", i)), file(fmt.Sprintf("d%04d/empty", i), ""))
	}
	archive := makeTar(t, entries...)
	const quota = 1 << 20 // 256 inodes' worth
	_, _, err := r.ExtractTar("", bytes.NewReader(archive), quota, 0)
	if !errors.Is(err, ErrQuota) {
		t.Fatalf("a tar of %d bytes holding 4000 empty entries: %v, want ErrQuota", len(archive), err)
	}
	n, err := r.Usage()
	if err != nil || n > quota+2*InodeCost {
		t.Fatalf("the workspace costs %d bytes against a quota of %d: %v", n, quota, err)
	}
	noTempFiles(t, ws)
}

// The directories an entry's name makes on its way cost their inodes and
// count as entries too: a few entries whose names are many directories
// deep are charged what they spend. A name nested deeper than a listing
// descends is refused, so that the quota can see all it charges.
func TestExtractTarChargesImplicitDirs(t *testing.T) {
	deep := func(top string, n int) string { return top + "/" + strings.Repeat("a/", n-1) + "f" }
	_, ws, _, r := setup(t)
	const quota = 1 << 20 // 256 inodes' worth
	var entries []tarEntry
	for i := range 10 {
		entries = append(entries, file(deep(fmt.Sprint(i), 200), ""))
	}
	_, _, err := r.ExtractTar("", bytes.NewReader(makeTar(t, entries...)), quota, 0)
	if !errors.Is(err, ErrQuota) {
		t.Fatalf("10 files 200 directories deep: %v, want ErrQuota", err)
	}
	dirs := 0
	filepath.WalkDir(ws, func(string, fs.DirEntry, error) error { dirs++; return nil })
	if dirs > 2*201+1 { // the first entry, and the one that passed the quota
		t.Errorf("%d entries made under a quota of 256 inodes", dirs)
	}
	n, err := r.Usage()
	if err != nil || n > quota+200*InodeCost {
		t.Errorf("the workspace costs %d bytes against a quota of %d: %v", n, quota, err)
	}

	// The entry limit counts the directories made.
	_, _, _, r2 := setup(t)
	_, _, err = r2.ExtractTar("", bytes.NewReader(makeTar(t, file(deep("x", 60), ""), file(deep("y", 60), ""))), 0, 100)
	if !errors.Is(err, ErrTooManyEntries) {
		t.Errorf("two entries making 120 directories, at most 100 entries: %v, want ErrTooManyEntries", err)
	}

	// Deeper than a listing descends: refused, nothing made.
	_, ws3, _, r3 := setup(t)
	_, _, err = r3.ExtractTar("", bytes.NewReader(makeTar(t, file(deep("z", maxDepth), "x"))), 0, 0)
	if !errors.Is(err, ErrUnsafeArchive) {
		t.Errorf("a name %d directories deep: %v, want ErrUnsafeArchive", maxDepth, err)
	}
	if entries, _ := os.ReadDir(ws3); len(entries) != 0 {
		t.Errorf("made %v", entries)
	}
	if _, err := r3.WriteFile(deep("w", maxDepth), strings.NewReader("x"), 0o644, 0); !errors.Is(err, ErrBadPath) {
		t.Errorf("writing a file %d directories deep: %v, want ErrBadPath", maxDepth, err)
	}
}

func TestExtractTarIntoDir(t *testing.T) {
	bothResolvers(t, func(t *testing.T) {
		_, ws, _, r := setup(t)
		tb := makeTar(t,
			tarEntry{name: "./", typ: tar.TypeDir, mode: 0o700},
			tarEntry{name: "./bin/", typ: tar.TypeDir, mode: 0o2755},
			tarEntry{name: "./bin/tool", typ: tar.TypeReg, body: "#!/bin/sh\n", mode: 0o4755},
			tarEntry{name: "ro/", typ: tar.TypeDir, mode: 0o555},
			file("ro/file", "in a read-only dir"),
			link("up", "../top.txt"),
		)
		n, written, err := r.ExtractTar("in/here", bytes.NewReader(tb), 0, 0)
		if err != nil || n != 6 || written != int64(len("#!/bin/sh\n")+len("in a read-only dir")) {
			t.Fatalf("ExtractTar = %d, %d, %v", n, written, err)
		}
		got, err := r.List("", 0)
		if err != nil {
			t.Fatal(err)
		}
		modes := map[string]fs.FileMode{}
		for _, e := range got {
			modes[e.Path] = e.Mode
		}
		want := map[string]fs.FileMode{
			"in":               fs.ModeDir | 0o755,
			"in/here":          fs.ModeDir | 0o755, // "./" does not change rel
			"in/here/bin":      fs.ModeDir | 0o755, // setgid dropped
			"in/here/bin/tool": 0o755,              // setuid dropped
			"in/here/ro":       fs.ModeDir | 0o555,
			"in/here/ro/file":  0o644,
			"in/here/up":       fs.ModeSymlink | 0o777,
		}
		if !reflect.DeepEqual(modes, want) {
			t.Errorf("modes:\n got %v\nwant %v", modes, want)
		}
		os.Chmod(filepath.Join(ws, "in/here/ro"), 0o755) // let t.TempDir clean up
	})
}

func TestExtractTarGzip(t *testing.T) {
	_, _, _, r := setup(t)
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(makeTar(t, dir("d"), file("d/f.txt", "zipped")))
	zw.Close()
	if _, _, err := r.ExtractTar("", &buf, 0, 0); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, r, "d/f.txt"); got != "zipped" {
		t.Errorf("got %q", got)
	}
}

func TestTarRoundTrip(t *testing.T) {
	bothResolvers(t, func(t *testing.T) {
		_, wsA, _, a := setup(t)
		_, _, _, b := setup(t)
		random := make([]byte, 200<<10)
		rand.Read(random)
		mustWrite(t, filepath.Join(wsA, "README.md"), "hello\n", 0o644)
		mustWrite(t, filepath.Join(wsA, "bin/run.sh"), "#!/bin/sh\necho hi\n", 0o755)
		mustWrite(t, filepath.Join(wsA, "src/deep/er/file.txt"), "deep", 0o600)
		mustWrite(t, filepath.Join(wsA, "big.bin"), string(random), 0o644)
		mustWrite(t, filepath.Join(wsA, "empty.txt"), "", 0o644)
		if err := os.Mkdir(filepath.Join(wsA, "empty"), 0o700); err != nil {
			t.Fatal(err)
		}
		mustSymlink(t, "deep/er/file.txt", filepath.Join(wsA, "src/link"))
		mustSymlink(t, "../empty", filepath.Join(wsA, "src/up"))
		if err := os.Chmod(filepath.Join(wsA, "src"), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mkfifo(filepath.Join(wsA, "pipe"), 0o644); err != nil {
			t.Fatal(err)
		}

		var buf bytes.Buffer
		if err := a.WriteTar("", &buf); err != nil {
			t.Fatal(err)
		}
		if _, _, err := b.ExtractTar("", &buf, 0, 0); err != nil {
			t.Fatal(err)
		}
		listA, err := a.List("", 0)
		if err != nil {
			t.Fatal(err)
		}
		var want []ListEntry
		for _, e := range listA {
			if e.Type != "other" { // the fifo is not archived
				want = append(want, e)
			}
		}
		got, err := b.List("", 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(want) != 12 || !reflect.DeepEqual(got, want) {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, want)
		}
	})
}

func TestWriteTarOne(t *testing.T) {
	_, ws, outside, r := setup(t)
	mustWrite(t, filepath.Join(ws, "sub/f.txt"), "one", 0o644)
	mustWrite(t, filepath.Join(ws, "sub/g.txt"), "two", 0o644)
	mustSymlink(t, outside, filepath.Join(ws, "lout"))
	mustSymlink(t, "sub", filepath.Join(ws, "lsub"))

	names := func(rel string) ([]string, error) {
		var buf bytes.Buffer
		if err := r.WriteTar(rel, &buf); err != nil {
			return nil, err
		}
		var out []string
		tr := tar.NewReader(&buf)
		for {
			hdr, err := tr.Next()
			if err == io.EOF {
				return out, nil
			}
			if err != nil {
				return nil, err
			}
			out = append(out, hdr.Name)
		}
	}
	if got, err := names("sub/f.txt"); err != nil || !reflect.DeepEqual(got, []string{"f.txt"}) {
		t.Errorf("file: %v %v", got, err)
	}
	if got, err := names("sub"); err != nil || !reflect.DeepEqual(got, []string{"f.txt", "g.txt"}) {
		t.Errorf("dir: %v %v", got, err)
	}
	got, err := names("")
	sort.Strings(got)
	if err != nil || !reflect.DeepEqual(got, []string{"lout", "lsub", "sub/", "sub/f.txt", "sub/g.txt"}) {
		t.Errorf("root: %v %v", got, err)
	}
	for _, rel := range []string{"lout", "lsub", "lsub/f.txt"} {
		if _, err := names(rel); !errors.Is(err, ErrSymlink) {
			t.Errorf("WriteTar(%q) = %v, want ErrSymlink", rel, err)
		}
	}
}

// TestSymlinkSwapRace flips a path component between a directory and a
// link to a directory outside while WriteFile and Open use a path through
// it. The outside directory must never change, and no read may return its
// content.
// swapLinkAndDir keeps turning d into a link to outside and back into a
// directory (then calling refill, when given) until the returned stop is
// called, which waits for it to end.
func swapLinkAndDir(d, outside string, refill func()) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			os.RemoveAll(d) // removes a link itself, never its target
			os.Symlink(outside, d)
			os.Remove(d)
			os.Mkdir(d, 0o755)
			if refill != nil {
				refill()
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}

func TestSymlinkSwapRace(t *testing.T) {
	bothResolvers(t, func(t *testing.T) {
		_, ws, outside, r := setup(t)
		mustWrite(t, filepath.Join(outside, "f"), "OUTSIDE", 0o644)
		before := snapshot(t, outside)
		d := filepath.Join(ws, "d")

		stop := swapLinkAndDir(d, outside, nil)

		deadline := time.Now().Add(800 * time.Millisecond) // twice, within 2s
		var writes, reads, i int
		for i = 0; i < 2000 && time.Now().Before(deadline); i++ {
			if _, err := r.WriteFile("d/f", strings.NewReader("inside"), 0o644, 0); err == nil {
				writes++
			}
			f, _, err := r.Open("d/f")
			if err != nil {
				continue
			}
			b, err := io.ReadAll(f)
			f.Close()
			if err == nil && string(b) != "inside" {
				t.Errorf("read %q through d/f", b)
			}
			reads++
		}
		stop()
		if got := snapshot(t, outside); !reflect.DeepEqual(got, before) {
			t.Errorf("outside changed: %v", got)
		}
		t.Logf("%d rounds: %d writes and %d reads succeeded", i, writes, reads)
	})
}

func TestClosed(t *testing.T) {
	_, _, _, r := setup(t)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.WriteFile("a", strings.NewReader("a"), 0o644, 0); !errors.Is(err, os.ErrClosed) {
		t.Errorf("WriteFile after Close: %v", err)
	}
	if _, _, err := r.Open(""); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Open after Close: %v", err)
	}
	if err := r.Close(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("second Close: %v", err)
	}
}

// Symlink makes a link beneath the root, whatever its target says, and
// never through a link on the way: a parent that is a link to outside is
// refused, and nothing is made there; what is at the name already stays.
func TestSymlink(t *testing.T) {
	bothResolvers(t, func(t *testing.T) {
		_, ws, outside, r := setup(t)
		if err := r.Symlink("/etc/passwd", "a/b/abs"); err != nil {
			t.Fatal(err)
		}
		if err := r.Symlink("../x", "a/rel"); err != nil {
			t.Fatal(err)
		}
		for name, want := range map[string]string{"a/b/abs": "/etc/passwd", "a/rel": "../x"} {
			if got, err := os.Readlink(filepath.Join(ws, name)); err != nil || got != want {
				t.Errorf("%s: %q %v, want a link to %q", name, got, err, want)
			}
		}
		mustSymlink(t, outside, filepath.Join(ws, "out"))
		if err := r.Symlink("x", "out/evil"); !errors.Is(err, ErrSymlink) {
			t.Errorf("Symlink through a link to outside: %v, want ErrSymlink", err)
		}
		mustWrite(t, filepath.Join(ws, "kept"), "k", 0o644)
		if err := r.Symlink("x", "kept"); !errors.Is(err, fs.ErrExist) {
			t.Errorf("Symlink over a file: %v, want fs.ErrExist", err)
		}
		for _, bad := range []string{"", "..", "../escape", "/abs"} {
			if err := r.Symlink("x", bad); !errors.Is(err, ErrBadPath) {
				t.Errorf("Symlink(%q): %v, want ErrBadPath", bad, err)
			}
		}
		if got := snapshot(t, outside); len(got) != 1 {
			t.Errorf("outside changed: %v", got)
		}
		if got := readAll(t, r, "kept"); got != "k" {
			t.Errorf("kept: %q", got)
		}
	})
}
