package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFiles(t *testing.T) {
	dst := t.TempDir()
	files := map[string][]byte{
		"bin/tool":         []byte("#!/bin/sh\necho tool\n"),
		"src/main.sh":      []byte("echo 1\n"),
		"runner.py":        []byte("print()\n"),
		"a/b/c/deep.txt":   []byte("deep"),
		"skipped/file.txt": []byte("never"),
	}
	err := WriteFiles(dst, files, KeepOwner, func(name string) bool { return name == "skipped/file.txt" })
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(dst, name))
		if name == "skipped/file.txt" {
			if !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s was written though skipped: %v", name, err)
			}
			continue
		}
		if err != nil || string(got) != string(want) {
			t.Errorf("%s: %q, %v; want %q", name, got, err, want)
		}
	}
	for name, exec := range map[string]bool{"bin/tool": true, "src/main.sh": false, "runner.py": false} {
		info, err := os.Stat(filepath.Join(dst, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := info.Mode().Perm()&0o100 != 0; got != exec {
			t.Errorf("%s: mode %v, executable %v; want %v", name, info.Mode(), got, exec)
		}
	}
}

func TestWriteFilesRefuses(t *testing.T) {
	outside := t.TempDir()
	dst := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dst, "bin")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dst, "taken"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		files map[string][]byte
		want  error
	}{
		{"a link on the way", map[string][]byte{"bin/tool": []byte("x")}, ErrSymlink},
		{"a name that climbs out", map[string][]byte{"../escape": []byte("x")}, ErrBadPath},
		{"an absolute name", map[string][]byte{"/etc/escape": []byte("x")}, ErrBadPath},
		{"a name not in its clean form", map[string][]byte{"src/../x": []byte("x")}, ErrBadPath},
		{"a file already there", map[string][]byte{"taken": []byte("theirs")}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := WriteFiles(dst, tc.files, KeepOwner, nil)
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Fatalf("WriteFiles: %v; want %v", err, tc.want)
			}
		})
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("written through the link: %v", entries)
	}
	if got, _ := os.ReadFile(filepath.Join(dst, "taken")); string(got) != "mine" {
		t.Errorf("a file already there became %q", got)
	}
}
