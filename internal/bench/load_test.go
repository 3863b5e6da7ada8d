//go:build linux

package bench

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/testenv"
	"github.com/codecell-dev/codecell/tier/native"
)

func TestMain(m *testing.M) {
	// The test binary is re-executed as the sandboxes' init.
	codecell.Init()
	os.Exit(testenv.Run(m))
}

// The load run in small: many executions at once over HTTP, with sessions
// and 429s; every Result is the right one, and nothing is left.
func TestLoad(t *testing.T) {
	testenv.RequireNative(t, native.Default.Probe)
	rep, err := Load(context.Background(), &codecell.Engine{}, LoadOptions{Executions: 48, Clients: 8, MaxRunning: 3, SessionsPer: 4})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep.Print(&out, LoadOptions{Executions: 48, Clients: 8, MaxRunning: 3})
	t.Log("\n" + out.String())
	if len(rep.Lost) > 0 || len(rep.Leftovers) > 0 || len(rep.Latencies) != 48 || rep.Sessions == 0 {
		t.Fatalf("lost %v, left %v, %d results, %d sessions", rep.Lost, rep.Leftovers, len(rep.Latencies), rep.Sessions)
	}
	// Every execution had a sandbox of its own, and the check saw them all.
	if rep.Sandboxes < 2*48 {
		t.Fatalf("the run recorded %d sandboxes for %d executions", rep.Sandboxes, 2*48)
	}
}

// The side-by-side run measures every case and prints each against its
// bare interpreter.
func TestSideBySide(t *testing.T) {
	testenv.RequireNative(t, native.Default.Probe)
	var out bytes.Buffer
	err := SideBySide(context.Background(), SideOptions{Runs: 2, Clients: []int{1, 2}, Python: "/usr/bin/python3", Node: "node", Sh: "/bin/sh",
		Engine: &codecell.Engine{}, Out: &out})
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	for _, want := range []string{"bare: /usr/bin/python3 -c 'print(1)'", "codecell REST (POST /v1/executions)", "codecell MCP (execute)", "codecell library (Engine.Run)", "throughput, 2 at once"} {
		if !bytes.Contains(out.Bytes(), []byte(want)) {
			t.Errorf("the table lacks %q", want)
		}
	}
	if n := bytes.Count(out.Bytes(), []byte("\n")); n < 13 {
		t.Errorf("%d lines", n)
	}
}

// The live run measures a cell and a one-shot run of each language.
func TestLiveBench(t *testing.T) {
	testenv.RequireNative(t, native.Default.Probe)
	var out bytes.Buffer
	if err := Live(context.Background(), LiveOptions{Runs: 3, Engine: &codecell.Engine{}, Out: &out, ForkMB: 2}); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	for _, want := range []string{"live cell p50", "python", "javascript", "×", "fork ", "fork + its first cell", "holds 2 MB"} {
		if !bytes.Contains(out.Bytes(), []byte(want)) {
			t.Errorf("the table lacks %q", want)
		}
	}
}
