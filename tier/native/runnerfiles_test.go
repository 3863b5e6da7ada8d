package native_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/spawnwatch"
	"github.com/codecell-dev/codecell/internal/testenv"
	"github.com/codecell-dev/codecell/tier/native"
)

// shJob is a job for tier.Run itself, as the Engine would make it: a
// shell script from the runner's files, in a fresh workspace.
func shJob(t *testing.T, tier *native.Tier, script string, stdout *bytes.Buffer) *codecell.Job {
	ws := t.TempDir()
	view := tier.View(ws, "")
	return &codecell.Job{
		ID:          "job",
		Language:    "sh",
		Argv:        []string{"/bin/sh", view.Runner + "/src/main.sh"},
		Env:         []string{"PATH=" + view.Runner + "/bin:/usr/bin:/bin", "HOME=" + view.Workspace},
		Workspace:   ws,
		View:        view,
		RunnerFiles: map[string][]byte{"src/main.sh": []byte(script)},
		Stdout:      stdout,
		Stderr:      &bytes.Buffer{},
		Limits:      codecell.DefaultLimits,
		InitPath:    "/proc/self/exe",
	}
}

// settle waits until the tier's pool and fork servers hold all they keep.
func settle(t *testing.T, tier *native.Tier) {
	deadline := time.Now().Add(30 * time.Second)
	for !tier.Settled() {
		if time.Now().After(deadline) {
			t.Fatal("the pool did not settle in 30 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// A job that gives its runner as a host directory has it copied whole,
// codecell-tool included, over the one a sandbox holds ahead of its job;
// a job that gives its runner's files gets the sandbox's own.
func TestRunnerDirectoryOverPlacedToolClient(t *testing.T) {
	tier := &native.Tier{}
	testenv.RequireNative(t, tier.Probe)
	t.Cleanup(func() { tier.Close() })
	runner := t.TempDir()
	for name, data := range map[string]string{"bin/codecell-tool": "#!/bin/sh\necho the job\\'s own\n", "src/main.sh": "codecell-tool\n"} {
		p := filepath.Join(runner, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	// The first run starts the fork server the next are forked from.
	if o, err := tier.Run(ctx, shJob(t, tier, "true\n", &bytes.Buffer{})); err != nil || o.ExitCode != 0 {
		t.Fatalf("%v, %+v", err, o)
	}
	settle(t, tier)
	for i := 0; i < 4; i++ {
		var out bytes.Buffer
		job := shJob(t, tier, "", &out)
		job.Runner, job.RunnerFiles = runner, nil
		o, err := tier.Run(ctx, job)
		if err != nil || o.ExitCode != 0 || out.String() != "the job's own\n" {
			t.Fatalf("run %d with a runner directory: %v, %+v, stdout %q, stderr %q", i, err, o, out.String(), job.Stderr)
		}
		out.Reset()
		job = shJob(t, tier, "head -c 9 \"$(command -v codecell-tool)\"\n", &out)
		o, err = tier.Run(ctx, job)
		if err != nil || o.ExitCode != 0 || out.String() != "#!/bin/sh" {
			t.Fatalf("run %d with the runner's files: %v, %+v, stdout %q, stderr %q", i, err, o, out.String(), job.Stderr)
		}
	}
	if st := tier.Stats(); st.ExecRuns == 0 {
		t.Errorf("no run was forked from a fork server: %+v", st)
	}
}

// What a run leaves to do (here: preparing the next run's sandbox) waits
// for the run's Result, up to a second, rather than compete with it.
func TestBackgroundWorkWaitsForResult(t *testing.T) {
	tier := &native.Tier{}
	testenv.RequireNative(t, tier.Probe)
	t.Cleanup(func() { tier.Close() })
	ctx := context.Background()
	run := func(finished chan struct{}) time.Time {
		var out bytes.Buffer
		job := shJob(t, tier, "echo 1\n", &out)
		job.Finished = finished
		o, err := tier.Run(ctx, job)
		if err != nil || out.String() != "1\n" {
			t.Fatalf("%v, %+v, stdout %q", err, o, out.String())
		}
		return time.Now()
	}
	// The first run starts the fork server the next are forked from.
	run(nil)
	settle(t, tier)
	run(nil)
	settle(t, tier)
	if st := tier.Stats(); st.ExecRuns == 0 {
		t.Fatalf("no run was forked from a fork server: %+v", st)
	}
	spawned := make(chan time.Time, 64)
	stop := spawnwatch.Watch(tier, func(int, []string) {
		select {
		case spawned <- time.Now():
		default:
		}
	})
	defer stop()
	finished := make(chan struct{})
	defer close(finished)
	returned := run(finished)
	select {
	case at := <-spawned:
		if wait := at.Sub(returned); wait < 900*time.Millisecond {
			t.Errorf("a sandbox was made %v after the run returned, its Result not yet built", wait)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no sandbox was made for the next run in 30 s")
	}
}
