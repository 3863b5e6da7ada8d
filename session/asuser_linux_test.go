package session

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/testenv"
)

// asUserUID is the user the tests here run as: no one's.
const asUserUID = 2_138_000_021

// TestAsAUserForkAndEnd: a store of a user who is not root forks a
// session whose workspace holds a file that user may not read and a
// directory shut to it (as a program or an upload leaves them): the fork
// gets them with their permissions, and the source keeps its own; ending
// both sessions removes their workspaces whole. The test runs itself
// again as another user (it needs root to), where the checks are made.
func TestAsAUserForkAndEnd(t *testing.T) {
	if work := testenv.AsUser(); work != "" {
		t.Setenv("TMPDIR", work)
		forkAndEndAsUser(t)
		return
	}
	testenv.RunAsUser(t, asUserUID)
}

func forkAndEndAsUser(t *testing.T) {
	s := newStore(t, time.Hour, 3)
	a, err := s.Create(alice, Options{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(a.Workspace, "shut", "in"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"none.txt", "shut/in/f.txt"} {
		if err := os.WriteFile(filepath.Join(a.Workspace, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		p    string
		perm os.FileMode
	}{{"none.txt", 0}, {"shut/in", 0o500}, {"shut", 0}} {
		if err := os.Chmod(filepath.Join(a.Workspace, c.p), c.perm); err != nil {
			t.Fatal(err)
		}
	}
	b, _, err := s.Fork(context.Background(), alice, a.ID, "b", codecell.DefaultLimits)
	if err != nil {
		t.Fatalf("fork: %v", err)
	}
	for _, ws := range []string{a.Workspace, b.Workspace} {
		if info, err := os.Stat(filepath.Join(ws, "none.txt")); err != nil || info.Mode().Perm() != 0 {
			t.Errorf("none.txt in %s: %v %v", ws, info, err)
		}
	}
	if info, err := os.Stat(filepath.Join(a.Workspace, "shut")); err != nil || info.Mode().Perm() != 0 {
		t.Errorf("shut, in the session forked, is now %v (%v)", info, err)
	}
	if err := os.Chmod(filepath.Join(b.Workspace, "shut", "in"), 0o755); err != nil {
		t.Errorf("the fork's shut/in: %v", err)
	} else if got, err := os.ReadFile(filepath.Join(b.Workspace, "shut", "in", "f.txt")); err != nil || string(got) != "x" {
		t.Errorf("the fork's shut/in/f.txt: %q %v", got, err)
	}
	for _, ses := range []*Session{a, b} {
		if err := s.Delete(alice, ses.ID); err != nil {
			t.Fatalf("deleting %s: %v", ses.ID, err)
		}
		if _, err := os.Lstat(ses.Workspace); !os.IsNotExist(err) {
			t.Errorf("the workspace of %s after its end: %v", ses.ID, err)
		}
	}
}
