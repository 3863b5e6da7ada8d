package server_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/api"
	"github.com/codecell-dev/codecell/internal/testenv"
	"github.com/codecell-dev/codecell/tier/native"
)

// A session's packages reach each of its executions, with the
// execution's own; an execution outside a session asks for its own; the
// Result says what it had; a list that is not one is a 400.
func TestPackagesOverREST(t *testing.T) {
	testenv.RequireNative(t, native.Default.Probe)
	wheels := testenv.ReachableDir(t)
	testenv.Wheel(t, wheels, "ccpkgone", "1.0.0", "VALUE = 1\n")
	testenv.Wheel(t, wheels, "ccpkgtwo", "2.0.0", "VALUE = 2\n")
	tier := &native.Tier{Pool: -1}
	t.Cleanup(func() { tier.Close() })
	eng := &codecell.Engine{Tier: "native", Tiers: []codecell.Tier{tier},
		Packages: codecell.PackageSources{PythonWheels: wheels, CacheDir: filepath.Join(testenv.ReachableDir(t), "cache")}}
	f := newFixtureOn(t, eng, nil)
	ctx := context.Background()

	ses := f.session(t, api.SessionSpec{Packages: codecell.Packages{"python": {"ccpkgone==1.0.0"}}})
	if ses.Packages["python"][0] != "ccpkgone==1.0.0" {
		t.Fatalf("the session's packages: %+v", ses)
	}
	res, err := f.c.Execute(ctx, ses.ID, api.Execution{Language: "python", Code: "import ccpkgone, ccpkgtwo\nccpkgone.VALUE + ccpkgtwo.VALUE",
		Packages: codecell.Packages{"python": {"ccpkgtwo"}}})
	if err != nil || res.Status != codecell.StatusSuccess || string(res.Value) != "3" {
		t.Fatalf("%v %+v", err, res)
	}
	if got := res.Packages["python"].List; len(got) != 2 || got[0] != "ccpkgone==1.0.0" || got[1] != "ccpkgtwo" {
		t.Fatalf("packages %+v", res.Packages)
	}
	res, err = f.c.Execute(ctx, "", api.Execution{Language: "python", Code: "import ccpkgone\nccpkgone.VALUE",
		Packages: codecell.Packages{"python": {"ccpkgone==1.0.0"}}})
	if err != nil || res.Status != codecell.StatusSuccess || string(res.Value) != "1" || res.Packages["python"].Cached {
		t.Fatalf("%v %+v", err, res)
	}
	res, err = f.c.Execute(ctx, "", api.Execution{Language: "python", Code: "1", Packages: codecell.Packages{"python": {"ccpkg-missing"}}})
	if err != nil || res.Status != codecell.StatusBlocked || res.Error.Code != codecell.CodePackageInstallFailed ||
		!strings.Contains(res.Error.Message, "No matching distribution found for ccpkg-missing") {
		t.Fatalf("%v %+v", err, res)
	}
	status, _, body := f.raw(t, "POST", "/v1/sessions", strings.NewReader(`{"packages":{"python":["-e ."]}}`), "Content-Type", "application/json")
	if status != 400 || envelopeOf(t, body).Code != codecell.CodeInvalidRequest {
		t.Fatalf("%d %s", status, body)
	}
}
