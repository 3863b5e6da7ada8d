package docker

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func tarOf(t testing.TB, entries ...tar.Header) []byte {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, h := range entries {
		h := h
		var body []byte
		if h.Typeflag == tar.TypeReg {
			body = bytes.Repeat([]byte("x"), int(h.Size))
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		tw.Write(body)
	}
	tw.Close()
	return b.Bytes()
}

// FuzzReadBack feeds the workspace's read-back any archive: whatever it
// holds, nothing lands outside the directory, and nothing in it is a
// device, a fifo or more bytes than the quota.
func FuzzReadBack(f *testing.F) {
	f.Add(tarOf(f, tar.Header{Typeflag: tar.TypeDir, Name: "workspace/", Mode: 0o755},
		tar.Header{Typeflag: tar.TypeReg, Name: "workspace/a.txt", Size: 3, Mode: 0o644},
		tar.Header{Typeflag: tar.TypeSymlink, Name: "workspace/link", Linkname: "/etc/passwd"}))
	f.Add(tarOf(f, tar.Header{Typeflag: tar.TypeDir, Name: "/", Mode: 0o755},
		tar.Header{Typeflag: tar.TypeReg, Name: "/b", Size: 2, Mode: 0o644}))
	f.Add(tarOf(f, tar.Header{Typeflag: tar.TypeReg, Name: "workspace/../../escape", Size: 1, Mode: 0o644}))
	f.Add(tarOf(f, tar.Header{Typeflag: tar.TypeSymlink, Name: "workspace/up", Linkname: ".."},
		tar.Header{Typeflag: tar.TypeReg, Name: "workspace/up/escape", Size: 1, Mode: 0o644}))
	f.Add(tarOf(f, tar.Header{Typeflag: tar.TypeReg, Name: "workspace/big", Size: 1 << 17, Mode: 0o644}))
	f.Add(tarOf(f, tar.Header{Typeflag: tar.TypeLink, Name: "workspace/hard", Linkname: "/etc/shadow"}))
	f.Add(tarOf(f, tar.Header{Typeflag: tar.TypeFifo, Name: "workspace/fifo"}))
	// Hard links, brought back as copies: to a file, out of the
	// workspace, to nothing; copies past the quota; a file past it
	// between two that fit; devices.
	f.Add(tarOf(f, tar.Header{Typeflag: tar.TypeReg, Name: "workspace/a", Size: 3, Mode: 0o644},
		tar.Header{Typeflag: tar.TypeLink, Name: "workspace/d/b", Linkname: "workspace/a"},
		tar.Header{Typeflag: tar.TypeLink, Name: "workspace/c", Linkname: "workspace/../../etc/shadow"},
		tar.Header{Typeflag: tar.TypeLink, Name: "workspace/e", Linkname: "workspace/none"}))
	f.Add(tarOf(f, tar.Header{Typeflag: tar.TypeReg, Name: "/a", Size: 40 << 10, Mode: 0o644},
		tar.Header{Typeflag: tar.TypeLink, Name: "/b", Linkname: "/a"},
		tar.Header{Typeflag: tar.TypeLink, Name: "/c", Linkname: "a"}))
	f.Add(tarOf(f, tar.Header{Typeflag: tar.TypeReg, Name: "workspace/a", Size: 1 << 10, Mode: 0o644},
		tar.Header{Typeflag: tar.TypeReg, Name: "workspace/big", Size: 100 << 10, Mode: 0o644},
		tar.Header{Typeflag: tar.TypeReg, Name: "workspace/z", Size: 1 << 10, Mode: 0o644}))
	f.Add(tarOf(f, tar.Header{Typeflag: tar.TypeChar, Name: "workspace/null", Devmajor: 1, Devminor: 3},
		tar.Header{Typeflag: tar.TypeBlock, Name: "workspace/sda", Devmajor: 8}))
	f.Add([]byte("not a tar"))
	f.Fuzz(func(t *testing.T, data []byte) {
		parent := t.TempDir()
		dir := filepath.Join(parent, "ws")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		const quota = 64 << 10
		_, _, _ = extractBack(bytes.NewReader(data), dir, quota, nil)
		names, _ := os.ReadDir(parent)
		if len(names) != 1 {
			t.Fatalf("the read-back wrote beside the workspace: %v", names)
		}
		var total int64
		filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
			if err != nil {
				return nil
			}
			m := info.Mode()
			if m&(os.ModeDevice|os.ModeNamedPipe|os.ModeSocket|os.ModeCharDevice) != 0 {
				t.Fatalf("%s is a %v", p, m)
			}
			if m.IsRegular() {
				total += info.Size()
			}
			return nil
		})
		if total > quota {
			t.Fatalf("%d bytes read back, over the quota of %d", total, quota)
		}
	})
}

