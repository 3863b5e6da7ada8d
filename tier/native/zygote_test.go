//go:build linux

package native

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/testenv"
	"github.com/codecell-dev/codecell/tiertest"
)

// TestConformanceForked runs the tier test kit with every program in a
// sandbox forked from a fork server: forked from its template interpreter
// when it can be, else executed in the forked sandbox. The suite holds for
// those paths as for the others.
func TestConformanceForked(t *testing.T) {
	testenv.RequireNative(t, Default.Probe)
	tier := &Tier{}
	tier.forkEvery = true
	t.Cleanup(func() { tier.Close() })
	t.Run("Suite", func(t *testing.T) {
		tiertest.Run(t, tier, tiertest.Capabilities{Isolating: true, Processes: true, CPU: true, Network: true})
	})
	st := tier.Stats()
	if st.ForkRuns == 0 || st.ExecRuns == 0 {
		t.Errorf("no run was forked from a template interpreter, or none executed its program in a forked sandbox: %+v", st)
	}
	checkBornInCgroups(t, tier, st)
	t.Logf("%+v", st)
}

// checkBornInCgroups fails the test when, on cgroup v1, a sandbox of tier
// was moved into its cgroup after its start instead of being started in
// it (a fork server's runs and built sandboxes alike), which would make
// each wait for an RCU grace period.
func checkBornInCgroups(t *testing.T, tier *Tier, st PoolStats) {
	t.Helper()
	if tier.cgroups == nil || tier.cgroups.Version != 1 {
		t.Logf("not on cgroup v1: %d sandboxes born in their cgroups, %d moved", st.BornInCgroup, st.MovedIntoCgroup)
		return
	}
	if st.MovedIntoCgroup != 0 || st.BornInCgroup == 0 {
		t.Errorf("%d sandboxes were moved into their cgroups after their start, %d born in them; want none moved", st.MovedIntoCgroup, st.BornInCgroup)
	}
}

// TestPoolMemoryBound: with no memory for the pool, no more than the first
// thing it prepares waits for jobs (here, Python's fork server: no run
// prepared ahead, no server for the shell, no pooled sandbox), and runs
// still run.
func TestPoolMemoryBound(t *testing.T) {
	testenv.RequireNative(t, Default.Probe)
	tier := &Tier{PoolMemory: 1}
	tier.forkEvery = true
	t.Cleanup(func() { tier.Close() })
	eng := &codecell.Engine{Tiers: []codecell.Tier{tier}}
	for _, lang := range []string{"python", "sh", "python"} {
		code := map[string]string{"python": "print(1)", "sh": "echo 1"}[lang]
		res, err := eng.Run(context.Background(), &codecell.Exec{Tier: Name, Language: lang, Code: code})
		if err != nil || res.Status != codecell.StatusSuccess || res.Stdout != "1\n" {
			t.Fatalf("%s: %v %+v", lang, err, res)
		}
	}
	st := tier.Stats()
	if len(st.Templates) > 1 || st.Prepared != 0 || tier.PoolReady() != 0 || st.ExecRuns != 0 {
		t.Errorf("the pool kept more than its first server with no memory for it: %+v, %d ready", st, tier.PoolReady())
	}
	if st.ForkRuns+st.ColdRuns != 3 {
		t.Errorf("runs went elsewhere: %+v", st)
	}
}

// TestForkedRunsOwnNetworkNamespaces: each forked run has a network
// namespace of its own, made ahead by its fork server, with its loopback
// up: runs alive at once never share one. (A namespace's inode number is
// reused once it is gone, so only runs alive together can be told apart.)
func TestForkedRunsOwnNetworkNamespaces(t *testing.T) {
	testenv.RequireNative(t, Default.Probe)
	tier := &Tier{}
	tier.forkEvery = true
	t.Cleanup(func() { tier.Close() })
	const n = 4
	// Every run waits at the barrier until all are there: they are alive
	// together when they read their namespaces.
	var arrived sync.WaitGroup
	arrived.Add(n)
	all := make(chan struct{})
	go func() { arrived.Wait(); close(all) }()
	box := &codecell.Toolbox{}
	if err := box.Add(codecell.Tool{Name: "barrier", Call: func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
		arrived.Done()
		select {
		case <-all:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return json.RawMessage("true"), nil
	}}); err != nil {
		t.Fatal(err)
	}
	eng := &codecell.Engine{Tiers: []codecell.Tier{tier}, Tools: box}
	code := map[string]string{
		"sh": "readlink /proc/self/ns/net\ncodecell-tool barrier '{}' >/dev/null\necho up\n",
		// The loopback is up: a datagram sent there arrives (Landlock
		// refuses TCP).
		"python": "import os, socket\nprint(os.readlink('/proc/self/ns/net'))\nawait call_tool('barrier')\n" +
			"s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\ns.bind(('127.0.0.1', 0))\ns.settimeout(5)\n" +
			"s.sendto(b'x', s.getsockname())\nprint('up' if s.recv(1) == b'x' else 'down')\n",
	}
	results := make(chan *codecell.Result, n)
	for i := range n {
		lang := []string{"sh", "python"}[i%2]
		go func() {
			res, err := eng.Run(context.Background(), &codecell.Exec{Tier: Name, Language: lang, Code: code[lang]})
			if err != nil {
				res = &codecell.Result{Stderr: err.Error()}
			}
			results <- res
		}()
	}
	seen := map[string]bool{}
	for range n {
		res := <-results
		lines := strings.Fields(res.Stdout)
		if res.Status != codecell.StatusSuccess || len(lines) != 2 || !strings.HasPrefix(lines[0], "net:[") || lines[1] != "up" {
			t.Fatalf("%s: %q %+v\n%s", res.Language, res.Stdout, res.Error, res.Stderr)
		}
		if seen[lines[0]] {
			t.Fatalf("two runs alive at once share the network namespace %s", lines[0])
		}
		seen[lines[0]] = true
	}
	if st := tier.Stats(); st.ForkRuns == 0 || st.ExecRuns == 0 {
		t.Errorf("the runs were not forked: %+v", st)
	}
}

