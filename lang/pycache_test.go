package lang

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestPruneCache: a compiled runner unused for a month goes, one used since
// stays, a temporary file of a write that stopped goes after an hour, and
// nothing else in the directory is touched.
func TestPruneCache(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	files := map[string]time.Duration{
		"old.code":     cacheUnused + time.Hour,
		"recent.code":  cacheUnused - time.Hour,
		"stale.x.tmp":  2 * time.Hour,
		"fresh.x.tmp":  time.Minute,
		"notes.txt":    10 * cacheUnused,
		"another.code": 0,
	}
	for name, age := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		when := now.Add(-age)
		if err := os.Chtimes(p, when, when); err != nil {
			t.Fatal(err)
		}
	}
	pruneCache(dir, now)
	for name := range files {
		_, err := os.Stat(filepath.Join(dir, name))
		gone := os.IsNotExist(err)
		if want := name == "old.code" || name == "stale.x.tmp"; gone != want {
			t.Errorf("%s: removed %v, want %v", name, gone, want)
		}
	}
}

// TestReadCacheMarksUse: reading an entry makes it recent, so that an
// entry in use is never pruned for its age.
func TestReadCacheMarksUse(t *testing.T) {
	home := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", home)
	t.Setenv("HOME", home)
	dir := cacheDir()
	if dir == "" {
		t.Skip("no user cache directory")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "k.code")
	if err := os.WriteFile(p, []byte("code"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * cacheUnused)
	if err := os.Chtimes(p, old, old); err != nil {
		t.Fatal(err)
	}
	if got := readCache("k"); string(got) != "code" {
		t.Fatalf("read %q", got)
	}
	pruneCache(dir, time.Now())
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("an entry just read was pruned: %v", err)
	}
}
