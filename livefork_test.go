package codecell_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/testenv"
	"github.com/codecell-dev/codecell/tier/native"
)

// Live.Fork through the library: the fork's first Python cell has the
// state, a JavaScript interpreter is not copied (and says so), a fork
// ended before its first cell leaves no file behind, and a session whose
// cell runs cannot be forked.
func TestLiveFork(t *testing.T) {
	testenv.RequireNative(t, native.Default.Probe)
	ctx := context.Background()
	tmp := t.TempDir()
	eng := &codecell.Engine{Tier: native.Name, TempDir: tmp}
	parent := eng.NewLive()
	defer parent.Close()
	ws := t.TempDir()
	run := func(l *codecell.Live, dir, language, code string) *codecell.Result {
		t.Helper()
		res, err := eng.Run(ctx, &codecell.Exec{Language: language, Code: code, Workspace: dir, Live: l})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := run(parent, ws, "python", "blob = bytearray(b'x' * (2 << 20))\nn = 41"); res.Status != codecell.StatusSuccess {
		t.Fatalf("%s %+v", res.Status, res.Error)
	}
	if res := run(parent, ws, "javascript", "globalThis.k = 1"); res.Status != codecell.StatusSuccess {
		t.Fatalf("%s %+v %s", res.Status, res.Error, res.Stderr)
	}
	child, reps, err := parent.Fork(ctx, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	var notes []string
	for _, r := range reps {
		switch r.Language {
		case "python":
			if strings.Join(r.Copied, ",") != "blob,n" || r.Bytes < 2<<20 {
				t.Errorf("python: %+v", r)
			}
		default:
			notes = append(notes, r.Note)
		}
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "starts a fresh interpreter") {
		t.Errorf("reports %+v", reps)
	}
	// A fork of the fork, before the fork's first cell, starts from the
	// same state.
	grand, greps, err := child.Fork(ctx, 64<<20)
	if err != nil || len(greps) != 1 || strings.Join(greps[0].Copied, ",") != "blob,n" {
		t.Fatalf("%+v %v", greps, err)
	}
	if res := run(grand, t.TempDir(), "python", "n"); string(res.Value) != "41" {
		t.Fatalf("the fork's fork: %s %+v %q", res.Value, res.Error, res.Warnings)
	}
	grand.Close()
	cws := t.TempDir()
	if res := run(child, cws, "python", "n += 1\n[n, len(blob)]"); string(res.Value) != "[42,2097152]" {
		t.Fatalf("the fork's first cell: %s %+v %q", res.Value, res.Error, res.Warnings)
	}
	if res := run(parent, ws, "python", "n"); string(res.Value) != "41" {
		t.Fatalf("the parent: %s", res.Value)
	}
	if res := run(child, cws, "javascript", "typeof globalThis.k"); string(res.Value) != `"undefined"` {
		t.Fatalf("the fork's JavaScript: %s", res.Value)
	}
	child.Close()
	// A fork ended before its first cell: its state is dropped.
	unused, _, err := parent.Fork(ctx, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	unused.Close()
	if left, _ := filepath.Glob(filepath.Join(tmp, "codecell-fork-*")); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
	// Bounded: a state larger than the fork may copy is refused, and the
	// parent keeps its interpreter.
	if _, _, err := parent.Fork(ctx, 1<<20); !errors.Is(err, codecell.ErrForkTooLarge) {
		t.Errorf("a fork of 2 MiB with 1 MiB allowed: %v", err)
	}
	if res := run(parent, ws, "python", "n"); string(res.Value) != "41" || res.SessionState != codecell.SessionKept {
		t.Fatalf("the parent after a refused fork: %s %q", res.Value, res.SessionState)
	}
}