// TestForkServerPreloadsWhatTheProgramNeeds: a Python program that names
// neither await nor async is forked from a template without asyncio (whose
// memory every child would copy the page tables of and tear down), one
// that does from a template of its own with asyncio imported before any
// program, and a program that imports asyncio without naming it still can.
func TestForkServerPreloadsWhatTheProgramNeeds(t *testing.T) {
	testenv.RequireNative(t, Default.Probe)
	tier := &Tier{}
	tier.forkEvery = true
	t.Cleanup(func() { tier.Close() })
	eng := &codecell.Engine{Tiers: []codecell.Tier{tier}}
	// The name is spelled in two halves: a program that names it is
	// served by the template that has it.
	const probe = "import sys\nprint('a' + 'syncio' in sys.modules)\n"
	for _, c := range []struct{ code, want string }{
		{probe, "False\n"},
		{"# async\n" + probe, "True\n"},
		{probe + "m = __import__('a' + 'syncio')\nprint(m.run(m.sleep(0, 'ran')))\n", "False\nran\n"},
		{"import asyncio\nawait asyncio.sleep(0)\n" + probe, "True\n"},
	} {
		res, err := eng.Run(context.Background(), &codecell.Exec{Tier: Name, Language: "python", Code: c.code})
		if err != nil || res.Status != codecell.StatusSuccess || res.Stdout != c.want {
			t.Fatalf("%q: %v %+v", c.code, err, res)
		}
		if !strings.Contains(res.Isolation.Interpreter, "forked") {
			t.Fatalf("%q was not forked: %s", c.code, res.Isolation.Interpreter)
		}
	}
	if st := tier.Stats(); st.Templates["python"] != 2 {
		t.Errorf("want two Python templates, one with asyncio and one without: %+v", st)
	}
}

// TestForkedRunsNameTheRunnersClasses: a run forked from a template names
// code mode's classes as a run of the runner as a script does, in its
// traceback and in its Result's error: ToolError, not the template
// module's __codecell_template__.ToolError.
func TestForkedRunsNameTheRunnersClasses(t *testing.T) {
	testenv.RequireNative(t, Default.Probe)
	tier := &Tier{}
	tier.forkEvery = true
	t.Cleanup(func() { tier.Close() })
	eng := &codecell.Engine{Tiers: []codecell.Tier{tier}}
	for _, code := range []string{
		"await call_tool('nope', {})\n",
		"# no event loop\ncall_tool_sync('nope', {})\n",
		"import sys\nprint(ToolError.__module__, ModuleBlockedError.__module__, PolicyBlockedError.__module__, file=sys.stderr)\nraise ToolError({'error_code': 'X'})\n",
	} {
		res, err := eng.Run(context.Background(), &codecell.Exec{Tier: Name, Language: "python", Code: code})
		if err != nil || res.Status != codecell.StatusFailure {
			t.Fatalf("%q: %v %+v", code, err, res)
		}
		if !strings.Contains(res.Isolation.Interpreter, "forked") {
			t.Fatalf("%q was not forked: %s", code, res.Isolation.Interpreter)
		}
		if strings.Contains(res.Stderr, "__codecell_template__") || !strings.Contains(res.Stderr, "\nToolError: {") {
			t.Errorf("%q: the traceback names the template's classes:\n%s", code, res.Stderr)
		}
		if res.Error == nil || strings.Contains(res.Error.Message, "__codecell_template__") {
			t.Errorf("%q: error %+v", code, res.Error)
		}
	}
}

// TestWatchExit: the channel closes once the process has ended, not before.
func TestWatchExit(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "read x")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pidfd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pidfd)
	done := make(chan struct{})
	watchExit(pidfd, done)
	select {
	case <-done:
		t.Fatal("done closed while the process waits for its input")
	default:
	}
	stdin.Close() // read ends, and the shell with it
	<-done
	cmd.Wait()
}
