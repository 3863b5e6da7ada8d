package workspace_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/codecell-dev/codecell/internal/testenv"
	"github.com/codecell-dev/codecell/internal/workspace"
)

// unlockUID is the user the test runs its tree as: no one's.
const unlockUID = 2_138_000_001

// TestUnlock: a process that is not root, owning a tree in which files
// and directories have none of their permissions, reads all of it after
// Unlock, copies each file with the permissions it had, and gives the
// tree its permissions back with Restore. The test runs itself again as
// another user (it needs root to), where the checks are made.
func TestUnlock(t *testing.T) {
	if work := testenv.AsUser(); work != "" {
		unlockAsOwner(t, work)
		return
	}
	testenv.RunAsUser(t, unlockUID)
}

// unlockAsOwner is TestUnlock as the owner of work.
func unlockAsOwner(t *testing.T, work string) {
	listUnreadable(t, filepath.Join(work, "listed"))

	src, dst := filepath.Join(work, "src"), filepath.Join(work, "dst")
	for _, d := range []string{src, dst, filepath.Join(src, "shut", "inner")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]os.FileMode{"none": 0, "write-only": 0o200, "shut/g": 0o644, "shut/inner/f": 0o600, "plain": 0o644}
	for name, perm := range files {
		p := filepath.Join(src, name)
		if err := os.WriteFile(p, []byte("content of "+name), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, perm); err != nil {
			t.Fatal(err)
		}
	}
	// A link to a file of ours outside the tree: never changed.
	outside := filepath.Join(work, "outside")
	if err := os.WriteFile(outside, nil, 0o200); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	dirs := map[string]os.FileMode{"shut/inner": 0o100, "shut": 0, "": 0o300}
	for _, d := range []string{"shut/inner", "shut", ""} {
		if err := os.Chmod(filepath.Join(src, d), dirs[d]); err != nil {
			t.Fatal(err)
		}
	}
	empty, err := workspace.Take(dst)
	if err != nil {
		t.Fatal(err)
	}
	// Without Unlock, the listing cannot see into the tree.
	if _, _, warnings := workspace.Changes(empty, src); len(warnings) == 0 {
		t.Fatal("the tree was readable before Unlock: the test shows nothing")
	}
	l := workspace.Unlock(src)
	changes, _, warnings := workspace.Changes(empty, src)
	if len(warnings) > 0 {
		t.Fatalf("after Unlock: %q", warnings)
	}
	if errs := l.Apply(changes, src, dst, workspace.KeepOwner); len(errs) > 0 {
		t.Fatalf("copying: %v", errs)
	}
	for name, perm := range files {
		p := filepath.Join(dst, name)
		info, err := os.Lstat(p)
		if err != nil {
			t.Errorf("%s was not copied: %v", name, err)
			continue
		}
		if info.Mode().Perm() != perm {
			t.Errorf("%s copied with %v, want %v", name, info.Mode().Perm(), perm)
		}
		if err := os.Chmod(p, 0o600); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(p); err != nil || string(b) != "content of "+name {
			t.Errorf("%s copied as %q, %v", name, b, err)
		}
	}
	l.Restore(src)
	// The tree has its permissions back, each directory's once what it
	// holds had theirs.
	for _, d := range []string{"", "shut"} {
		if info, err := os.Stat(filepath.Join(src, d)); err != nil || info.Mode().Perm() != dirs[d] {
			t.Errorf("directory %q after Restore: %v, want %v", d, err, dirs[d])
		}
	}
	if err := os.Chmod(filepath.Join(src, "shut"), 0o700); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(filepath.Join(src, "shut/inner")); err != nil || info.Mode().Perm() != dirs["shut/inner"] {
		t.Errorf("directory shut/inner after Restore: %v, want %v", err, dirs["shut/inner"])
	}
	for name, perm := range files {
		if info, err := os.Lstat(filepath.Join(src, name)); err != nil || info.Mode().Perm() != perm {
			t.Errorf("%s after Restore: %v, %v, want %v", name, info.Mode().Perm(), err, perm)
		}
	}
	if info, err := os.Stat(outside); err != nil || info.Mode().Perm() != 0o200 {
		t.Errorf("the file a link leads to was changed: %v, %v", info.Mode().Perm(), err)
	}
}

// listUnreadable: in a workspace, a file of ours that we may not read is
// listed without a digest, its download as a file or in a tar is refused
// (fs.ErrPermission) before the tar's first byte, and the rest is
// listed and archived as ever.
func listUnreadable(t *testing.T, dir string) {
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, perm := range map[string]os.FileMode{"sub/none": 0, "ok": 0o644} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(name), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(dir, name), perm); err != nil {
			t.Fatal(err)
		}
	}
	root, err := workspace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	entries, err := root.List("", 0)
	if err != nil {
		t.Fatalf("listing a tree with a file we may not read: %v", err)
	}
	got := map[string]workspace.ListEntry{}
	for _, e := range entries {
		got[e.Path] = e
	}
	if e := got["sub/none"]; e.Type != "file" || e.Size != 8 || e.SHA256 != "" || e.Mode.Perm() != 0 {
		t.Errorf("the unreadable file is listed as %+v", e)
	}
	if e := got["ok"]; e.SHA256 == "" {
		t.Errorf("the readable file is listed as %+v", e)
	}
	if _, _, err := root.Open("sub/none"); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("opening the unreadable file: %v, want a permission error", err)
	}
	for _, rel := range []string{"", "sub", "sub/none"} {
		var b bytes.Buffer
		if err := root.WriteTar(rel, &b); !errors.Is(err, fs.ErrPermission) || b.Len() > 0 {
			t.Errorf("archiving %q: %v after %d bytes, want a permission error before any", rel, err, b.Len())
		}
	}
	var b bytes.Buffer
	if err := root.WriteTar("ok", &b); err != nil || b.Len() == 0 {
		t.Errorf("archiving the readable file: %v", err)
	}
}
