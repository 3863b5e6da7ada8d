package main

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/testenv"
	"github.com/codecell-dev/codecell/tier/native"
)

// codecell run --package installs the program's packages from the
// configuration's wheel directory, into its cache.
func TestRunWithPackages(t *testing.T) {
	testenv.RequireNative(t, native.Default.Probe)
	wheels := testenv.ReachableDir(t)
	testenv.Wheel(t, wheels, "ccpkgcli", "1.0.0", "VALUE = 42\n")
	cache := filepath.Join(testenv.ReachableDir(t), "cache")
	b, _ := json.Marshal(map[string]any{"packages_python_wheels": wheels, "packages_cache_dir": cache})
	cfg := writeFile(t, "codecell.json", string(b))
	exit, stdout, stderr := cli(t, "import ccpkgcli\nccpkgcli.VALUE", "run", "--tier", "native", "--json", "--config", cfg,
		"--lang", "python", "--package", "ccpkgcli==1.0.0", "--package", "javascript:lodash", "-")
	var res codecell.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || exit != 0 {
		t.Fatalf("exit %d %v\n%s\n%s", exit, err, stdout, stderr)
	}
	if string(res.Value) != "42" || len(res.Packages) != 1 || res.Packages["python"].List[0] != "ccpkgcli==1.0.0" {
		t.Fatalf("%s %+v", res.Value, res.Packages)
	}
}
