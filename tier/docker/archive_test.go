package docker

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/codecell-dev/codecell/internal/workspace"
)

func TestClimbsOut(t *testing.T) {
	for _, c := range []struct {
		name, target string
		want         bool
	}{
		{"up", "..", true},
		{"escape", "../escape", true},
		{"d/x", "../../y", true},
		{"d/x", "../y", false},
		{"d/x", "..", false},
		{"a", "/etc/passwd", false},
		{"a", "b", false},
		{"a", ".", false},
		{"./d/../a", "../b", true},
	} {
		if got := climbsOut(c.name, c.target); got != c.want {
			t.Errorf("climbsOut(%q, %q) = %v", c.name, c.target, got)
		}
	}
}

// ownTar leaves out the links that climb out, and says which.
func TestOwnTarLeavesClimbingLinks(t *testing.T) {
	var src bytes.Buffer
	tw := tar.NewWriter(&src)
	for _, h := range []*tar.Header{
		{Name: "up", Typeflag: tar.TypeSymlink, Linkname: ".."},
		{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "d/in", Typeflag: tar.TypeSymlink, Linkname: "../up"},
		{Name: "d/out", Typeflag: tar.TypeSymlink, Linkname: "../../x"},
		{Name: "abs", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
	}
	tw.Close()
	var dst bytes.Buffer
	var links []linkSpec
	if err := ownTar(&dst, &src, 1000, 1000, 0o777, &links); err != nil {
		t.Fatal(err)
	}
	want := []linkSpec{{"up", ".."}, {"d/out", "../../x"}}
	if !reflect.DeepEqual(links, want) {
		t.Errorf("links %+v, want %+v", links, want)
	}
	var names []string
	tr := tar.NewReader(&dst)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
	if !reflect.DeepEqual(names, []string{"./", "d/", "d/in", "abs"}) {
		t.Errorf("unpacked %q", names)
	}
}

// TestReadBackCountsWhatItLeaves: files left in the container past the
// ones named are counted, not dropped from the Result without a word.
func TestReadBackCountsWhatItLeaves(t *testing.T) {
	// Each name of a, a copy of its own, takes the read-back past its
	// quota after the first.
	hdrs := []tar.Header{{Typeflag: tar.TypeReg, Name: "workspace/a", Size: 600 << 10, Mode: 0o644}}
	for i := range 50 {
		hdrs = append(hdrs, tar.Header{Typeflag: tar.TypeLink, Name: fmt.Sprintf("workspace/l%02d", i), Linkname: "workspace/a"})
	}
	skipped, left, err := extractBack(bytes.NewReader(tarOf(t, hdrs...)), t.TempDir(), 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(skipped) != maxSkipped+1 || skipped[maxSkipped] != "and 30 more files were left in the container (50 in all)" {
		t.Errorf("skipped %d: %q", len(skipped), skipped)
	}
	if left.NFiles != 50 || len(left.Files) != maxSkipped || left.Files[0] != "l00" {
		t.Errorf("left %d, named %q", left.NFiles, left.Files)
	}
	want := "l00 was left in the container, and is not in the file list (a copy the workspace held is kept): a hard link to a, whose copy: it is 614400 bytes long, past the 434176 bytes left of the 1048576-byte quota (holes, as truncate makes, count as the zeros an archive carries): " + raiseQuota
	if skipped[0] != want {
		t.Errorf("the first warning:\n%s\nwant\n%s", skipped[0], want)
	}
}

// TestReadBackHardLinks: a hard link comes back with the content of the
// file it names, as a file of its own, in both engines' namings; one whose
// target is not in the workspace is left, with a word, and the rest come
// back.
func TestReadBackHardLinks(t *testing.T) {
	for name, data := range map[string][]byte{
		"docker": tarOf(t, tar.Header{Typeflag: tar.TypeDir, Name: "workspace/", Mode: 0o755},
			tar.Header{Typeflag: tar.TypeReg, Name: "workspace/a.txt", Size: 3, Mode: 0o640},
			tar.Header{Typeflag: tar.TypeLink, Name: "workspace/d/b.txt", Linkname: "workspace/a.txt"},
			tar.Header{Typeflag: tar.TypeLink, Name: "workspace/out", Linkname: "etc/shadow"},
			tar.Header{Typeflag: tar.TypeLink, Name: "workspace/up", Linkname: "workspace/../../etc/shadow"},
			tar.Header{Typeflag: tar.TypeLink, Name: "workspace/none", Linkname: "workspace/missing"},
			tar.Header{Typeflag: tar.TypeReg, Name: "workspace/z.txt", Size: 1, Mode: 0o644}),
		"podman": tarOf(t, tar.Header{Typeflag: tar.TypeDir, Name: "/", Mode: 0o755},
			tar.Header{Typeflag: tar.TypeReg, Name: "/a.txt", Size: 3, Mode: 0o640},
			tar.Header{Typeflag: tar.TypeLink, Name: "/d/b.txt", Linkname: "/a.txt"},
			tar.Header{Typeflag: tar.TypeLink, Name: "/out", Linkname: "/etc/shadow/../../../etc/shadow"},
			tar.Header{Typeflag: tar.TypeLink, Name: "/up", Linkname: "../../etc/shadow"},
			tar.Header{Typeflag: tar.TypeLink, Name: "/none", Linkname: "missing"},
			tar.Header{Typeflag: tar.TypeReg, Name: "/z.txt", Size: 1, Mode: 0o644}),
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			skipped, left, err := extractBack(bytes.NewReader(data), dir, 64<<10, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{"a.txt", "d/b.txt"} {
				info, err := os.Stat(filepath.Join(dir, f))
				if b, _ := os.ReadFile(filepath.Join(dir, f)); err != nil || string(b) != "xxx" || info.Mode().Perm() != 0o640 {
					t.Errorf("%s = %q, %v", f, b, err)
				}
			}
			var a, b syscall.Stat_t
			syscall.Stat(filepath.Join(dir, "a.txt"), &a)
			syscall.Stat(filepath.Join(dir, "d/b.txt"), &b)
			if a.Ino == b.Ino {
				t.Errorf("d/b.txt is a.txt's inode, not a copy")
			}
			if b, err := os.ReadFile(filepath.Join(dir, "z.txt")); err != nil || string(b) != "x" {
				t.Errorf("z.txt = %q, %v", b, err)
			}
			if !reflect.DeepEqual(left.Files, []string{"out", "up", "none"}) || left.NFiles != 3 || len(skipped) != 3 {
				t.Fatalf("left %q (%d), warnings %q", left.Files, left.NFiles, skipped)
			}
			for _, w := range skipped {
				if !strings.Contains(w, "was left in the container") || !strings.Contains(w, "a hard link to") {
					t.Errorf("warning %q", w)
				}
			}
			if names, _ := os.ReadDir(dir); len(names) != 3 {
				t.Errorf("the workspace holds %v", names)
			}
		})
	}
}

// TestReadBackLeavesWhatDoesNotFit: a file that would take the read-back
// past the quota is left, with a warning naming it, its length and what
// to do; the files before and after it come back.
func TestReadBackLeavesWhatDoesNotFit(t *testing.T) {
	data := tarOf(t, tar.Header{Typeflag: tar.TypeDir, Name: "workspace/", Mode: 0o755},
		tar.Header{Typeflag: tar.TypeReg, Name: "workspace/a.txt", Size: 32 << 10, Mode: 0o644},
		tar.Header{Typeflag: tar.TypeReg, Name: "workspace/big", Size: 48 << 10, Mode: 0o644},
		tar.Header{Typeflag: tar.TypeReg, Name: "workspace/z.txt", Size: 1 << 10, Mode: 0o644})
	dir := t.TempDir()
	skipped, left, err := extractBack(bytes.NewReader(data), dir, 64<<10, nil)
	if err != nil {
		t.Fatal(err)
	}
	for f, size := range map[string]int64{"a.txt": 32 << 10, "z.txt": 1 << 10} {
		if info, err := os.Stat(filepath.Join(dir, f)); err != nil || info.Size() != size {
			t.Errorf("%s: %v, %v", f, info, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "big")); err == nil {
		t.Errorf("big came back")
	}
	want := []string{"big was left in the container, and is not in the file list (a copy the workspace held is kept): it is 49152 bytes long, and the read-back, which brings back at most 65536 bytes (limits.workspace), had 32768 left for it: " + raiseQuota}
	if !reflect.DeepEqual(skipped, want) || !reflect.DeepEqual(left.Files, []string{"big"}) || left.Incomplete {
		t.Errorf("warnings %q, left %+v", skipped, left)
	}
}

// zeros is a reader of n zeros that counts what it gave.
type zeros struct{ n, read int64 }

func (z *zeros) Read(p []byte) (int, error) {
	if z.n == 0 {
		return 0, io.EOF
	}
	k := int(min(int64(len(p)), z.n))
	clear(p[:k])
	z.n -= int64(k)
	z.read += int64(k)
	return k, nil
}

// TestReadBackBoundsHoles: an archive that carries a file of holes 100 GiB
// long (as zeros) costs the read-back no more than its quota to read: it
// stops there, keeps what came before, warns, and takes no file for
// deleted.
func TestReadBackBoundsHoles(t *testing.T) {
	head := tarOf(t, tar.Header{Typeflag: tar.TypeDir, Name: "workspace/", Mode: 0o755},
		tar.Header{Typeflag: tar.TypeReg, Name: "workspace/a.txt", Size: 3, Mode: 0o644})
	head = head[:len(head)-1024] // no end of archive yet
	var hdr bytes.Buffer
	tw := tar.NewWriter(&hdr)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "workspace/holes.bin", Size: 100 << 30, Mode: 0o644}); err != nil {
		t.Fatal(err)
	}
	tw.Flush()
	z := &zeros{n: 100 << 30}
	src := io.MultiReader(bytes.NewReader(head), &hdr, z)
	dir := t.TempDir()
	skipped, left, err := extractBack(src, dir, 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	if z.read > 2<<20 {
		t.Errorf("read %d bytes of the holes", z.read)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "a.txt")); err != nil || string(b) != "xxx" {
		t.Errorf("a.txt = %q, %v", b, err)
	}
	if len(skipped) != 1 || !strings.Contains(skipped[0], "the read-back stopped before the end of the workspace") ||
		!strings.Contains(skipped[0], `"holes.bin", 107374182400 bytes long`) || !left.Incomplete {
		t.Errorf("warnings %q, left %+v", skipped, left)
	}
}

