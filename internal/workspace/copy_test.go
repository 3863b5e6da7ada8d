package workspace

import (
	"os"
	"path/filepath"
	"testing"
)

// A file of the destination that is a hard link to a file elsewhere (a
// package store's, another checkout's) gets a new file with the new
// content; the file elsewhere keeps its own.
func TestApplyDoesNotWriteThroughHardLinks(t *testing.T) {
	from, to, elsewhere := t.TempDir(), t.TempDir(), t.TempDir()
	shared := filepath.Join(elsewhere, "store.txt")
	if err := os.WriteFile(shared, []byte("the store's content\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(to, "pkg"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(shared, filepath.Join(to, "pkg", "linked.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(from, "pkg"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(from, "pkg", "linked.txt"), []byte("the program's content\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if errs := Apply([]Change{{Path: "pkg/linked.txt", Kind: "modified"}}, from, to, KeepOwner); len(errs) > 0 {
		t.Fatal(errs)
	}
	if b, _ := os.ReadFile(filepath.Join(to, "pkg", "linked.txt")); string(b) != "the program's content\n" {
		t.Fatalf("the workspace's file holds %q", b)
	}
	if b, _ := os.ReadFile(shared); string(b) != "the store's content\n" {
		t.Fatalf("the linked file outside was written through: %q", b)
	}
	info, err := os.Stat(filepath.Join(to, "pkg", "linked.txt"))
	if err != nil || info.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v, %v", info.Mode(), err)
	}
	// Nothing of the copy is left beside it.
	entries, _ := os.ReadDir(filepath.Join(to, "pkg"))
	if len(entries) != 1 {
		t.Fatalf("the directory holds %d entries: %v", len(entries), entries)
	}
}
