package docker_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/testenv"
	"github.com/codecell-dev/codecell/tier/docker"
	"github.com/codecell-dev/codecell/tier/native"
)

// Packages on the docker tier: installed once on the host, in the native
// tier's sandbox with no network (from a wheel directory here), and bound
// read-only into each container that asks for them; the second run takes
// them from the cache, and a program cannot change them.
func TestPackages(t *testing.T) {
	tier := newTier(t)
	testenv.RequireNative(t, native.Default.Probe)
	wheels := testenv.ReachableDir(t)
	testenv.Wheel(t, wheels, "ccpkgdocker", "1.0.0", "VALUE = 7\n")
	eng := &codecell.Engine{Tiers: []codecell.Tier{tier}, Packages: codecell.PackageSources{
		PythonWheels: wheels, CacheDir: filepath.Join(testenv.ReachableDir(t), "cache")}}
	pkgs := codecell.Packages{"python": {"ccpkgdocker==1.0.0"}}
	exec := func(code string, pkgs codecell.Packages) *codecell.Result {
		t.Helper()
		res, err := eng.Run(context.Background(), &codecell.Exec{Tier: docker.Name, Language: "python", Code: code, Packages: pkgs})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	code := "import ccpkgdocker\nprint(ccpkgdocker.__file__)\nccpkgdocker.VALUE"
	for i, cached := range []bool{false, true} {
		res := exec(code, pkgs)
		if res.Status != codecell.StatusSuccess || string(res.Value) != "7" || res.Tier != docker.Name {
			t.Fatalf("run %d: %s %s %+v\n%s", i, res.Status, res.Value, res.Error, res.Stderr)
		}
		if rep := res.Packages["python"]; rep.Cached != cached {
			t.Errorf("run %d: cached %v, want %v", i, rep.Cached, cached)
		}
		if !strings.HasPrefix(res.Stdout, "/opt/codecell/packages/python/ccpkgdocker/") {
			t.Errorf("imported from %q", res.Stdout)
		}
	}
	w := exec("open('/opt/codecell/packages/python/ccpkgdocker/__init__.py', 'w').write('VALUE = 0')", pkgs)
	if w.Status != codecell.StatusFailure || !strings.Contains(w.Stderr, "Read-only file system") {
		t.Fatalf("writing the packages: %s %q", w.Status, w.Stderr)
	}
	if none := exec("import ccpkgdocker", nil); none.Status != codecell.StatusFailure || !strings.Contains(none.Stderr, "No module named 'ccpkgdocker'") {
		t.Fatalf("without packages: %s %q", none.Status, none.Stderr)
	}
}

// Only an engine on this host can bind the host's package cache.
func TestPackagesNeedLocalEngine(t *testing.T) {
	for host, want := range map[string]bool{"unix:///run/podman/podman.sock": true, "tcp://192.0.2.1:2375": false, "ssh://user@host": false} {
		if got := (&docker.Tier{Host: host}).MountsReadOnly(); got != want {
			t.Errorf("%s: MountsReadOnly %v, want %v", host, got, want)
		}
	}
}
