package session

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/codecell-dev/codecell"
)

// A fork of a session that keeps files: its workspace copied, its settings
// kept, and the two apart from then on. Refused: a session busy with a
// program, a name in use, another principal's session, one over the
// store's maximum.
func TestForkFiles(t *testing.T) {
	s := newStore(t, time.Hour, 3)
	ctx := context.Background()
	a, err := s.Create(alice, Options{Limits: codecell.Limits{Memory: 64 << 20}, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(a.Workspace, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(a.Workspace, "d", "f.txt"), []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, reps, err := s.Fork(ctx, alice, a.ID, "b", codecell.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if len(reps) != 0 || b.Limits != a.Limits || b.TTL != a.TTL || b.Name != "b" || b.Owner != "alice" || b.Workspace == a.Workspace {
		t.Fatalf("%+v %+v", b, reps)
	}
	if got, err := os.ReadFile(filepath.Join(b.Workspace, "d", "f.txt")); err != nil || string(got) != "one" {
		t.Fatalf("%q %v", got, err)
	}
	if err := os.WriteFile(filepath.Join(b.Workspace, "d", "f.txt"), []byte("two"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(a.Workspace, "d", "f.txt")); string(got) != "one" {
		t.Fatalf("the fork's write reached the session forked: %q", got)
	}
	if _, _, err := s.Fork(ctx, alice, a.ID, "b", codecell.DefaultLimits); !errors.Is(err, ErrNameTaken) {
		t.Errorf("a name in use: %v", err)
	}
	// A name that is a session's ID would make the new session unreachable
	// by it.
	if _, _, err := s.Fork(ctx, alice, "b", a.ID, codecell.DefaultLimits); !errors.Is(err, ErrNameTaken) {
		t.Errorf("a session's ID as the name: %v", err)
	}
	if _, _, err := s.Fork(ctx, &Principal{Name: "bob"}, a.ID, "", codecell.DefaultLimits); !errors.Is(err, ErrNotFound) {
		t.Errorf("another principal's session: %v", err)
	}
	held, err := s.TryAcquire(alice, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Fork(ctx, alice, a.ID, "", codecell.DefaultLimits); !errors.Is(err, ErrBusy) {
		t.Errorf("a busy session: %v", err)
	}
	held.Release()
	if _, _, err := s.Fork(ctx, alice, "b", "", codecell.DefaultLimits); err != nil {
		t.Errorf("by name: %v", err)
	}
	if _, _, err := s.Fork(ctx, alice, a.ID, "", codecell.DefaultLimits); !errors.Is(err, ErrTooMany) {
		t.Errorf("over the store's maximum: %v", err)
	}
	if s.Len() != 3 {
		t.Errorf("%d sessions", s.Len())
	}
}
