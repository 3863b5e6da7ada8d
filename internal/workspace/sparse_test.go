package workspace

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// makeSparse writes a file of length size holding data at offset 0 and at
// 1 GiB, and holes elsewhere; it skips the test where the filesystem keeps
// no holes.
func makeSparse(t *testing.T, path string, size int64, data []byte) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(data, 1<<30); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Skipf("this filesystem takes no file of %d bytes: %v", size, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	if st.Blocks*512 > 1<<20 {
		t.Skipf("this filesystem keeps no holes: %d blocks", st.Blocks)
	}
}

// blocks is how many bytes of disk the file at path holds.
func blocks(t *testing.T, path string) int64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

// A program's file that is mostly holes (a truncate to 8 TiB) costs the
// host neither its length in disk nor its length in hashing: listing it
// returns at once, without a digest and with a warning; copying it back,
// and copying the tree elsewhere, keeps its holes, its length and the data
// it holds.
func TestSparseFileIsNeitherHashedNorFilled(t *testing.T) {
	const size = 8 << 40
	sandbox, user, forked := t.TempDir(), t.TempDir(), t.TempDir()
	before, err := Take(sandbox)
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("data"), 1024)
	makeSparse(t, filepath.Join(sandbox, "huge.bin"), size, data)
	if err := os.WriteFile(filepath.Join(sandbox, "small.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	changes, _, warnings := Changes(before, sandbox)
	if len(changes) != 2 {
		t.Fatalf("changes %+v", changes)
	}
	huge, small := changes[0], changes[1]
	if huge.Path != "huge.bin" || huge.SHA256 != "" || huge.Size != size {
		t.Errorf("the sparse file is listed as %+v", huge)
	}
	if small.SHA256 == "" {
		t.Errorf("the small file has no digest: %+v", small)
	}
	if w := strings.Join(warnings, "\n"); !strings.Contains(w, "1 file is listed without a sha256") || !strings.Contains(w, "huge.bin") {
		t.Errorf("warnings %q", warnings)
	}
	if errs := Apply(changes, sandbox, user, KeepOwner); len(errs) > 0 {
		t.Fatal(errs)
	}
	if err := CopyTree(user, forked, KeepOwner); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{user, forked} {
		p := filepath.Join(dir, "huge.bin")
		info, err := os.Stat(p)
		if err != nil || info.Size() != size {
			t.Fatalf("%s: %v, %v", p, info, err)
		}
		if b := blocks(t, p); b > 1<<20 {
			t.Errorf("%s holds %d bytes of disk for %d bytes of data", p, b, 2*len(data))
		}
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, off := range []int64{0, 1 << 30} {
			got := make([]byte, len(data)+8)
			if _, err := f.ReadAt(got, off); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got[:len(data)], data) || !bytes.Equal(got[len(data):], make([]byte, 8)) {
				t.Errorf("%s at %d holds %q...", p, off, got[:16])
			}
		}
		f.Close()
	}
}

