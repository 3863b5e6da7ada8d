package codecell_test

import (
	"context"
	"testing"

	"github.com/codecell-dev/codecell"
)

// The local tier cannot show a program its packages read-only: an Exec
// that asks for some there is refused, and says where to run it; one that
// asks for another language's packages runs.
func TestPackagesRefusedOnLocal(t *testing.T) {
	e := &codecell.Engine{Tier: "local"}
	res, err := e.Run(context.Background(), &codecell.Exec{Language: "python", Code: "1", Packages: codecell.Packages{"python": {"humanize==4.9.0"}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != codecell.StatusBlocked || res.Error.Code != codecell.CodePolicyUnsupported || len(res.Error.Hints) == 0 {
		t.Fatalf("%s %+v", res.Status, res.Error)
	}
	res, err = e.Run(context.Background(), &codecell.Exec{Language: "python", Code: "6 * 7", Packages: codecell.Packages{"javascript": {"lodash"}}})
	if err != nil || res.Status != codecell.StatusSuccess || string(res.Value) != "42" || res.Packages != nil {
		t.Fatalf("%v %+v", err, res)
	}
}

func TestPackagesWith(t *testing.T) {
	got := codecell.Packages{"python": {"a"}}.With(codecell.Packages{"python": {"b"}, "js": {"c"}})
	if len(got["python"]) != 2 || got["python"][1] != "b" || got["js"][0] != "c" {
		t.Fatalf("%v", got)
	}
}
