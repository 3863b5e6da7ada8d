//go:build linux

package native

import (
	"maps"
	"testing"

	"github.com/codecell-dev/codecell"
)

// TestDemand: the pool's sandboxes are shared among the interpreters
// recent jobs asked for, in proportion, each asked-for one at least one
// while there is room; the one most short of its share is warmed first.
func TestDemand(t *testing.T) {
	job := func(key string) *codecell.Job {
		if key == "" {
			return &codecell.Job{Language: "sh"}
		}
		return &codecell.Job{Language: key, Warm: &codecell.WarmStart{Key: key, Message: []byte("the job's own")}}
	}
	var d demand
	for _, k := range []string{"py", "py", "py", "node", ""} {
		d.note(k, job(k), 4)
	}
	if got, want := d.targets(4), map[string]int{"py": 2, "node": 1}; !maps.Equal(got, want) {
		t.Errorf("targets of 4 = %v, want %v", got, want)
	}
	if got, want := d.targets(1), map[string]int{"py": 1, "node": 0}; !maps.Equal(got, want) {
		t.Errorf("targets of 1 = %v, want %v", got, want)
	}
	if d.specs["py"].warm.Message != nil {
		t.Error("the pool kept a job's message")
	}
	warmed := func(key string) *sandbox { return &sandbox{warm: &warmProc{key: key}} }
	plain := &sandbox{}
	if k, _ := d.lacking([]*sandbox{plain, plain, plain, plain}); k != "py" {
		t.Errorf("with none warm, %q is warmed first, want py", k)
	}
	if k, _ := d.lacking([]*sandbox{warmed("py"), warmed("py"), plain, plain}); k != "node" {
		t.Errorf("with py at its share, %q is warmed, want node", k)
	}
	if k, ds := d.lacking([]*sandbox{warmed("py"), warmed("py"), warmed("node"), plain}); ds != nil {
		t.Errorf("with every share met, %q is warmed", k)
	}
	// A key that falls out of the recent jobs is forgotten.
	for range 4*4 + 4 {
		d.note("", job(""), 4)
	}
	if len(d.specs) != 0 || len(d.targets(4)) != 0 {
		t.Errorf("old demand kept: specs %v, targets %v", d.specs, d.targets(4))
	}
}
