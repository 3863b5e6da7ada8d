// Package bench measures what codecell costs, always as ratios against a
// baseline measured in the same run on the same machine: the sandbox
// against bare interpreters (Run), and the HTTP service under load against
// the Engine alone, with a check that nothing is left behind (Load), a
// live session's cell against a one-shot run (Live), the library, REST
// and MCP side by side (SideBySide), and code mode's prompt and context
// against the same MCP servers used directly (MeasurePrompt,
// MeasureCodemode). codecell bench is its command.
package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"text/tabwriter"
	"time"

	"golang.org/x/sys/unix"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/tier/docker"
	"github.com/codecell-dev/codecell/tier/native"
)

// Options shape a benchmark run.
type Options struct {
	Runs   int    // runs of each case
	Calls  int    // tool calls in the bridge's round-trip measurement; 0 skips it
	Python string // the Python interpreter
	// Engine gives the interpreters and the init binary; its own tiers
	// (the native tier with its pool) run the pooled cases.
	Engine *codecell.Engine
	// Out gets the tables; Progress, when not nil, a line that says where
	// the run is (a terminal).
	Out, Progress io.Writer
}

// Run measures what the sandbox costs: the same Python program, run bare
// and through codecell, many times each in this one process, so that the
// figures are ratios measured side by side on the same machine at the same
// time, never absolute promises.
func Run(ctx context.Context, o Options) error {
	if o.Runs < 1 {
		return errors.New("runs must be at least 1")
	}
	code := "print(1)\n"
	pooled := o.Engine
	cold := &codecell.Engine{Interpreters: o.Engine.Interpreters, InitPath: o.Engine.InitPath,
		Tiers: []codecell.Tier{&native.Tier{Pool: -1}}}
	cases := []benchCase{
		{"bare: python3 -c 'print(1)'", func() error {
			return exec.CommandContext(ctx, o.Python, "-c", code).Run()
		}},
		{"tier local", engineCase(ctx, pooled, "local", code)},
		{"tier native (ready pool)", engineCase(ctx, pooled, "native", code)},
		{"tier native (no pool)", engineCase(ctx, cold, "native", code)},
		{"native sandbox alone: python3 -c", sandboxCase(ctx, o.Python, code)},
	}
	if bwrap, err := exec.LookPath("bwrap"); err == nil {
		cases = append(cases, benchCase{"bubblewrap: python3 -c", bwrapCase(ctx, bwrap, o.Python, code)})
	}
	// The docker tier, where an engine answers and an image is configured:
	// a container made, started and removed per run.
	dockerNote := ""
	if err := docker.Default.Probe(); err != nil {
		dockerNote = "tier docker not measured: " + err.Error()
	} else if docker.Default.ImageFor("python") == "" {
		dockerNote = "tier docker not measured: no image configured (docker.image, or CODECELL_DOCKER_IMAGE)"
	} else {
		d := docker.Default
		coldDocker := &codecell.Engine{Interpreters: o.Engine.Interpreters, InitPath: o.Engine.InitPath,
			Tiers: []codecell.Tier{&docker.Tier{Host: d.Host, Image: d.Image, Images: d.Images, User: d.User, Tmp: d.Tmp, Pool: -1}}}
		cases = append(cases,
			benchCase{"tier docker (ready pool)", engineCase(ctx, pooled, "docker", code)},
			benchCase{"tier docker (no pool)", engineCase(ctx, coldDocker, "docker", code)})
	}
	// One warm-up run each: the page cache and the pool start full, as they
	// are on a running service.
	for _, c := range cases {
		if err := c.run(); err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
	}
	times := make([][]time.Duration, len(cases))
	for j, c := range cases {
		for i := 0; i < o.Runs; i++ {
			if o.Progress != nil {
				fmt.Fprintf(o.Progress, "\r\x1b[Kcase %d of %d, run %d of %d: %s", j+1, len(cases), i+1, o.Runs, c.name)
			}
			settle(native.Default)
			start := time.Now()
			if err := c.run(); err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
			times[j] = append(times[j], time.Since(start))
		}
	}
	if o.Progress != nil {
		fmt.Fprint(o.Progress, "\r\x1b[K")
	}
	base50, base90 := percentile(times[0], 50), percentile(times[0], 90)
	w := tabwriter.NewWriter(o.Out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "case\truns\tp50\tp90\tp50 ratio\tp50 overhead\t\n")
	for j, c := range cases {
		p50, p90 := percentile(times[j], 50), percentile(times[j], 90)
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%.2fx\t%s\t\n", c.name, len(times[j]), ms(p50), ms(p90),
			float64(p50)/float64(base50), ms(p50-base50))
	}
	w.Flush()
	fmt.Fprintf(o.Out, "\nbaseline p50 %s, p90 %s; overhead is the case's p50 minus the baseline's.\n", ms(base50), ms(base90))
	fmt.Fprintf(o.Out, "Each run starts once the previous run's background work (pool refill, namespace teardown) is done.\n")
	if dockerNote != "" {
		fmt.Fprintln(o.Out, dockerNote)
	}
	if o.Calls > 0 {
		return bridge(ctx, o)
	}
	return nil
}

type benchCase struct {
	name string
	run  func() error
}