// TestReadBackSpecials: fifos and devices in the archive, and the ones
// the launcher left, are said to be left as the native tier says it of
// those in its workspace.
func TestReadBackSpecials(t *testing.T) {
	data := tarOf(t, tar.Header{Typeflag: tar.TypeDir, Name: "workspace/", Mode: 0o755},
		tar.Header{Typeflag: tar.TypeFifo, Name: "workspace/fifo"},
		tar.Header{Typeflag: tar.TypeChar, Name: "workspace/null", Devmajor: 1, Devminor: 3},
		tar.Header{Typeflag: tar.TypeReg, Name: "workspace/ok.txt", Size: 2, Mode: 0o644})
	dir := t.TempDir()
	before, err := workspace.Take(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	skipped, left, err := extractBack(bytes.NewReader(data), dir, 64<<10, &leaveReport{Specials: [][]byte{[]byte("sock")}, NSpecial: 1})
	if err != nil || len(skipped) != 0 {
		t.Fatalf("%v, warnings %q", err, skipped)
	}
	changes, _, warnings := workspace.ChangesLeaving(before, dir, left)
	want := "3 pipes, sockets or device nodes left in the workspace are in no list and not copied back (only regular files, directories and symbolic links are): sock, fifo, null"
	if len(changes) != 1 || changes[0].Path != "ok.txt" || !reflect.DeepEqual(warnings, []string{want}) {
		t.Errorf("changes %+v, warnings %q", changes, warnings)
	}
}

// TestReadBackKeepsWhatWasLeft: a file of the caller's that the program
// made too long to come back is neither listed nor taken for deleted.
func TestReadBackKeepsWhatWasLeft(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "keep.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	before, err := workspace.Take(ws)
	if err != nil {
		t.Fatal(err)
	}
	data := tarOf(t, tar.Header{Typeflag: tar.TypeDir, Name: "workspace/", Mode: 0o755},
		tar.Header{Typeflag: tar.TypeReg, Name: "workspace/ok.txt", Size: 2, Mode: 0o644})
	dir := t.TempDir()
	launcher := &leaveReport{Files: []leftFile{{Name: []byte("keep.txt"), Size: 100 << 30, Data: 4096}}, NFiles: 1}
	skipped, left, err := extractBack(bytes.NewReader(data), dir, 8<<20, launcher)
	if err != nil {
		t.Fatal(err)
	}
	want := "keep.txt was left in the container, and is not in the file list (a copy the workspace held is kept): it is 107374182400 bytes long but holds 4096 bytes of data (the rest are holes, which an archive carries as zeros), past what the read-back, which brings back at most 8388608 bytes (limits.workspace), had left for it: " + raiseQuota
	if !reflect.DeepEqual(skipped, []string{want}) {
		t.Errorf("warnings %q", skipped)
	}
	changes, _, _ := workspace.ChangesLeaving(before, dir, left)
	if len(changes) != 1 || changes[0].Path != "ok.txt" {
		t.Errorf("changes %+v", changes)
	}
	// With more left than named, no file is taken for deleted.
	changes, _, _ = workspace.ChangesLeaving(before, dir, &workspace.Left{NFiles: 1})
	if len(changes) != 1 || changes[0].Path != "ok.txt" {
		t.Errorf("changes %+v", changes)
	}
	changes, _, _ = workspace.ChangesLeaving(before, dir, nil)
	if len(changes) != 2 || changes[0].Path != "keep.txt" || changes[0].Kind != "deleted" {
		t.Errorf("without the word: changes %+v", changes)
	}
}
