//go:build linux

package guardcorpus_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/guardcorpus"
	"github.com/codecell-dev/codecell/internal/testenv"
	"github.com/codecell-dev/codecell/tier/native"
)

func TestMain(m *testing.M) {
	codecell.Init()
	os.Exit(testenv.Run(m))
}

type echoIn struct {
	Text string `json:"text"`
}

// listen starts a loopback listener that counts the connections it gets:
// none may come from a sandbox.
func listen(t *testing.T) (port string, connections *atomic.Int32) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	connections = &atomic.Int32{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			connections.Add(1)
			c.Close()
		}
	}()
	_, port, _ = net.SplitHostPort(ln.Addr().String())
	return port, connections
}

// The corpus through codecell's static tier (what codecell check runs) and
// through the whole pipeline in the native sandbox: the verdicts agree,
// every refusal names its rule and position, and what passes the
// guardrails is stopped where the corpus says, or runs.
func TestCorpus(t *testing.T) {
	testenv.RequireNative(t, native.Default.Probe)
	cases, err := guardcorpus.Cases()
	if err != nil {
		t.Fatal(err)
	}
	echo, err := codecell.Func("t.echo", "Echoes its text.", func(_ context.Context, in echoIn) (echoIn, error) { return in, nil })
	if err != nil {
		t.Fatal(err)
	}
	tools := &codecell.Toolbox{}
	tools.Add(echo)
	eng := &codecell.Engine{Tier: "native", Tools: tools}
	port, connections := listen(t)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			exec := func(tier string) *codecell.Result {
				policy := c.Policy
				x := &codecell.Exec{Tier: tier, Language: c.Language, Code: c.Code, Filename: c.Name,
					Env: map[string]string{"PORT": port}, Policy: codecell.Policy{Guard: &policy}}
				res, err := eng.Run(context.Background(), x)
				if err != nil {
					t.Fatal(err)
				}
				return res
			}
			check, run := exec(codecell.StaticTier), exec("")
			describe := func(r *codecell.Result) string {
				b, _ := json.Marshal(map[string]any{"status": r.Status, "error": r.Error, "findings": r.Findings, "value": r.Value,
					"stdout": r.Stdout, "stderr": r.Stderr})
				return string(b)
			}
			checkBlocked := check.Status == codecell.StatusBlocked && len(check.Findings) > 0
			runBlocked := run.Status == codecell.StatusBlocked && run.Error != nil && run.Error.Code == codecell.CodeGuardrailBlocked
			if checkBlocked != runBlocked {
				t.Fatalf("the verdicts differ: check %s\nrun %s", describe(check), describe(run))
			}
			switch c.Expect {
			case "static":
				for _, r := range []*codecell.Result{check, run} {
					if r.Status != codecell.StatusBlocked || len(r.Findings) == 0 {
						t.Fatalf("%s: not refused: %s", r.Tier, describe(r))
					}
					f := r.Findings[0]
					if f.Rule != c.Rule || f.Line != c.At[0] || f.Column != c.At[1] {
						t.Errorf("%s: first finding %s at %d:%d, want %s at %d:%d (all: %v)", r.Tier, f.Rule, f.Line, f.Column, c.Rule, c.At[0], c.At[1], r.Findings)
					}
					if f.Message == "" || f.Hint == "" || r.Error.Kind != codecell.KindGuardrail ||
						!strings.Contains(r.Error.Message, fmt.Sprintf("line %d, column %d", f.Line, f.Column)) || !strings.Contains(r.Error.Message, f.Rule) {
						t.Errorf("%s: the envelope does not name the rule and its position, or lacks a hint: %+v", r.Tier, r.Error)
					}
				}
				if run.ExitCode != -1 || run.Stdout != "" || len(run.ToolCalls) != 0 {
					t.Errorf("a refused program ran: %s", describe(run))
				}
			case "runtime":
				if check.Status != codecell.StatusSuccess {
					t.Fatalf("check: %s", describe(check))
				}
				if c.Value != nil {
					expectRun(t, c, run, describe)
				} else if run.Status != codecell.StatusFailure || run.Error == nil || run.Error.Code != codecell.CodeModuleBlocked {
					t.Fatalf("want SANDBOX_MODULE_BLOCKED: %s", describe(run))
				}
			case "sandbox", "allowed":
				if check.Status != codecell.StatusSuccess {
					t.Fatalf("check: %s", describe(check))
				}
				expectRun(t, c, run, describe)
			}
		})
	}
	if n := connections.Load(); n != 0 {
		t.Errorf("%d connections reached the host's loopback listener from sandboxes", n)
	}
}

func expectRun(t *testing.T, c guardcorpus.Case, run *codecell.Result, describe func(*codecell.Result) string) {
	t.Helper()
	if run.Status != codecell.StatusSuccess {
		t.Fatalf("want success: %s", describe(run))
	}
	if c.Value != nil {
		var want, got any
		json.Unmarshal(c.Value, &want)
		json.Unmarshal(run.Value, &got)
		w, _ := json.Marshal(want)
		g, _ := json.Marshal(got)
		if !bytes.Equal(w, g) {
			t.Errorf("value %s, want %s (%s)", g, w, describe(run))
		}
	}
	for _, name := range c.Files {
		found := false
		for _, f := range run.Files {
			found = found || f.Path == name && f.Change == codecell.Created && f.Size > 0
		}
		if !found {
			t.Errorf("%s was not created: files %+v", name, run.Files)
		}
	}
	if c.Stdout != "" && !strings.Contains(run.Stdout, c.Stdout) {
		t.Errorf("stdout %q, want it to hold %q (%s)", run.Stdout, c.Stdout, describe(run))
	}
}

// The corpus is wide enough to mean something: every language, every
// layer.
func TestCorpusCoverage(t *testing.T) {
	cases, err := guardcorpus.Cases()
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) < 60 {
		t.Errorf("%d programs; the corpus holds at least 60", len(cases))
	}
	seen := map[string]bool{}
	for _, c := range cases {
		seen[c.Language+" "+c.Expect] = true
	}
	for _, want := range []string{"python static", "python runtime", "python sandbox", "python allowed",
		"javascript static", "javascript sandbox", "javascript allowed", "typescript static", "typescript allowed",
		"bash static", "bash sandbox", "bash allowed"} {
		if !seen[want] {
			t.Errorf("no %s program in the corpus", want)
		}
	}
}

// The table in docs/guardrails.md is the corpus's.
func TestDocsTable(t *testing.T) {
	cases, err := guardcorpus.Cases()
	if err != nil {
		t.Fatal(err)
	}
	const doc = "../../docs/guardrails.md"
	data, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	start := strings.Index(text, "<!-- corpus table")
	end := strings.Index(text, "<!-- end of corpus table -->")
	if start < 0 || end < start {
		t.Fatal("docs/guardrails.md has no corpus table markers")
	}
	start += strings.Index(text[start:], "\n") + 1
	want := guardcorpus.Table(cases)
	if text[start:end] == want {
		return
	}
	if os.Getenv("CODECELL_UPDATE_DOCS") == "1" {
		if err := os.WriteFile(doc, []byte(text[:start]+want+text[end:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("docs/guardrails.md's corpus table is out of date: run CODECELL_UPDATE_DOCS=1 go test ./internal/guardcorpus")
}
