package main

import (
	"context"
	"flag"
	"fmt"
	"runtime"

	"github.com/codecell-dev/codecell/internal/bench"
)

// bench is codecell bench: what the sandbox costs against bare
// interpreters, or, with "load", the HTTP service under load (package
// internal/bench does the measuring).
func (m *Main) bench(ctx context.Context, args []string) int {
	if len(args) > 0 && args[0] == "load" {
		return m.benchLoad(ctx, args[1:])
	}
	fs := flag.NewFlagSet("codecell bench", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	o := bench.Options{Engine: m.Engine, Out: m.Stdout}
	fs.IntVar(&o.Runs, "runs", 50, "runs of each case")
	fs.IntVar(&o.Calls, "calls", 2000, "tool calls in the bridge's round-trip measurement; 0 skips it")
	fs.StringVar(&o.Python, "python", "/usr/bin/python3", "the Python interpreter")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if o.Runs < 1 {
		fmt.Fprintln(m.Stderr, "codecell bench: --runs must be at least 1")
		return exitUsage
	}
	// On a terminal, a line that says where the measurement is; the
	// tables alone come on stdout.
	if isTerminal(m.Stderr) {
		o.Progress = m.Stderr
	}
	if err := bench.Run(ctx, o); err != nil {
		fmt.Fprintf(m.Stderr, "codecell bench: %v\n", err)
		return exitInternal
	}
	return 0
}

// benchLoad is codecell bench load.
func (m *Main) benchLoad(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("codecell bench load", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	var o bench.LoadOptions
	fs.IntVar(&o.Executions, "executions", 400, "executions in all")
	fs.IntVar(&o.Clients, "clients", 4*runtime.NumCPU(), "clients sending at once")
	fs.IntVar(&o.MaxRunning, "max-running", 2*runtime.NumCPU(), "executions the server runs at once; more get 429")
	fs.IntVar(&o.SessionsPer, "per-session", 5, "executions per session; every other client runs without sessions")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if o.Executions < 1 || o.Clients < 1 || o.MaxRunning < 1 || o.SessionsPer < 1 {
		fmt.Fprintln(m.Stderr, "codecell bench load: every count must be at least 1")
		return exitUsage
	}
	rep, err := bench.Load(ctx, m.Engine, o)
	if err != nil {
		fmt.Fprintf(m.Stderr, "codecell bench load: %v\n", err)
		return exitInternal
	}
	rep.Print(m.Stdout, o)
	if !rep.OK() {
		return 1
	}
	return 0
}
