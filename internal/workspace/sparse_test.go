package workspace

import (
	"bytes"
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