// bwrapCase is bubblewrap with a view like the native tier's: every
// namespace, the system directories read-only, fresh /proc, /dev and /tmp.
// It has no seccomp filter, Landlock or cgroup here, and no runner.
func bwrapCase(ctx context.Context, bwrap, python, code string) func() error {
	args := []string{"--unshare-all", "--die-with-parent", "--new-session",
		"--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc",
		"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"}
	for _, d := range []string{"/bin", "/sbin", "/lib", "/lib64"} {
		if target, err := os.Readlink(d); err == nil {
			args = append(args, "--symlink", target, d)
		}
	}
	args = append(args, python, "-c", code)
	return func() error { return exec.CommandContext(ctx, bwrap, args...).Run() }
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
	// The docker tier's ready container, once it has run a job.
	for i := 0; i < 5000 && docker.Default.PoolSize() > 0 && docker.Default.PoolUsed() && docker.Default.PoolReady() < docker.Default.PoolSize(); i++ {
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

// benchBridge measures a tool call's round trip: from the program's call to
// its result, for a tool that does nothing, timed inside the program. The
// baseline is the same exchange of one JSON line each way over a socket pair
// between a bare Python process and an echo in this process: the floor any
// such channel has on this machine.
func bridge(ctx context.Context, o Options) error {
	python, n := o.Python, o.Calls
	const timing = `import os, time, json
def stats(xs):
    xs.sort()
    return [xs[len(xs)//2], xs[min(len(xs)-1, (len(xs)*99)//100)]]
`
	raw, err := rawRoundTrips(ctx, python, timing, n)
	if err != nil {
		return fmt.Errorf("the bridge's baseline: %w", err)
	}
	box := &codecell.Toolbox{}
	_ = box.Add(codecell.Tool{Name: "noop", Description: "Does nothing.", Call: func(context.Context, json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage("null"), nil
	}})
	eng := &codecell.Engine{Tools: box, Interpreters: o.Engine.Interpreters, InitPath: o.Engine.InitPath}
	code := timing + fmt.Sprintf(`import asyncio
n = %d
sync = []
for _ in range(n):
    t = time.perf_counter_ns(); call_tool_sync("noop"); sync.append(time.perf_counter_ns() - t)
aw = []
for _ in range(n):
    t = time.perf_counter_ns(); await call_tool("noop"); aw.append(time.perf_counter_ns() - t)
{"sync": stats(sync), "await": stats(aw)}
`, n)
	res, err := eng.Run(ctx, &codecell.Exec{Tier: native.Name, Language: "python", Code: code,
		Limits: codecell.Limits{ToolCalls: 2*n + 10, Timeout: 10 * time.Minute}})
	if err != nil || res.Status != codecell.StatusSuccess {
		return fmt.Errorf("the bridge: %v %s", err, describeFailure(res))
	}
	var got struct{ Sync, Await []float64 }
	if err := json.Unmarshal(res.Value, &got); err != nil {
		return fmt.Errorf("the bridge: %w", err)
	}
	us := func(ns float64) string { return fmt.Sprintf("%.0f µs", ns/1000) }
	fmt.Fprintf(o.Out, "\nTool bridge round trip, a no-op Go tool, %d calls each, timed in the program:\n", n)
	w := tabwriter.NewWriter(o.Out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "case\tp50\tp99\tp50 ratio\t\n")
	for _, c := range []struct {
		name string
		v    []float64
	}{
		{"baseline: a JSON line each way over a socket pair, bare Python", raw},
		{"native tier: call_tool_sync(\"noop\")", got.Sync},
		{"native tier: await call_tool(\"noop\")", got.Await},
	} {
		fmt.Fprintf(w, "%s\t%s\t%s\t%.2fx\t\n", c.name, us(c.v[0]), us(c.v[1]), c.v[0]/raw[0])
	}
	return w.Flush()
}

// rawRoundTrips runs bare Python against an echo over a socket pair.
func rawRoundTrips(ctx context.Context, python, timing string, n int) ([]float64, error) {
	syscall.ForkLock.RLock()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err == nil {
		unix.CloseOnExec(fds[0])
		unix.CloseOnExec(fds[1])
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return nil, err
	}
	host := os.NewFile(uintptr(fds[0]), "echo")
	child := os.NewFile(uintptr(fds[1]), "echo")
	defer host.Close()
	go func() {
		r := bufio.NewReader(host)
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				return
			}
			if _, err := host.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":null}` + "\n")); err != nil {
				return
			}
			_ = line
		}
	}()
	code := timing + fmt.Sprintf(`fd = 3
req = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"noop","arguments":{}}}\n'
xs = []
for _ in range(%d):
    t = time.perf_counter_ns()
    os.write(fd, req)
    buf = b""
    while not buf.endswith(b"\n"):
        buf += os.read(fd, 65536)
    json.loads(buf)
    xs.append(time.perf_counter_ns() - t)
print(json.dumps(stats(xs)))
`, n)
	cmd := exec.CommandContext(ctx, python, "-c", code)
	cmd.ExtraFiles = []*os.File{child}
	out, err := cmd.Output()
	child.Close()
	if err != nil {
		return nil, err
	}
	var v []float64
	return v, json.Unmarshal(out, &v)
}

func describeFailure(res *codecell.Result) string {
	if res == nil {
		return ""
	}
	msg := string(res.Status)
	if res.Error != nil {
		msg += ": " + res.Error.Message
	}
	return msg + " " + res.Stderr
}
