package session

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A session is its owner's: to another principal it does not exist, by id
// or by name; an admin may read and end it, not change it.
func TestSessionsBelongToTheirOwner(t *testing.T) {
	s := newStore(t, time.Hour, 20)
	bob := &Principal{Name: "bob"}
	root := &Principal{Name: "root", Admin: true}

	made, err := s.Create(alice, Options{})
	if err != nil {
		t.Fatal(err)
	}
	shared, err := s.Acquire(alice, "shared")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(shared.Workspace, "secret"), []byte("alice's"), 0o644); err != nil {
		t.Fatal(err)
	}
	shared.Release()

	// bob's "shared" is a workspace of his own.
	bobs, err := s.Acquire(bob, "shared")
	if err != nil {
		t.Fatal(err)
	}
	if bobs == shared || bobs.Workspace == shared.Workspace || bobs.Owner != "bob" || bobs.Name != "shared" {
		t.Fatalf("bob's \"shared\" is %+v, alice's %+v", bobs, shared)
	}
	if _, err := os.Stat(filepath.Join(bobs.Workspace, "secret")); !os.IsNotExist(err) {
		t.Fatalf("bob's workspace holds alice's file: %v", err)
	}
	bobs.Release()

	for _, id := range []string{made.ID, shared.ID} {
		if _, err := s.Get(bob, id); !errors.Is(err, ErrNotFound) {
			t.Errorf("bob's Get of alice's %s: %v, want ErrNotFound", id, err)
		}
		if _, err := s.TryAcquire(bob, id); !errors.Is(err, ErrNotFound) {
			t.Errorf("bob's TryAcquire of alice's %s: %v, want ErrNotFound", id, err)
		}
		if err := s.Delete(bob, id); !errors.Is(err, ErrNotFound) {
			t.Errorf("bob's Delete of alice's %s: %v, want ErrNotFound", id, err)
		}
		// An MCP client naming alice's id gets a session of its own by
		// that name, never alice's.
		got, err := s.Acquire(bob, id)
		if err != nil {
			t.Fatal(err)
		}
		if got.Owner != "bob" || got.ID == id || got.Name != id {
			t.Errorf("bob's Acquire of alice's id %s gave %+v", id, got)
		}
		got.Release()
	}
	// Her own id still gives alice her session.
	if got, err := s.Acquire(alice, made.ID); err != nil || got != made {
		t.Fatalf("alice's Acquire of her id: %v %v", got, err)
	} else {
		got.Release()
	}

	if ids := idsOf(s.List(alice)); ids != sortedIDs(made, shared) {
		t.Errorf("alice lists %s", ids)
	}
	for _, ses := range s.List(bob) {
		if ses.Owner != "bob" {
			t.Errorf("bob lists %+v", ses)
		}
	}
	if n := len(s.List(root)); n != s.Len() || n != 5 {
		t.Errorf("the admin lists %d of %d sessions", n, s.Len())
	}
	if len(s.List(nil)) != 0 || len(s.List(&Principal{})) != 0 {
		t.Error("a missing principal lists sessions")
	}

	// An admin reads and ends, but does not change.
	if got, err := s.Get(root, made.ID); err != nil || got != made {
		t.Errorf("the admin's Get: %v %v", got, err)
	}
	if _, err := s.TryAcquire(root, made.ID); !errors.Is(err, ErrNotOwner) {
		t.Errorf("the admin's TryAcquire: %v, want ErrNotOwner", err)
	}
	if got, err := s.Acquire(root, shared.ID); err != nil || got.Owner != "root" {
		t.Errorf("the admin's Acquire of alice's id: %+v %v", got, err)
	} else {
		got.Release()
	}
	if err := s.Delete(root, made.ID); err != nil {
		t.Errorf("the admin's Delete: %v", err)
	}
	if _, err := s.Get(alice, made.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("after the admin's Delete: %v", err)
	}

	// No principal, no session.
	if _, err := s.Create(nil, Options{}); err == nil {
		t.Error("Create without a principal")
	}
	if _, err := s.Acquire(&Principal{}, "x"); err == nil {
		t.Error("Acquire with a nameless principal")
	}
	if _, err := s.Get(nil, shared.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get without a principal: %v", err)
	}
}

func idsOf(list []*Session) string {
	var ids []string
	for _, s := range list {
		ids = append(ids, s.ID)
	}
	return strings.Join(ids, ",")
}

func sortedIDs(a, b *Session) string {
	if a.ID > b.ID {
		a, b = b, a
	}
	return a.ID + "," + b.ID
}

// A principal holds at most its MaxSessions, made by Create or by Acquire,
// and gets them back when its sessions end, deleted or expired; the store's
// own maximum still holds.
func TestPrincipalMaxSessions(t *testing.T) {
	s := newStore(t, time.Hour, 4)
	ended := make(chan *Session, 10)
	s.OnEnd(func(ses *Session, reason string) { ended <- ses })
	two := &Principal{Name: "two", MaxSessions: 2}
	other := &Principal{Name: "other"}

	a, err := s.Create(two, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Acquire(two, "b")
	if err != nil {
		t.Fatal(err)
	}
	b.Release()
	if _, err := s.Create(two, Options{}); !errors.Is(err, ErrPrincipalFull) {
		t.Fatalf("a third session: %v, want ErrPrincipalFull", err)
	}
	if _, err := s.Acquire(two, "c"); !errors.Is(err, ErrPrincipalFull) {
		t.Fatalf("a third, named: %v, want ErrPrincipalFull", err)
	}
	// What it holds it may still use.
	if again, err := s.Acquire(two, "b"); err != nil || again != b {
		t.Fatalf("its own session at its maximum: %v %v", again, err)
	} else {
		again.Release()
	}
	// Another principal is not held back by it, but by the store.
	for range 2 {
		if _, err := s.Create(other, Options{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Create(other, Options{}); !errors.Is(err, ErrTooMany) {
		t.Fatalf("past the store's maximum: %v, want ErrTooMany", err)
	}
	if err := s.Delete(two, a.ID); err != nil {
		t.Fatal(err)
	}
	<-ended
	short, err := s.Create(two, Options{Idle: 50 * time.Millisecond})
	if err != nil {
		t.Fatalf("after a delete: %v", err)
	}
	if _, err := s.Create(two, Options{}); !errors.Is(err, ErrPrincipalFull) {
		t.Fatalf("at the maximum again: %v", err)
	}
	// An expired session is given back too.
	if got := <-ended; got != short {
		t.Fatalf("ended %s, want the short-lived %s", got.ID, short.ID)
	}
	if _, err := s.Create(two, Options{}); err != nil {
		t.Fatalf("after an expiry: %v", err)
	}
}

func TestDefaultShare(t *testing.T) {
	for _, c := range []struct{ total, principals, want int }{
		{4, 0, 0}, {4, 1, 0}, {4, 2, 2}, {4, 5, 2}, {3, 2, 2}, {1, 2, 1}, {100, 3, 50}, {0, 3, 0},
	} {
		if got := DefaultShare(c.total, c.principals); got != c.want {
			t.Errorf("DefaultShare(%d, %d) = %d, want %d", c.total, c.principals, got, c.want)
		}
	}
}

func TestLogHandler(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(LogHandler(slog.NewJSONHandler(&buf, nil))).With("k", "v")
	log.InfoContext(WithPrincipal(context.Background(), alice), "with")
	log.InfoContext(context.Background(), "without")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"principal":"alice"`) || !strings.Contains(lines[0], `"k":"v"`) ||
		strings.Contains(lines[1], "principal") {
		t.Fatalf("logged:\n%s", buf.String())
	}
}
