package native_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/codecell-dev/codecell/internal/spawnwatch"
	"github.com/codecell-dev/codecell/internal/testenv"
	"github.com/codecell-dev/codecell/tier/native"
)

// watchSpawns records the init pid of each sandbox tier builds.
func watchSpawns(t *testing.T, tier *native.Tier) func() []int {
	var mu sync.Mutex
	var pids []int
	stop := spawnwatch.Watch(tier, func(pid int, _ []string) {
		mu.Lock()
		pids = append(pids, pid)
		mu.Unlock()
	})
	t.Cleanup(stop)
	return func() []int {
		mu.Lock()
		defer mu.Unlock()
		return append([]int{}, pids...)
	}
}

// A sandbox built ahead is the next run's, when the run can take it, and
// stands for the probe; one no run took is closed with the tier.
func TestBuildAhead(t *testing.T) {
	testenv.RequireNative(t, native.Default.Probe)
	ctx := context.Background()
	run := func(tier *native.Tier, workspace int64) {
		t.Helper()
		var out bytes.Buffer
		job := shJob(t, tier, "echo 1\n", &out)
		if workspace > 0 {
			job.Limits.Workspace = workspace
		}
		if o, err := tier.Run(ctx, job); err != nil || out.String() != "1\n" {
			t.Fatalf("%v, %+v, stdout %q", err, o, out.String())
		}
	}

	tier := &native.Tier{Pool: -1}
	t.Cleanup(func() { tier.Close() })
	spawned := watchSpawns(t, tier)
	tier.BuildAhead("/proc/self/exe")
	if err := tier.Probe(); err != nil {
		t.Fatal(err)
	}
	if got := spawned(); len(got) != 1 {
		t.Fatalf("%d sandboxes built ahead, want 1", len(got))
	}
	run(tier, 0)
	if got := spawned(); len(got) != 1 {
		t.Errorf("the first run built a sandbox of its own (%d built), not taking the one built ahead", len(got))
	}
	run(tier, 0)
	if got := spawned(); len(got) != 2 {
		t.Errorf("the second run: %d sandboxes built, want 2 (one ahead, one for it)", len(got))
	}

	// A run that cannot take it (its own workspace size) builds its own,
	// and Close ends the one built ahead.
	other := &native.Tier{Pool: -1}
	spawnedOther := watchSpawns(t, other)
	other.BuildAhead("/proc/self/exe")
	if err := other.Probe(); err != nil {
		t.Fatal(err)
	}
	ahead := spawnedOther()
	if len(ahead) != 1 {
		t.Fatalf("%d sandboxes built ahead, want 1", len(ahead))
	}
	run(other, 64<<20)
	if got := spawnedOther(); len(got) != 2 {
		t.Errorf("a run with its own workspace size: %d sandboxes built, want 2", len(got))
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", ahead[0])); err != nil {
		t.Fatalf("the sandbox built ahead ended before Close: %v", err)
	}
	other.Close()
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", ahead[0])); err == nil {
		t.Errorf("the sandbox built ahead (init %d) outlived Close", ahead[0])
	}
}
