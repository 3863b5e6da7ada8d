package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/codecell-dev/codecell/internal/testenv"
	"github.com/codecell-dev/codecell/tier/native"
)

// TestOneShotRunCollectsNothing: a one-shot run of a small program in the
// native sandbox ends before Go's collector first runs (see oneShotGC).
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