// The holes a listing reads are counted across files: many files each
// within the budget are hashed until it is spent, and the rest are listed
// without a digest.
func TestHoleBudgetIsShared(t *testing.T) {
	defer func(n int64) { holeBudget = n }(holeBudget)
	holeBudget = 3 << 20
	sandbox := t.TempDir()
	before, err := Take(sandbox)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		if err := os.WriteFile(filepath.Join(sandbox, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(filepath.Join(sandbox, name), 1<<20); err != nil {
			t.Fatal(err)
		}
	}
	changes, _, warnings := Changes(before, sandbox)
	hashed := 0
	for _, c := range changes {
		if c.SHA256 != "" {
			hashed++
		}
	}
	if hashed != 3 || !strings.Contains(strings.Join(warnings, "\n"), "2 files are listed without a sha256") {
		t.Errorf("%d of 5 hashed, warnings %q", hashed, warnings)
	}
}

// Pipes and sockets a program leaves in its workspace are not files to
// list or copy, and the warnings say they were left, by name; those there
// before the run are not named again.
func TestSpecialFilesAreNamed(t *testing.T) {
	sandbox := t.TempDir()
	if err := unix.Mkfifo(filepath.Join(sandbox, "old-fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	before, err := Take(sandbox)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(sandbox, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(sandbox, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: filepath.Join(sandbox, "d", "sock")}); err != nil {
		t.Fatal(err)
	}
	changes, _, warnings := Changes(before, sandbox)
	if len(changes) != 0 {
		t.Errorf("changes %+v", changes)
	}
	w := strings.Join(warnings, "\n")
	if !strings.Contains(w, "2 pipes, sockets or device nodes left in the workspace are in no list and not copied back") ||
		!strings.Contains(w, "fifo, d/sock") && !strings.Contains(w, "d/sock, fifo") || strings.Contains(w, "old-fifo") {
		t.Errorf("warnings %q", warnings)
	}
	// Asked again, the same warning; from a snapshot that holds them, none.
	if _, _, warnings := Changes(before, sandbox); len(warnings) != 1 {
		t.Errorf("warnings %q", warnings)
	}
	after, _ := Take(sandbox)
	if _, _, warnings := Changes(after, sandbox); len(warnings) != 0 {
		t.Errorf("warnings with nothing new: %q", warnings)
	}
}

// Two files whose names differ only in bytes that are not UTF-8 would look
// the same in a Result's JSON: the warnings name them unambiguously.
func TestInvalidUTF8NamesAreNamed(t *testing.T) {
	sandbox := t.TempDir()
	before, err := Take(sandbox)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"bad\xff", "bad\xfe", "good é"} {
		if err := os.WriteFile(filepath.Join(sandbox, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	changes, _, warnings := Changes(before, sandbox)
	if len(changes) != 3 {
		t.Fatalf("changes %+v", changes)
	}
	if w := strings.Join(warnings, "\n"); !strings.Contains(w, `2 changed paths are not valid UTF-8`) ||
		!strings.Contains(w, `"bad\xfe", "bad\xff"`) || strings.Contains(w, "good") {
		t.Errorf("warnings %q", warnings)
	}
}

// A file a program gives many names (hard links) is hashed once and copied
// once: the other names, brought back and copied on, are links to that
// copy, and cost the disk nothing more.
func TestHardLinksAreCopiedAndHashedOnce(t *testing.T) {
	defer func(n int64) { holeBudget = n }(holeBudget)
	holeBudget = 3 << 20
	sandbox, user, forked := t.TempDir(), t.TempDir(), t.TempDir()
	before, err := Take(sandbox)
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	if err := os.WriteFile(filepath.Join(sandbox, "f0"), data, 0o640); err != nil {
		t.Fatal(err)
	}
	// Holes of 2 MiB: a budget of 3 MiB reads them once, not twice.
	if err := os.Truncate(filepath.Join(sandbox, "f0"), 3<<20); err != nil {
		t.Fatal(err)
	}
	const names = 200
	if err := os.Mkdir(filepath.Join(sandbox, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < names; i++ {
		if err := os.Link(filepath.Join(sandbox, "f0"), filepath.Join(sandbox, "d", fmt.Sprint("f", i))); err != nil {
			t.Fatal(err)
		}
	}
	changes, after, warnings := Changes(before, sandbox)
	if len(changes) != names || len(warnings) != 0 {
		t.Fatalf("%d changes, warnings %q", len(changes), warnings)
	}
	for _, c := range changes {
		if c.SHA256 != changes[0].SHA256 || c.SHA256 == "" || c.Size != 3<<20 {
			t.Fatalf("%+v, then %+v", changes[0], c)
		}
	}
	if cost := after.Cost(); cost > 2<<20 {
		t.Errorf("the snapshot costs %d bytes", cost)
	}
	if errs := Apply(changes, sandbox, user, KeepOwner); len(errs) > 0 {
		t.Fatal(errs)
	}
	if err := CopyTree(user, forked, KeepOwner); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{user, forked} {
		var st unix.Stat_t
		if err := unix.Stat(filepath.Join(dir, "d", "f7"), &st); err != nil {
			t.Fatal(err)
		}
		if st.Nlink != names || st.Size != 3<<20 || st.Mode&0o777 != 0o640 {
			t.Errorf("%s: %d names, size %d, mode %o", dir, st.Nlink, st.Size, st.Mode&0o777)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "d", "f7")); !bytes.Equal(b[:len(data)], data) {
			t.Errorf("%s: content differs", dir)
		}
		r, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		if used, err := r.Usage(); err != nil || used > 2<<20+names*InodeCost {
			t.Errorf("%s uses %d bytes, %v", dir, used, err)
		}
		list, err := r.List("", 0)
		r.Close()
		if err != nil || len(list) != names+1 || list[len(list)-1].SHA256 != changes[0].SHA256 {
			t.Errorf("%s: list of %d, %v", dir, len(list), err)
		}
	}
	// A name the user's directory already had, a link to a file
	// elsewhere, is replaced by a link to the copy, and the file elsewhere
	// keeps its content.
	elsewhere := filepath.Join(t.TempDir(), "store")
	if err := os.WriteFile(elsewhere, []byte("the store's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	user2 := t.TempDir()
	os.Mkdir(filepath.Join(user2, "d"), 0o755)
	if err := os.Link(elsewhere, filepath.Join(user2, "d", "f9")); err != nil {
		t.Fatal(err)
	}
	if errs := Apply(changes, sandbox, user2, KeepOwner); len(errs) > 0 {
		t.Fatal(errs)
	}
	if b, _ := os.ReadFile(elsewhere); string(b) != "the store's\n" {
		t.Errorf("the file elsewhere holds %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(user2, "d", "f9")); !bytes.Equal(b[:len(data)], data) {
		t.Errorf("the replaced name does not hold the program's content")
	}
}

// A tar holds holes as zeros: WriteTar archives a tree whose files' holes
// fit the budget, and refuses one past it before a byte is written.
func TestWriteTarRefusesWhatIsMostlyHoles(t *testing.T) {
	defer func(n int64) { holeBudget = n }(holeBudget)
	holeBudget = 3 << 20
	dir := t.TempDir()
	data := []byte("data")
	// Each file: data at 0, a hole, data at 1 GiB, then cut to 2 MiB: the
	// data past the cut goes, and about 2 MiB of holes stay.
	for _, name := range []string{"a.bin", "sub/b.bin"} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		makeSparse(t, p, 2<<20, data)
	}
	root, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	// One file, and the directory that holds it alone, fit.
	for _, rel := range []string{"a.bin", "sub"} {
		var buf bytes.Buffer
		if err := root.WriteTar(rel, &buf); err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		tr := tar.NewReader(&buf)
		h, err := tr.Next()
		if err != nil || h.Size != 2<<20 {
			t.Fatalf("%s: the tar's first entry %+v, %v", rel, h, err)
		}
		b, _ := io.ReadAll(tr)
		if len(b) != 2<<20 || !bytes.Equal(b[:4], data) || !bytes.Equal(b[4:], make([]byte, len(b)-4)) {
			t.Fatalf("%s: %d bytes archived, starting %q", rel, len(b), b[:8])
		}
	}
	// The whole tree holds 4 MiB of holes: refused, with nothing written.
	var buf bytes.Buffer
	err = root.WriteTar("", &buf)
	if !errors.Is(err, ErrTooSparse) || buf.Len() != 0 || !strings.Contains(err.Error(), "sub/b.bin") {
		t.Fatalf("the whole tree: %v, %d bytes written", err, buf.Len())
	}
}