func TestReadBackRefuses(t *testing.T) {
	for name, data := range map[string][]byte{
		"dotdot":    tarOf(t, tar.Header{Typeflag: tar.TypeReg, Name: "workspace/../../escape", Size: 1, Mode: 0o644}),
		"foreign":   tarOf(t, tar.Header{Typeflag: tar.TypeReg, Name: "etc/passwd", Size: 1, Mode: 0o644}),
		"sibling":   tarOf(t, tar.Header{Typeflag: tar.TypeReg, Name: "workspace2/x", Size: 1, Mode: 0o644}),
		"through":   tarOf(t, tar.Header{Typeflag: tar.TypeSymlink, Name: "workspace/up", Linkname: ".."}, tar.Header{Typeflag: tar.TypeReg, Name: "workspace/up/escape", Size: 1, Mode: 0o644}),
		"not a tar": []byte(strings.Repeat("junk", 200)),
	} {
		t.Run(name, func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, "ws")
			os.Mkdir(dir, 0o755)
			if _, _, err := extractBack(bytes.NewReader(data), dir, 64<<10, nil); err == nil {
				t.Errorf("read back without an error")
			}
			if names, _ := os.ReadDir(parent); len(names) != 1 {
				t.Errorf("wrote beside the workspace: %v", names)
			}
			if _, err := os.Lstat(filepath.Join(parent, "escape")); err == nil {
				t.Errorf("escape written")
			}
		})
	}
}

// TestReadBackNamings: the engines' two ways of naming the directory's
// entries come back alike.
func TestReadBackNamings(t *testing.T) {
	for name, data := range map[string][]byte{
		"docker": tarOf(t, tar.Header{Typeflag: tar.TypeDir, Name: "workspace/", Mode: 0o755},
			tar.Header{Typeflag: tar.TypeReg, Name: "workspace/d/a.txt", Size: 3, Mode: 0o644}),
		"podman": tarOf(t, tar.Header{Typeflag: tar.TypeDir, Name: "/", Mode: 0o755},
			tar.Header{Typeflag: tar.TypeReg, Name: "/d/a.txt", Size: 3, Mode: 0o644}),
		"dot": tarOf(t, tar.Header{Typeflag: tar.TypeDir, Name: "./", Mode: 0o755},
			tar.Header{Typeflag: tar.TypeReg, Name: "./d/a.txt", Size: 3, Mode: 0o644}),
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if _, _, err := extractBack(bytes.NewReader(data), dir, 64<<10, nil); err != nil {
				t.Fatal(err)
			}
			if b, err := os.ReadFile(filepath.Join(dir, "d", "a.txt")); err != nil || string(b) != "xxx" {
				t.Errorf("d/a.txt = %q, %v", b, err)
			}
		})
	}
}

func TestReadBackKeepsLinks(t *testing.T) {
	dir := t.TempDir()
	data := tarOf(t, tar.Header{Typeflag: tar.TypeDir, Name: "workspace/", Mode: 0o755},
		tar.Header{Typeflag: tar.TypeDir, Name: "workspace/d/", Mode: 0o755},
		tar.Header{Typeflag: tar.TypeReg, Name: "workspace/d/a.txt", Size: 3, Mode: 0o644},
		tar.Header{Typeflag: tar.TypeSymlink, Name: "workspace/link", Linkname: "/etc/passwd"})
	if _, _, err := extractBack(bytes.NewReader(data), dir, 64<<10, nil); err != nil {
		t.Fatal(err)
	}
	if target, err := os.Readlink(filepath.Join(dir, "link")); err != nil || target != "/etc/passwd" {
		t.Errorf("link = %q, %v", target, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "d", "a.txt")); err != nil || string(b) != "xxx" {
		t.Errorf("d/a.txt = %q, %v", b, err)
	}
}
