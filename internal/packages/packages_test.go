package packages

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func TestNormalizePython(t *testing.T) {
	got, err := NormalizePython([]string{"Humanize == 4.9.0", "zope.interface>=6,<7", "requests[socks]", "humanize==4.9.0", "Foo_Bar.baz"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"foo-bar-baz", "humanize==4.9.0", "requests[socks]", "zope-interface>=6,<7"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	for _, bad := range []string{"", "-r requirements.txt", "--index-url=https://evil.test/simple", "pkg @ https://evil.test/p.whl",
		"./local/dir", "/abs/path.whl", "git+https://x/y", "pkg; os_name=='nt'", "pkg==1.0 --hash=x", "a b"} {
		if _, err := NormalizePython([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestNormalizeNPM(t *testing.T) {
	got, err := NormalizeNPM([]string{"lodash@4.17.21", "@types/node@^20", "left-pad", "lodash@4.17.21"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"@types/node@^20", "left-pad", "lodash@4.17.21"}; !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	for _, bad := range []string{"", "--registry=https://evil.test", "git+https://x/y.git", "file:../x", "https://evil.test/x.tgz",
		"user/repo", "Lodash", "lodash@file:../x", "../x", "@scope"} {
		if _, err := NormalizeNPM([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, err := NormalizeNPM(make([]string, MaxSpecs+1)); err == nil {
		t.Error("an over-long list accepted")
	}
}

// Whatever a client sends, a list that passes is one that neither pip nor
// npm can read as an option, a path or a URL.
func FuzzNormalize(f *testing.F) {
	for _, s := range []string{"humanize==4.9.0", "lodash@4.17.21", "@types/node@^20", "--x", "a @ https://x", "requests[socks]>=2,<3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, norm := range []func([]string) ([]string, error){NormalizePython, NormalizeNPM} {
			out, err := norm([]string{s})
			if err != nil {
				continue
			}
			n := out[0]
			if strings.HasPrefix(n, "-") || strings.ContainsAny(n, "/:'\"\\$`;\n") && !strings.HasPrefix(n, "@") {
				t.Fatalf("%q normalised to %q", s, n)
			}
			if strings.Contains(n, "://") {
				t.Fatalf("%q normalised to %q", s, n)
			}
			// A path is one with "." or ".." for an element: ".." inside a
			// name ("@0../0", a scope "0..") names no directory above.
			for _, el := range strings.Split(n, "/") {
				if el == "." || el == ".." {
					t.Fatalf("%q normalised to %q, which holds the path element %q", s, n, el)
				}
			}
		}
	})
}

// Two installs of one key at once run the install once; the entry
// appears whole, readable by all; a failed install leaves nothing.
func TestCacheInstallsOnce(t *testing.T) {
	c := &Cache{Dir: filepath.Join(t.TempDir(), "cache")}
	var runs atomic.Int32
	started := make(chan struct{})
	release := make(chan struct{})
	install := func(ctx context.Context, tmp string) (string, error) {
		if runs.Add(1) == 1 {
			close(started)
		}
		<-release
		out := filepath.Join(tmp, "python")
		if err := os.MkdirAll(filepath.Join(out, "pkg"), 0o700); err != nil {
			return "", err
		}
		return out, os.WriteFile(filepath.Join(out, "pkg", "__init__.py"), []byte("X = 1\n"), 0o600)
	}
	var wg sync.WaitGroup
	cached := make([]bool, 2)
	for i := range cached {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dir, c, err := c.Get(context.Background(), "k1", install)
			if err != nil || filepath.Base(dir) != "k1" {
				t.Error(dir, err)
			}
			cached[i] = c
		}()
	}
	<-started
	close(release)
	wg.Wait()
	if runs.Load() != 1 || cached[0] == cached[1] {
		t.Fatalf("%d installs, cached %v", runs.Load(), cached)
	}
	info, err := os.Stat(filepath.Join(c.Dir, "k1", "pkg", "__init__.py"))
	if err != nil || info.Mode().Perm() != 0o644 {
		t.Fatalf("%v %v", info, err)
	}

	failed := errors.New("no such package")
	_, _, err = c.Get(context.Background(), "k2", func(ctx context.Context, tmp string) (string, error) { return "", failed })
	if !errors.Is(err, failed) {
		t.Fatal(err)
	}
	left, _ := filepath.Glob(filepath.Join(c.Dir, "*k2*"))
	for _, l := range left {
		if !strings.HasSuffix(l, ".lock") {
			t.Fatalf("a failed install left %s", l)
		}
	}
}
