//go:build linux

package native

import (
	"context"
	"strings"
	"testing"

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
	t.Logf("%+v", st)
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
// up: never the server's, never another run's, sequential or at once.
func TestForkedRunsOwnNetworkNamespaces(t *testing.T) {
	testenv.RequireNative(t, Default.Probe)
	tier := &Tier{}
	tier.forkEvery = true
	t.Cleanup(func() { tier.Close() })
	eng := &codecell.Engine{Tiers: []codecell.Tier{tier}}
	code := map[string]string{
		"sh": `readlink /proc/self/ns/net; echo up`,
		// The loopback is up: a datagram sent there arrives (Landlock
		// refuses TCP).
		"python": "import os, socket\nprint(os.readlink('/proc/self/ns/net'))\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n" +
			"s.bind(('127.0.0.1', 0))\ns.settimeout(5)\ns.sendto(b'x', s.getsockname())\nprint('up' if s.recv(1) == b'x' else 'down')\n",
	}
	seen := map[string]string{}
	for i := range 6 {
		lang := []string{"sh", "python"}[i%2]
		res, err := eng.Run(context.Background(), &codecell.Exec{Tier: Name, Language: lang, Code: code[lang]})
		if err != nil || res.Status != codecell.StatusSuccess {
			t.Fatalf("%s: %v %+v\n%s", lang, err, res, res.Stderr)
		}
		lines := strings.Fields(res.Stdout)
		if len(lines) < 2 || !strings.HasPrefix(lines[0], "net:[") || lines[len(lines)-1] == "down" {
			t.Fatalf("%s: %q", lang, res.Stdout)
		}
		if prev, ok := seen[lines[0]]; ok {
			t.Fatalf("run %d (%s) has the network namespace of an earlier run (%s): %s", i, lang, prev, lines[0])
		}
		seen[lines[0]] = lang
	}
	if st := tier.Stats(); st.ForkRuns == 0 || st.ExecRuns == 0 {
		t.Errorf("the runs were not forked: %+v", st)
	}
}
