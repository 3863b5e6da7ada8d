package main

// codecell bench prompt, codecell bench codemode and the synthetic server
// they measure against: flags here, the measuring in package internal/bench
// (codemode.go).

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/codecell-dev/codecell/api"
	"github.com/codecell-dev/codecell/internal/bench"
)

// everythingFlag is the --everything flag of the benchmarks that start
// server-everything.
func everythingFlag(fs *flag.FlagSet) *string {
	return fs.String("everything", "", "the `dist/index.js` of @modelcontextprotocol/server-everything "+bench.EverythingVersion+" (default: installed by npm into the cache directory)")
}

// benchPrompt is codecell bench prompt.
func (m *Main) benchPrompt(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("codecell bench prompt", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	everything := everythingFlag(fs)
	synthetic := fs.String("synthetic", "500", "sizes of the synthetic upstream server to measure, comma-separated (tools each)")
	budget := fs.Int("budget", 0, "the prompt budget in tokens (default: codecell's)")
	other := fs.String("codecell", "", "measure the codecell mcp of this `binary` (another build) instead of this one's")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	sizes, ok := m.counts("codecell bench prompt", "--synthetic", *synthetic)
	if !ok {
		return exitUsage
	}
	progress := io.Discard
	if isTerminal(m.Stderr) {
		progress = m.Stderr
	}
	p, done, err := bench.NewProcs(ctx, *everything, version, m.Stderr)
	if err != nil {
		fmt.Fprintf(m.Stderr, "codecell bench prompt: %v\n", err)
		return exitInternal
	}
	defer done()
	p.Codecell = *other
	cases := []bench.PromptCase{{Name: "server-everything", Servers: api.MCPServers{"everything": p.EverythingServer()}}}
	for _, n := range sizes {
		cases = append(cases, bench.PromptCase{Name: fmt.Sprintf("synthetic-%d", n), Servers: api.MCPServers{"synth": p.SyntheticServer(n)}})
	}
	rows, err := bench.MeasurePrompt(ctx, p, cases, *budget, progress)
	if err != nil {
		fmt.Fprintf(m.Stderr, "codecell bench prompt: %v\n", err)
		return exitInternal
	}
	bench.PrintPrompt(m.Stdout, rows, *budget)
	return 0
}

// counts parses a comma-separated list of positive numbers.
func (m *Main) counts(cmd, flagName, s string) ([]int, bool) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			fmt.Fprintf(m.Stderr, "%s: %s %q: give positive numbers, such as 100,500\n", cmd, flagName, s)
			return nil, false
		}
		out = append(out, n)
	}
	return out, true
}

// benchSynthetic is codecell bench mcp-synthetic, not in the usage: an MCP
// server over stdio with --tools synthetic tools (bench.ServeSynthetic).
func (m *Main) benchSynthetic(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("codecell bench mcp-synthetic", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	n := fs.Int("tools", 500, "how many tools to serve")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if *n < 1 {
		fmt.Fprintln(m.Stderr, "codecell bench mcp-synthetic: --tools must be at least 1")
		return exitUsage
	}
	if err := bench.ServeSynthetic(ctx, *n, version); err != nil {
		fmt.Fprintf(m.Stderr, "codecell bench mcp-synthetic: %v\n", err)
		return exitInternal
	}
	return 0
}

// benchCodemode is codecell bench codemode.
func (m *Main) benchCodemode(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("codecell bench codemode", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	everything := everythingFlag(fs)
	runs := fs.Int("runs", 5, "runs of each task each way; times are the median")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if *runs < 1 {
		fmt.Fprintln(m.Stderr, "codecell bench codemode: --runs must be at least 1")
		return exitUsage
	}
	fail := func(err error) int {
		fmt.Fprintf(m.Stderr, "codecell bench codemode: %v\n", err)
		return exitInternal
	}
	p, done, err := bench.NewProcs(ctx, *everything, version, m.Stderr)
	if err != nil {
		return fail(err)
	}
	defer done()
	rows, lists, err := bench.MeasureCodemode(ctx, p, *runs)
	if err != nil {
		return fail(err)
	}
	bench.PrintCodemode(m.Stdout, rows, lists, *runs)
	return 0
}
