package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/codecell-dev/codecell/api"
	"github.com/codecell-dev/codecell/internal/bench"
	"github.com/codecell-dev/codecell/internal/testenv"
	"github.com/codecell-dev/codecell/mcp"
)

// The benchmarks install the server-everything the tests use.
func TestBenchEverythingVersion(t *testing.T) {
	if bench.EverythingVersion != testenv.EverythingVersion {
		t.Errorf("the benchmarks use server-everything %s, the tests %s", bench.EverythingVersion, testenv.EverythingVersion)
	}
}

// testBenchProcs starts this test binary as codecell, and the
// server-everything the tests use.
func testBenchProcs(t *testing.T) *bench.Procs {
	t.Helper()
	everything := testenv.Everything(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip(err)
	}
	return &bench.Procs{Exe: os.Args[0], Env: map[string]string{"CODECELL_TEST_AS_CLI": "1"}, Everything: everything, Node: node, State: t.TempDir()}
}

// codecell's tools/list against the upstream servers' own: with
// server-everything (14 tools) at most 1.2 times theirs, with 500 tools a
// tenth; execute's description keeps to the budget when the declarations do
// not fit it, and without a budget carries them all.
func TestBenchPrompt(t *testing.T) {
	p := testBenchProcs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cases := []bench.PromptCase{
		{Name: "server-everything", Servers: api.MCPServers{"everything": p.EverythingServer()}},
		{Name: "synthetic-500", Servers: api.MCPServers{"synth": p.SyntheticServer(500)}},
	}
	rows, err := bench.MeasurePrompt(ctx, p, cases, 0, testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	bench.PrintPrompt(&out, rows, 0)
	t.Logf("\n%s", out.String())
	for i, aim := range []float64{1.2, 0.1} {
		r := rows[i]
		if r.Tools == 0 || r.Direct == 0 {
			t.Fatalf("%s: no tools measured: %+v", r.Case, r)
		}
		if ratio := float64(r.Codecell) / float64(r.Direct); ratio > aim {
			t.Errorf("%s: codecell's tools/list is %.2f times the upstream's, above the aim of %.2f", r.Case, ratio, aim)
		}
		if r.Listing != "declarations" && bench.Tokens(r.Execute) > mcp.DefaultPromptBudgetTokens {
			t.Errorf("%s: execute's description (%s) is %d tokens, over the budget", r.Case, r.Listing, bench.Tokens(r.Execute))
		}
		if r.Unbounded <= r.Codecell {
			t.Errorf("%s: without a budget tools/list is %d characters, not more than with one (%d)", r.Case, r.Unbounded, r.Codecell)
		}
	}
	if r := rows[1]; r.Tools != 500 || r.Listing != "server counts" {
		t.Errorf("the synthetic server: %d tools, listed as %s", r.Tools, r.Listing)
	}
	seen := map[string]bool{}
	for _, n := range rows[1].DirectTools {
		if seen[n] {
			t.Errorf("the synthetic server lists %s twice", n)
		}
		seen[n] = true
	}
}

// Each task comes to the same answer both ways (runCodemode checks it),
// with one call instead of many, and the longer tasks put less in the
// context through code mode.
func TestBenchCodemode(t *testing.T) {
	p := testBenchProcs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rows, lists, err := bench.MeasureCodemode(ctx, p, 1)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	bench.PrintCodemode(&out, rows, lists, 1)
	t.Logf("\n%s", out.String())
	if len(rows) != 6 {
		t.Fatalf("%d rows", len(rows))
	}
	for i, calls := range []int{19, 10, 3} {
		d, c := rows[2*i], rows[2*i+1]
		if d.Calls != calls || d.Turns != calls || c.Calls != 1 || c.Turns != 1 || !strings.Contains(c.Way, "inside") {
			t.Errorf("%s: direct %+v, code mode %+v", d.Task, d, c)
		}
		if calls >= 10 && c.Chars >= d.Chars {
			t.Errorf("%s: code mode put %d characters in the context, direct calls %d", d.Task, c.Chars, d.Chars)
		}
	}
}

func TestBenchFlags(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "prompt", "--synthetic", "x"},
		{"bench", "prompt", "--synthetic", "0"},
		{"bench", "codemode", "--runs", "0"},
		{"bench", "mcp-synthetic", "--tools", "0"},
	} {
		if code, _, stderr := cli(t, "", args...); code != exitUsage || stderr == "" {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
