//go:build linux

package native_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/testenv"
	"github.com/codecell-dev/codecell/tier/native"
)

// writeSdist writes a source distribution whose setup.py, were it ever
// run, would print a line and write marker.
func writeSdist(t *testing.T, dir, name, version, marker string) {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	root := name + "-" + version + "/"
	for _, f := range []struct{ path, data string }{
		{root + "PKG-INFO", "Metadata-Version: 2.1\nName: " + name + "\nVersion: " + version + "\n"},
		{root + "setup.py", fmt.Sprintf("print('SETUP.PY RAN')\nopen(%q, 'w').write('ran')\nfrom setuptools import setup\nsetup(name=%q, version=%q)\n", marker, name, version)},
	} {
		tw.WriteHeader(&tar.Header{Name: f.path, Mode: 0o644, Size: int64(len(f.data))})
		tw.Write([]byte(f.data))
	}
	tw.Close()
	gz.Close()
	if err := os.WriteFile(filepath.Join(dir, name+"-"+version+".tar.gz"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func packagesEngine(t *testing.T, src codecell.PackageSources) *codecell.Engine {
	testenv.RequireNative(t, native.Default.Probe)
	tier := &native.Tier{Pool: -1}
	t.Cleanup(func() { tier.Close() })
	if src.CacheDir == "" {
		src.CacheDir = filepath.Join(testenv.ReachableDir(t), "cache")
	}
	return &codecell.Engine{Tier: native.Name, Tiers: []codecell.Tier{tier}, Packages: src}
}

func runWith(t *testing.T, e *codecell.Engine, lang, code string, pkgs codecell.Packages) *codecell.Result {
	t.Helper()
	res, err := e.Run(context.Background(), &codecell.Exec{Language: lang, Code: code, Packages: pkgs})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// A Python package from a wheel directory is installed once, in a sandbox
// with no network, and imported by runs that see it read-only; the second
// run takes it from the cache.
func TestPackagesPythonWheels(t *testing.T) {
	wheels := testenv.ReachableDir(t)
	testenv.Wheel(t, wheels, "ccpkgdemo", "1.0.0", "VALUE = 42\n")
	e := packagesEngine(t, codecell.PackageSources{PythonWheels: wheels})
	pkgs := codecell.Packages{"python": {"CCPkgDemo==1.0.0"}}
	code := "import ccpkgdemo, sys\nprint(ccpkgdemo.__file__)\nccpkgdemo.VALUE"

	first := runWith(t, e, "python", code, pkgs)
	if first.Status != codecell.StatusSuccess || string(first.Value) != "42" {
		t.Fatalf("first run: %s %s %+v\n%s", first.Status, first.Value, first.Error, first.Stderr)
	}
	rep, ok := first.Packages["python"]
	if !ok || rep.Cached || len(rep.List) != 1 || rep.List[0] != "ccpkgdemo==1.0.0" {
		t.Fatalf("first run's packages: %+v", first.Packages)
	}
	if !strings.HasPrefix(first.Stdout, "/opt/codecell/packages/python/ccpkgdemo/") {
		t.Errorf("imported from %q", first.Stdout)
	}

	second := runWith(t, e, "python", code+"\n", pkgs)
	if second.Status != codecell.StatusSuccess || string(second.Value) != "42" {
		t.Fatalf("second run: %s %s %+v\n%s", second.Status, second.Value, second.Error, second.Stderr)
	}
	if rep2 := second.Packages["python"]; !rep2.Cached {
		t.Fatalf("second run did not take the cache: %+v", second.Packages)
	} else {
		t.Logf("install %d ms, from the cache %d ms (%.0fx)", rep.InstallMS, rep2.InstallMS, float64(rep.InstallMS)/float64(max(rep2.InstallMS, 1)))
	}

	// What the runs see is read-only.
	w := runWith(t, e, "python", "open('/opt/codecell/packages/python/ccpkgdemo/__init__.py', 'w').write('VALUE = 0')", pkgs)
	if w.Status != codecell.StatusFailure || !strings.Contains(w.Stderr, "Read-only file system") {
		t.Fatalf("writing the cache: %s %q", w.Status, w.Stderr)
	}
	// A program that asks for none sees none.
	none := runWith(t, e, "python", "import ccpkgdemo", nil)
	if none.Status != codecell.StatusFailure || !strings.Contains(none.Stderr, "No module named 'ccpkgdemo'") {
		t.Fatalf("without packages: %s %q", none.Status, none.Stderr)
	}
	// What the cache costs a run: its own sandbox, against a run without
	// packages on the same tier.
	plain := runWith(t, e, "python", "42", nil)
	again := runWith(t, e, "python", "import ccpkgdemo\nccpkgdemo.VALUE", pkgs)
	t.Logf("a run with cached packages took %d ms, one without %d ms (%.1fx; this tier keeps no sandboxes ready, so both build theirs)", again.DurationMS, plain.DurationMS,
		float64(again.DurationMS)/float64(max(plain.DurationMS, 1)))
}

// Two runs asking at once for a list nobody installed yet install it once.
func TestPackagesInstallOnce(t *testing.T) {
	wheels := testenv.ReachableDir(t)
	testenv.Wheel(t, wheels, "ccpkgdemo", "1.0.0", "VALUE = 42\n")
	e := packagesEngine(t, codecell.PackageSources{PythonWheels: wheels})
	var wg sync.WaitGroup
	results := make([]*codecell.Result, 2)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := e.Run(context.Background(), &codecell.Exec{Language: "python", Code: "import ccpkgdemo\nccpkgdemo.VALUE",
				Packages: codecell.Packages{"py": {"ccpkgdemo"}}})
			if err != nil {
				t.Error(err)
				return
			}
			results[i] = res
		}()
	}
	wg.Wait()
	installed := 0
	for _, res := range results {
		if res == nil || res.Status != codecell.StatusSuccess {
			t.Fatalf("%+v", res)
		}
		if !res.Packages["python"].Cached {
			installed++
		}
	}
	if installed != 1 {
		t.Fatalf("installed %d times", installed)
	}
}

// A package that cannot be installed is a blocked Result with pip's
// words; a package that only comes as source, whose setup.py would run
// code, is refused (wheels only), and its setup.py never runs, on the
// host or in the sandbox.
func TestPackagesPythonRefused(t *testing.T) {
	wheels := testenv.ReachableDir(t)
	marker := filepath.Join(t.TempDir(), "setup-ran")
	writeSdist(t, wheels, "ccpkgsource", "1.0.0", marker)
	e := packagesEngine(t, codecell.PackageSources{PythonWheels: wheels})

	res := runWith(t, e, "python", "1", codecell.Packages{"python": {"ccpkg-no-such==1.0"}})
	if res.Status != codecell.StatusBlocked || res.Error == nil || res.Error.Code != codecell.CodePackageInstallFailed ||
		!strings.Contains(res.Error.Message, "No matching distribution found for ccpkg-no-such==1.0") {
		t.Fatalf("missing package: %s %+v", res.Status, res.Error)
	}
	res = runWith(t, e, "python", "1", codecell.Packages{"python": {"ccpkgsource==1.0.0"}})
	if res.Status != codecell.StatusBlocked || res.Error == nil || res.Error.Code != codecell.CodePackageInstallFailed {
		t.Fatalf("source-only package: %s %+v", res.Status, res.Error)
	}
	if strings.Contains(res.Error.Message, "SETUP.PY RAN") {
		t.Fatalf("setup.py ran: %s", res.Error.Message)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("setup.py wrote its marker on the host")
	}
	t.Logf("refused: %s", res.Error.Message)

	// Not a requirement at all: refused before anything runs.
	res = runWith(t, e, "python", "1", codecell.Packages{"python": {"--index-url=https://evil.test/simple"}})
	if res.Status != codecell.StatusBlocked || res.Error.Code != codecell.CodeInvalidRequest {
		t.Fatalf("option as a package: %s %+v", res.Status, res.Error)
	}
}

// npmReachable skips (or fails, with CODECELL_REQUIRE_UPSTREAM=1) when
// the npm registry cannot be reached from this host.
func npmReachable(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodHead, "https://registry.npmjs.org/lodash", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		testenv.Missing(t, "CODECELL_REQUIRE_UPSTREAM")("the npm registry is not reachable: %v", err)
		return
	}
	resp.Body.Close()
}

// privateRanges are the addresses name resolves to on this host that the
// network policy refuses unless listed (a registry mirror on a private or
// reserved address), each as a range of one.
func privateRanges(t *testing.T, name string) []string {
	addrs, err := net.DefaultResolver.LookupNetIP(context.Background(), "ip", name)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range addrs {
		a = a.Unmap()
		if !a.IsGlobalUnicast() || a.IsPrivate() || !publicNet(a) {
			out = append(out, netip.PrefixFrom(a, a.BitLen()).String())
		}
	}
	return out
}

// publicNet is false for the documentation and benchmarking ranges,
// which IsGlobalUnicast counts as global.
func publicNet(a netip.Addr) bool {
	for _, p := range []string{"192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "198.18.0.0/15", "100.64.0.0/10", "2001:db8::/32"} {
		if netip.MustParsePrefix(p).Contains(a) {
			return false
		}
	}
	return true
}

// lodash comes from the npm registry, installed with --ignore-scripts in
// a sandbox that reaches only the registry, and programs require it (and
// import it); a package the registry does not have is a blocked Result
// with npm's words.
func TestPackagesJavaScriptRegistry(t *testing.T) {
	npmReachable(t)
	e := packagesEngine(t, codecell.PackageSources{Network: privateRanges(t, "registry.npmjs.org")})
	pkgs := codecell.Packages{"javascript": {"lodash@4.17.21"}}
	res := runWith(t, e, "javascript", "const _ = require('lodash');\nconsole.log(require.resolve('lodash'));\n[_.VERSION, _.chunk([1, 2, 3], 2)]", pkgs)
	if res.Status != codecell.StatusSuccess || string(res.Value) != `["4.17.21",[[1,2],[3]]]` {
		t.Fatalf("%s %s %+v\n%s", res.Status, res.Value, res.Error, res.Stderr)
	}
	if !strings.HasPrefix(res.Stdout, "/opt/codecell/packages/node/node_modules/lodash/") {
		t.Errorf("resolved to %q", res.Stdout)
	}
	first := res.Packages["javascript"]
	if first.Cached {
		t.Errorf("first run: %+v", res.Packages)
	}
	// TypeScript takes JavaScript's packages, and import works too.
	res = runWith(t, e, "typescript", "import _ from 'lodash';\nconst n: number = _.sum([1, 2, 3]);\nn", pkgs)
	if res.Status != codecell.StatusSuccess || string(res.Value) != "6" {
		t.Fatalf("typescript: %s %s %+v\n%s", res.Status, res.Value, res.Error, res.Stderr)
	}
	if rep := res.Packages["javascript"]; !rep.Cached {
		t.Errorf("second run: %+v", res.Packages)
	} else {
		t.Logf("install %d ms, from the cache %d ms", first.InstallMS, rep.InstallMS)
	}

	res = runWith(t, e, "javascript", "1", codecell.Packages{"javascript": {"codecell-no-such-package-7f3a9c@1.0.0"}})
	if res.Status != codecell.StatusBlocked || res.Error == nil || res.Error.Code != codecell.CodePackageInstallFailed ||
		!strings.Contains(res.Error.Message, "404") {
		t.Fatalf("missing package: %s %+v", res.Status, res.Error)
	}
	t.Logf("refused: %s", res.Error.Message)
}

// A live session's first cell whose packages cannot be installed is a
// blocked Result with the installer's words, and starts no interpreter:
// the next cell, without them, runs.
func TestPackagesFailInLiveSession(t *testing.T) {
	e := packagesEngine(t, codecell.PackageSources{PythonWheels: testenv.ReachableDir(t)})
	live := e.NewLive()
	t.Cleanup(func() { live.Close() })
	ws := t.TempDir()
	res, err := e.Run(context.Background(), &codecell.Exec{Language: "python", Code: "1", Workspace: ws, Live: live,
		Packages: codecell.Packages{"python": {"humanize"}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != codecell.StatusBlocked || res.Error == nil || res.Error.Code != codecell.CodePackageInstallFailed || len(live.Status()) != 0 {
		t.Fatalf("%s %+v, interpreters %+v", res.Status, res.Error, live.Status())
	}
	res, err = e.Run(context.Background(), &codecell.Exec{Language: "python", Code: "2", Workspace: ws, Live: live})
	if err != nil || res.Status != codecell.StatusSuccess || string(res.Value) != "2" {
		t.Fatalf("the next cell: %v %+v", err, res)
	}
}
