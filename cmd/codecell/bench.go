package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/tier/native"
)

// bench measures what the sandbox costs: the same Python program, run bare
// and through codecell, many times each in this one process, so that the
// figures are ratios measured side by side on the same machine at the same
// time, never absolute promises.
func (m *Main) bench(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("codecell bench", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	runs := fs.Int("runs", 50, "runs of each case")
	python := fs.String("python", "/usr/bin/python3", "the Python interpreter")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if *runs < 1 {
		fmt.Fprintln(m.Stderr, "codecell bench: --runs must be at least 1")
		return exitUsage
	}
	code := "print(1)\n"
	pooled := m.Engine
	cold := &codecell.Engine{Interpreters: m.Engine.Interpreters, InitPath: m.Engine.InitPath,
		Tiers: []codecell.Tier{&native.Tier{Pool: -1}}}
	cases := []struct {
		name string
		run  func() error
	}{
		{"bare: python3 -c 'print(1)'", func() error {
			return exec.CommandContext(ctx, *python, "-c", code).Run()
		}},
		{"tier local", engineCase(ctx, pooled, "local", code)},
		{"tier native (ready pool)", engineCase(ctx, pooled, "native", code)},
		{"tier native (no pool)", engineCase(ctx, cold, "native", code)},
		{"native sandbox alone: python3 -c", sandboxCase(ctx, *python, code)},
	}
	if bwrap, err := exec.LookPath("bwrap"); err == nil {
		// Bubblewrap with a view like the native tier's: every namespace, the
		// system directories read-only, fresh /proc, /dev and /tmp. It has
		// no seccomp filter, Landlock or cgroup here, and no runner.
		args := []string{"--unshare-all", "--die-with-parent", "--new-session",
			"--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc",
			"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"}
		for _, d := range []string{"/bin", "/sbin", "/lib", "/lib64"} {
			if target, err := os.Readlink(d); err == nil {
				args = append(args, "--symlink", target, d)
			}
		}
		args = append(args, *python, "-c", code)
		cases = append(cases, struct {
			name string
			run  func() error
		}{"bubblewrap: python3 -c", func() error { return exec.CommandContext(ctx, bwrap, args...).Run() }})
	}
	// One warm-up run each: the page cache and the pool start full, as they
	// are on a running service.
	for _, c := range cases {
		if err := c.run(); err != nil {
			fmt.Fprintf(m.Stderr, "codecell bench: %s: %v\n", c.name, err)
			return exitInternal
		}
	}
	times := make([][]time.Duration, len(cases))
	for j, c := range cases {
		for i := 0; i < *runs; i++ {
			settle(native.Default)
			start := time.Now()
			if err := c.run(); err != nil {
				fmt.Fprintf(m.Stderr, "codecell bench: %s: %v\n", c.name, err)
				return exitInternal
			}
			times[j] = append(times[j], time.Since(start))
		}
	}
	base50, base90 := percentile(times[0], 50), percentile(times[0], 90)
	w := tabwriter.NewWriter(m.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "case\truns\tp50\tp90\tp50 ratio\tp50 overhead\t\n")
	for j, c := range cases {
		p50, p90 := percentile(times[j], 50), percentile(times[j], 90)
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%.2fx\t%s\t\n", c.name, len(times[j]), ms(p50), ms(p90),
			float64(p50)/float64(base50), ms(p50-base50))
	}
	w.Flush()
	fmt.Fprintf(m.Stdout, "\nbaseline p50 %s, p90 %s; overhead is the case's p50 minus the baseline's.\n", ms(base50), ms(base90))
	fmt.Fprintf(m.Stdout, "Each run starts once the previous run's background work (pool refill, namespace teardown) is done.\n")
	return 0
}

// settle waits until the work a run leaves behind is done — the native
// pool's refill, the kernel's teardown of the last sandbox's namespaces — so
// that each run starts as on a host where code runs now and then, and no
// run pays for the one before it. What that background work costs shows up
// under load, not here.
func settle(t *native.Tier) {
	for i := 0; i < 500 && t.PoolReady() < t.PoolSize(); i++ {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(25 * time.Millisecond)
}

// sandboxCase runs the interpreter straight in the native tier, without the
// engine or the runner prelude: the cost of the isolation alone.
func sandboxCase(ctx context.Context, python, code string) func() error {
	return func() error {
		ws, err := os.MkdirTemp("", "codecell-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(ws)
		out, err := native.Default.Run(ctx, &codecell.Job{
			Argv: []string{python, "-c", code}, Env: []string{"PATH=/usr/bin:/bin"},
			Workspace: ws, Runner: ws, InitPath: "/proc/self/exe", Limits: codecell.DefaultLimits,
		})
		if err != nil {
			return err
		}
		if out.ExitCode != 0 {
			return fmt.Errorf("exit code %d", out.ExitCode)
		}
		return nil
	}
}

func engineCase(ctx context.Context, eng *codecell.Engine, tier, code string) func() error {
	return func() error {
		res, err := eng.Run(ctx, &codecell.Exec{Tier: tier, Language: "python", Code: code})
		if err != nil {
			return err
		}
		if res.Status != codecell.StatusSuccess || res.Stdout != "1\n" {
			msg := string(res.Status)
			if res.Error != nil {
				msg += ": " + res.Error.Message
			}
			return fmt.Errorf("%s (stderr %q)", msg, res.Stderr)
		}
		return nil
	}
}

func percentile(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(0, min(i, len(s))-1)]
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000)
}
