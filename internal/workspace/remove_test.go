package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestRemove(t *testing.T) {
	bothResolvers(t, func(t *testing.T) {
		_, ws, outside, r := setup(t)
		marker := filepath.Join(outside, "marker")
		must(t, os.WriteFile(marker, []byte("outside"), 0o644))
		must(t, os.MkdirAll(filepath.Join(ws, "tree/a/b"), 0o755))
		must(t, os.WriteFile(filepath.Join(ws, "tree/a/b/f"), []byte("x"), 0o644))
		must(t, os.Symlink(outside, filepath.Join(ws, "tree/a/out")))
		must(t, os.Symlink(marker, filepath.Join(ws, "m")))
		must(t, os.Symlink(outside, filepath.Join(ws, "dirlink")))
		must(t, os.Mkdir(filepath.Join(ws, "empty"), 0o755))
		must(t, os.WriteFile(filepath.Join(ws, "file"), []byte("x"), 0o644))

		for _, c := range []struct {
			rel       string
			recursive bool
			want      error
		}{
			{"", true, ErrBadPath},
			{"../outside/marker", false, ErrBadPath},
			{"dirlink/marker", false, ErrSymlink},
			{"nothing", false, ErrNotFound},
			{"tree", false, ErrNotEmpty},
		} {
			if err := r.Remove(c.rel, c.recursive); !errors.Is(err, c.want) {
				t.Errorf("Remove(%q, %v) = %v, want %v", c.rel, c.recursive, err, c.want)
			}
		}
		for _, c := range []struct {
			rel       string
			recursive bool
		}{{"m", false}, {"dirlink", true}, {"empty", false}, {"file", false}, {"tree", true}} {
			if err := r.Remove(c.rel, c.recursive); err != nil {
				t.Errorf("Remove(%q, %v): %v", c.rel, c.recursive, err)
			}
			if _, err := os.Lstat(filepath.Join(ws, c.rel)); !os.IsNotExist(err) {
				t.Errorf("%s is still there: %v", c.rel, err)
			}
		}
		// The links are gone; what they pointed to is not.
		if b, err := os.ReadFile(marker); err != nil || string(b) != "outside" {
			t.Fatalf("the marker outside: %q %v", b, err)
		}
		if entries, _ := os.ReadDir(outside); len(entries) != 1 {
			t.Fatalf("the outside directory holds %v", entries)
		}
		if entries, _ := os.ReadDir(ws); len(entries) != 0 {
			t.Fatalf("the workspace still holds %v", entries)
		}
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
