package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestBuildMCPServer: test binaries that build the test MCP server at once
// share one build in the cache, made there under a name of its own and
// renamed into place, and old builds go; nothing goes to the temporary
// directory.
func TestBuildMCPServer(t *testing.T) {
	// The go command's own cache stays where it is: a new one would build
	// the server's dependencies again.
	goCache, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	tmp, cache := t.TempDir(), t.TempDir()
	t.Setenv("GOCACHE", strings.TrimSpace(string(goCache)))
	t.Setenv("TMPDIR", tmp)
	t.Setenv("XDG_CACHE_HOME", cache)
	dir, err := CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(dir, "mcp-server-0000000000000000")
	halfDone := filepath.Join(dir, ".mcp-server-0000000000000000-1.tmp")
	for _, p := range []string{old, halfDone} {
		if err := os.WriteFile(p, []byte("x"), 0o700); err != nil {
			t.Fatal(err)
		}
		then := time.Now().Add(-mcpServerAge - time.Hour)
		if err := os.Chtimes(p, then, then); err != nil {
			t.Fatal(err)
		}
	}
	recent := filepath.Join(dir, "mcp-server-1111111111111111")
	if err := os.WriteFile(recent, []byte("x"), 0o700); err != nil {
		t.Fatal(err)
	}

	const n = 3
	paths, errs := make([]string, n), make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			paths[i], errs[i] = BuildMCPServer()
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if paths[i] != paths[0] || filepath.Dir(paths[i]) != dir {
			t.Fatalf("builds at once gave %v, want one path in %s", paths, dir)
		}
	}
	if info, err := os.Stat(paths[0]); err != nil || info.Mode()&0o100 == 0 {
		t.Fatalf("the server %s: %v %v", paths[0], info, err)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{filepath.Base(recent), filepath.Base(paths[0])}; len(names) != 2 || !(names[0] == want[0] && names[1] == want[1] || names[0] == want[1] && names[1] == want[0]) {
		t.Errorf("the cache holds %v, want %v", names, want)
	}
	if again, err := BuildMCPServer(); err != nil || again != paths[0] {
		t.Errorf("built again: %s, %v", again, err)
	}
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		t.Errorf("the temporary directory holds %v", left)
	}
}
