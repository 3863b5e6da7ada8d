package main

import (
	"bytes"
	"os"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/codecell-dev/codecell/internal/testenv"
	"github.com/codecell-dev/codecell/tier/native"
)

// TestOneShotRunCollectsNothing: a one-shot run of a small program in the
// native sandbox ends before Go's collector first runs (see setGCPercent).
func TestOneShotRunCollectsNothing(t *testing.T) {
	testenv.RequireNative(t, native.Default.Probe)
	cmd := cliCommand("run", "--tier", "native", writeFile(t, "hello.py", "print('hello')\n"))
	cmd.Env = append(cmd.Env, "GODEBUG=gctrace=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || string(out) != "hello\n" {
		t.Fatalf("%v: %q\n%s", err, out, stderr.String())
	}
	for _, line := range strings.Split(stderr.String(), "\n") {
		if strings.HasPrefix(line, "gc ") {
			t.Fatalf("the one-shot run collected its heap:\n%s", stderr.String())
		}
	}
}

// TestSetGCPercent: the commands that set their own collection ratio set
// it, the others leave Go's, and GOGC, when set, wins.
func TestSetGCPercent(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	gogc, had := os.LookupEnv("GOGC")
	os.Unsetenv("GOGC")
	defer func() {
		if had {
			os.Setenv("GOGC", gogc)
		}
	}()
	for cmd, want := range map[string]int{"run": 400, "serve": 200, "mcp": 200, "check": 100, "tools": 100} {
		debug.SetGCPercent(100)
		setGCPercent(cmd)
		if got := debug.SetGCPercent(100); got != want {
			t.Errorf("%s: GC percent %d, want %d", cmd, got, want)
		}
	}
	os.Setenv("GOGC", "100")
	defer os.Unsetenv("GOGC")
	setGCPercent("serve")
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("with GOGC set, serve set the GC percent to %d", got)
	}
}
