package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/codecell-dev/codecell/internal/guardcorpus"
	"github.com/codecell-dev/codecell/internal/testenv"
	"github.com/codecell-dev/codecell/tier/native"
)

// codecell check on the whole corpus: what the guardrails refuse exits 1
// and names its rule and position; everything else passes (exit 0). The
// corpus's own test runs the same programs through the pipeline.
func TestCheckCorpus(t *testing.T) {
	testenv.RequireNative(t, native.Default.Probe)
	cases, err := guardcorpus.Cases()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			cfg, _ := json.Marshal(map[string]any{"guard": c.Policy})
			file := writeFile(t, c.Name, c.Code)
			exit, stdout, stderr := cli(t, "", "check", "--config", writeFile(t, "codecell.json", string(cfg)), file)
			if c.Expect == "static" {
				want := fmt.Sprintf("%s:%d:%d: ", file, c.At[0], c.At[1])
				if exit != 1 || !strings.HasPrefix(stdout, want) || !strings.Contains(stdout, "("+c.Rule+")") || !strings.Contains(stdout, "hint: ") {
					t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 and %q ... (%s) with a hint", exit, stdout, stderr, want, c.Rule)
				}
				return
			}
			if exit != 0 || !strings.Contains(stdout, "passes the guardrails") {
				t.Errorf("exit %d, stdout %q, stderr %q; want it to pass", exit, stdout, stderr)
			}
		})
	}
}

// Policy flags narrow the configuration's policy; a bad one is a usage
// error that says what to write instead.
func TestCheckFlags(t *testing.T) {
	file := writeFile(t, "main.sh", "ls\nrm -f x\n")
	exit, stdout, _ := cli(t, "", "check", "--allow-command", "ls", file)
	if exit != 1 || !strings.Contains(stdout, ":2:1: ") || !strings.Contains(stdout, "commands.not_allowed") {
		t.Errorf("--allow-command ls: exit %d stdout %q", exit, stdout)
	}
	if exit, stdout, _ := cli(t, "", "check", file); exit != 0 || !strings.Contains(stdout, "refuses nothing") {
		t.Errorf("no policy: exit %d stdout %q", exit, stdout)
	}
	if exit, _, stderr := cli(t, "", "check", "--block", "networking", file); exit != exitUsage || !strings.Contains(stderr, "dynamic_eval, filesystem") {
		t.Errorf("an unknown category: exit %d stderr %q", exit, stderr)
	}
	if exit, _, stderr := cli(t, "", "check", "--lang", "python", "--block", "network", writeFile(t, "x.py", "def f(:\n")); exit != 1 {
		t.Errorf("a syntax error: exit %d stderr %q", exit, stderr)
	}
	cfg := writeFile(t, "c.json", `{"guard": {"allowed_commands": ["ls", "rm *"]}}`)
	if exit, stdout, _ := cli(t, "", "check", "--config", cfg, "--allow-command", "ls", file); exit != 1 || !strings.Contains(stdout, "commands.not_allowed") {
		t.Errorf("the flags narrow the configuration: exit %d stdout %q", exit, stdout)
	}
	// The same policy on run refuses before running.
	if exit, _, stderr := cli(t, "", "run", "--tier", "local", "--block", "filesystem", file); exit != exitBlocked || !strings.Contains(stderr, "filesystem.rm") {
		t.Errorf("run --block filesystem: exit %d stderr %q", exit, stderr)
	}
}
