package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/codecell-dev/codecell/internal/bench"
)

// bench is codecell bench: what the sandbox costs against bare
// interpreters, or one of benchCommands. Package internal/bench does all
// the measuring; these functions read flags and print.
func (m *Main) bench(ctx context.Context, args []string) int {
	if len(args) > 0 {
		if sub, ok := benchCommands[args[0]]; ok {
			return sub(m, ctx, args[1:])
		}
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

// benchCommands are the commands of codecell bench by name; mcp-synthetic
// is the server that bench prompt measures against, not in the usage.
var benchCommands = map[string]func(*Main, context.Context, []string) int{
	"load":          (*Main).benchLoad,
	"side":          (*Main).benchSide,
	"live":          (*Main).benchLive,
	"prompt":        (*Main).benchPrompt,
	"codemode":      (*Main).benchCodemode,
	"mcp-synthetic": (*Main).benchSynthetic,
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

// benchLive is codecell bench live: a live session's cell against a
// one-shot run.
func (m *Main) benchLive(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("codecell bench live", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	o := bench.LiveOptions{Engine: m.Engine, Out: m.Stdout}
	fs.IntVar(&o.Runs, "runs", 200, "cells, and one-shot runs, of each language")
	fs.IntVar(&o.ForkMB, "fork-mb", 100, "the state of the live session forked, in MB")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if o.Runs < 1 {
		fmt.Fprintln(m.Stderr, "codecell bench live: --runs must be at least 1")
		return exitUsage
	}
	if isTerminal(m.Stderr) {
		o.Progress = m.Stderr
	}
	if err := bench.Live(ctx, o); err != nil {
		fmt.Fprintf(m.Stderr, "codecell bench live: %v\n", err)
		return exitInternal
	}
	return 0
}

// benchSide is codecell bench side: the same programs bare, through the
// library, REST and MCP (and go-judge, given its URL), side by side.
func (m *Main) benchSide(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("codecell bench side", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	o := bench.SideOptions{Engine: m.Engine, Out: m.Stdout}
	fs.IntVar(&o.Runs, "runs", 100, "programs each case runs at each concurrency")
	clients := fs.String("clients", "1,2,8", "the concurrencies to measure, comma-separated; the first gives the p50")
	fs.StringVar(&o.Python, "python", "/usr/bin/python3", "the Python interpreter")
	fs.StringVar(&o.Node, "node", "/usr/bin/node", "the Node interpreter")
	fs.StringVar(&o.Sh, "sh", "/bin/sh", "the shell")
	fs.StringVar(&o.GoJudge, "peer-go-judge", "", "the `URL` of a go-judge server, measured in the same run")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	for _, c := range strings.Split(*clients, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil || n < 1 {
			fmt.Fprintf(m.Stderr, "codecell bench side: --clients %q: give positive numbers, such as 1,2,8\n", *clients)
			return exitUsage
		}
		o.Clients = append(o.Clients, n)
	}
	if o.Runs < 1 {
		fmt.Fprintln(m.Stderr, "codecell bench side: --runs must be at least 1")
		return exitUsage
	}
	if isTerminal(m.Stderr) {
		o.Progress = m.Stderr
	}
	// This binary, run anew: the one-shot CLI, and an idle codecell serve.
	if exe, err := os.Executable(); err == nil {
		o.Exe = exe
	}
	if err := bench.SideBySide(ctx, o); err != nil {
		fmt.Fprintf(m.Stderr, "codecell bench side: %v\n", err)
		return exitInternal
	}
	return 0
}
