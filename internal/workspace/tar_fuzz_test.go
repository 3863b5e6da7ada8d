package workspace

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// CleanPath never gives a path that could leave the workspace: whatever it
// accepts is relative, free of "..", ".", empty elements and NUL.
func FuzzCleanPath(f *testing.F) {
	for _, s := range []string{"a/b", "../x", "a/../../b", "/etc/passwd", "./a//b/", "a\x00b", "..", ".", "", "a/./b/..", "...", "a/...", "%2e%2e"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		got, err := CleanPath(p)
		if err != nil {
			return
		}
		if got == "" || strings.HasPrefix(got, "/") || strings.ContainsRune(got, 0) || len(got) > 4096 {
			t.Fatalf("CleanPath(%q) = %q", p, got)
		}
		for _, el := range strings.Split(got, "/") {
			if el == "" || el == "." || el == ".." {
				t.Fatalf("CleanPath(%q) = %q, with element %q", p, got, el)
			}
		}
		if again, err := CleanPath(got); err != nil || again != got {
			t.Fatalf("CleanPath is not stable on %q: %q, %v", got, again, err)
		}
	})
}

// badArchives are archives cut short or lying in their headers: the
// sender's bad input, never a failure of the workspace.
func badArchives(tb testing.TB) map[string][]byte {
	tb.Helper()
	good := makeTar(tb, file("a.txt", strings.Repeat("a", 3000)), file("d/b.txt", "b"))
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(good)
	zw.Close()
	// A header that claims more content than follows it.
	lying := append([]byte(nil), good[:512]...)
	copy(lying[124:136], []byte("00000077777\x00")) // size field, octal
	lying = append(lying, good[512:1024]...)
	corrupt := append([]byte(nil), gz.Bytes()...)
	corrupt[len(corrupt)-6] ^= 0xff // the gzip trailer's checksum
	return map[string][]byte{
		"truncated tar":          good[:1500],
		"truncated header":       good[:100],
		"truncated gzip":         gz.Bytes()[:gz.Len()/2],
		"gzip header only":       gz.Bytes()[:10],
		"gzip checksum":          corrupt,
		"garbage":                bytes.Repeat([]byte("not a tar "), 100),
		"header lies about size": lying,
		"bad header checksum":    append(append([]byte(nil), good[:148]...), append([]byte("99999999"), good[156:]...)...),
	}
}

// An archive that cannot be read is ErrBadArchive, whatever is wrong with
// it, and nothing lands outside the directory it is extracted into.
func TestExtractTarBadArchive(t *testing.T) {
	for name, data := range badArchives(t) {
		t.Run(name, func(t *testing.T) {
			r, err := Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			_, _, err = r.ExtractTar("x", bytes.NewReader(data), 1<<20, 100)
			if !errors.Is(err, ErrBadArchive) {
				t.Errorf("ExtractTar = %v, want ErrBadArchive", err)
			}
		})
	}
}

// FuzzExtractTar holds ExtractTar to its promises whatever it is sent: it
// never panics, every error it returns for the archive is one of the
// package's kinds (the sender's fault, never the workspace's), and nothing
// appears outside the directory it extracts into.
func FuzzExtractTar(f *testing.F) {
	t := &testing.T{}
	for _, data := range badArchives(t) {
		f.Add(data)
	}
	f.Add(makeTar(t, file("ok.txt", "hello"), tarEntry{name: "sub", typ: tar.TypeDir, mode: 0o755}, tarEntry{name: "sub/l", typ: tar.TypeSymlink, linkname: "../ok.txt"}))
	f.Add(makeTar(t, tarEntry{name: "../escape", typ: tar.TypeReg, body: "x"}))
	f.Add(makeTar(t, tarEntry{name: "l", typ: tar.TypeSymlink, linkname: "/etc"}, file("l/passwd", "x")))
	f.Add(makeTar(t, file(strings.Repeat("d/", 300)+"f", "deep")))
	// Hard links, which a copy back brings back as copies: of a file, of
	// a link out, out of the workspace, of themselves; and a file past
	// the quota.
	f.Add(makeTar(t, file("a", "hello"), tarEntry{name: "b", typ: tar.TypeLink, linkname: "a"}, tarEntry{name: "c", typ: tar.TypeLink, linkname: "b"}))
	f.Add(makeTar(t, tarEntry{name: "l", typ: tar.TypeSymlink, linkname: ".."}, tarEntry{name: "h", typ: tar.TypeLink, linkname: "l/ws/h"}))
	f.Add(makeTar(t, tarEntry{name: "h", typ: tar.TypeLink, linkname: "../../etc/passwd"}, tarEntry{name: "s", typ: tar.TypeLink, linkname: "s"}))
	f.Add(makeTar(t, file("big", strings.Repeat("x", 1<<16)), file("z", "z"), tarEntry{name: "f", typ: tar.TypeFifo}))
	f.Fuzz(func(t *testing.T, data []byte) {
		parent := t.TempDir()
		if err := os.Mkdir(filepath.Join(parent, "ws"), 0o755); err != nil {
			t.Fatal(err)
		}
		r, err := Open(filepath.Join(parent, "ws"))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		_, _, err = r.ExtractTar("in", bytes.NewReader(data), 1<<20, 100)
		if err != nil {
			known := false
			for _, kind := range []error{ErrBadArchive, ErrUnsafeArchive, ErrBadPath, ErrSymlink, ErrQuota, ErrNotRegular, ErrTooLarge, ErrNotFound} {
				known = known || errors.Is(err, kind)
			}
			if !known {
				t.Fatalf("ExtractTar = %v: not one of the package's kinds of error", err)
			}
		}
		if entries, _ := os.ReadDir(parent); len(entries) != 1 {
			t.Fatalf("the parent holds %v", entries)
		}
		// As a copy back, into a directory of its own: the same, within
		// the quota of content.
		back := filepath.Join(parent, "ws", "back")
		if err := os.Mkdir(back, 0o755); err != nil {
			t.Fatal(err)
		}
		rb, err := Open(back)
		if err != nil {
			t.Fatal(err)
		}
		defer rb.Close()
		const quota = 32 << 10
		_, n, err := rb.ExtractTarWith("", bytes.NewReader(data), ExtractOptions{Quota: quota, MaxEntries: 100, Leave: func(name, why string) {
			if why == "" {
				t.Errorf("%s left without a word", name)
			}
		}})
		if err != nil {
			known := false
			for _, kind := range []error{ErrBadArchive, ErrUnsafeArchive, ErrBadPath, ErrSymlink, ErrQuota, ErrNotRegular, ErrTooLarge, ErrNotFound} {
				known = known || errors.Is(err, kind)
			}
			if !known {
				t.Fatalf("ExtractTarWith = %v: not one of the package's kinds of error", err)
			}
		}
		if n > quota {
			t.Fatalf("%d bytes written, past the quota of %d", n, quota)
		}
		if entries, _ := os.ReadDir(parent); len(entries) != 1 {
			t.Fatalf("the parent holds %v", entries)
		}
	})
}
