package native_test

import (
	"context"
	"testing"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/testenv"
)

// A live session's interpreter starts with the packages its first cell
// asks for (with the session's and the configuration's) and keeps them:
// later cells import them without asking; a cell that asks for one the
// interpreter lacks is refused, the session kept; after a restart, a cell
// brings the new list.
func TestPackagesLiveSession(t *testing.T) {
	wheels := testenv.ReachableDir(t)
	testenv.Wheel(t, wheels, "ccpkglive", "1.0.0", "VALUE = 5\n")
	testenv.Wheel(t, wheels, "ccpkgother", "1.0.0", "VALUE = 6\n")
	e := packagesEngine(t, codecell.PackageSources{PythonWheels: wheels})
	live := e.NewLive()
	defer live.Close()
	ws := t.TempDir()
	cell := func(code string, pkgs codecell.Packages) *codecell.Result {
		t.Helper()
		res, err := e.Run(context.Background(), &codecell.Exec{Language: "python", Code: code, Workspace: ws, Live: live, Packages: pkgs})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := cell("import ccpkglive\nn = ccpkglive.VALUE\nn", codecell.Packages{"python": {"ccpkglive==1.0.0"}})
	if res.Status != codecell.StatusSuccess || string(res.Value) != "5" || res.Packages["python"].List[0] != "ccpkglive==1.0.0" {
		t.Fatalf("first cell: %s %s %+v %q %+v", res.Status, res.Value, res.Error, res.Stderr, res.Packages)
	}
	if res = cell("import ccpkglive\nn + ccpkglive.VALUE", nil); string(res.Value) != "10" {
		t.Fatalf("a later cell: %s %+v %q", res.Value, res.Error, res.Stderr)
	}
	res = cell("import ccpkgother", codecell.Packages{"python": {"ccpkgother==1.0.0"}})
	if res.Status != codecell.StatusBlocked || res.Error == nil || res.Error.Code != codecell.CodePolicyUnsupported || res.SessionState != codecell.SessionKept {
		t.Fatalf("a cell asking for another package: %s %+v %q", res.Status, res.Error, res.SessionState)
	}
	if res = cell("n", nil); string(res.Value) != "5" {
		t.Fatalf("after the refusal: %s", res.Value)
	}
	live.Restart()
	res = cell("import ccpkgother\nccpkgother.VALUE", codecell.Packages{"python": {"ccpkgother==1.0.0"}})
	if res.Status != codecell.StatusSuccess || string(res.Value) != "6" {
		t.Fatalf("after a restart: %s %s %+v %q", res.Status, res.Value, res.Error, res.Stderr)
	}
}
