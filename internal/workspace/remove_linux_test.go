package workspace_test

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/codecell-dev/codecell/internal/testenv"
	"github.com/codecell-dev/codecell/internal/workspace"
)

// removeUID is the user TestRemoveShutDirectories runs its trees as.
const removeUID = 2_138_000_011

// TestRemoveShutDirectories: a process that is not root removes trees of
// its own in which directories keep their owner out (0, 0500, 0100, deep
// in the tree), as an uploaded tar or a program leaves them: RemoveAll
// (how a session's workspace goes) and Root.Remove with recursive (DELETE
// of a directory) both remove all of it, and change nothing a link in the
// tree points to. The test runs itself again as another user (it needs
// root to), where the checks are made.
func TestRemoveShutDirectories(t *testing.T) {
	if work := testenv.AsUser(); work != "" {
		removeAsOwner(t, work)
		return
	}
	testenv.RunAsUser(t, removeUID)
}

// shutTree makes a tree at dir whose directories keep their owner out,
// with a link to outside.
func shutTree(t *testing.T, dir, outside string) {
	t.Helper()
	deep := filepath.Join(dir, "deep")
	for i := 0; i < 30; i++ {
		deep = filepath.Join(deep, "d")
	}
	for _, d := range []string{filepath.Join(dir, "a", "b", "c"), filepath.Join(dir, "ro"), deep} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"a/b/c/f", "a/b/g", "ro/h", "none"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(deep, "leaf"), nil, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "ro", "out")); err != nil {
		t.Fatal(err)
	}
	// Innermost first: a directory shut cannot be reached into.
	for _, c := range []struct {
		path string
		perm os.FileMode
	}{{deep, 0}, {filepath.Join(dir, "deep/d/d"), 0}, {filepath.Join(dir, "a/b/c"), 0}, {filepath.Join(dir, "a/b"), 0o100},
		{filepath.Join(dir, "a"), 0o500}, {filepath.Join(dir, "ro"), 0o500}, {filepath.Join(dir, "none"), 0}} {
		if err := os.Chmod(c.path, c.perm); err != nil {
			t.Fatal(err)
		}
	}
}

// removeAsOwner is TestRemoveShutDirectories as the owner of work.
func removeAsOwner(t *testing.T, work string) {
	outside := filepath.Join(work, "outside")
	if err := os.Mkdir(outside, 0o500); err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(work, "ws")
	shutTree(t, ws, outside)
	if err := workspace.RemoveAll(ws); err != nil {
		t.Errorf("RemoveAll: %v", err)
	}
	if _, err := os.Lstat(ws); !os.IsNotExist(err) {
		t.Errorf("after RemoveAll, %s: %v", ws, err)
	}
	if err := workspace.RemoveAll(ws); err != nil {
		t.Errorf("RemoveAll of what is gone: %v", err)
	}

	root := filepath.Join(work, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	shutTree(t, filepath.Join(root, "sub"), outside)
	r, err := workspace.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Remove("sub", true); err != nil {
		t.Errorf("Remove(sub, recursive): %v", err)
	}
	if names, err := os.ReadDir(root); err != nil || len(names) != 0 {
		t.Errorf("after Remove, the root holds %v (%v)", names, err)
	}
	if info, err := os.Stat(outside); err != nil || info.Mode().Perm() != 0o500 {
		t.Errorf("the link's target: %v %v", info, err)
	}

	// An uploaded tar's directories of modes 0 and 0100: their owner may
	// still list and measure them, and remove them.
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range []*tar.Header{
		{Name: "up/", Typeflag: tar.TypeDir, Mode: 0},
		{Name: "up/in/", Typeflag: tar.TypeDir, Mode: 0o100},
		{Name: "up/in/f", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			tw.Write([]byte("x"))
		}
	}
	tw.Close()
	if _, _, err := r.ExtractTar("", &buf, -1, 100); err != nil {
		t.Fatal(err)
	}
	if list, err := r.List("", 100); err != nil || len(list) != 3 {
		t.Errorf("listing the upload: %v %+v", err, list)
	}
	if _, err := r.Usage(); err != nil {
		t.Errorf("measuring the upload: %v", err)
	}
	if err := r.Remove("up", true); err != nil {
		t.Errorf("removing the upload: %v", err)
	}
}
