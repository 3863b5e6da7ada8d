package session

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/codecell-dev/codecell"
)

// alice is the principal of the tests that need only one.
var alice = &Principal{Name: "alice"}

func newStore(t *testing.T, ttl time.Duration, max int) *Store {
	s, err := NewStore(t.TempDir(), ttl, max)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func TestWorkspacePersists(t *testing.T) {
	s := newStore(t, time.Hour, 10)
	a, err := s.Acquire(alice, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(a.Workspace, "note.txt"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	a.Release()
	b, err := s.Acquire(alice, "s1")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	if got, err := os.ReadFile(filepath.Join(b.Workspace, "note.txt")); err != nil || string(got) != "kept" {
		t.Fatalf("the second program of the session reads %q, %v", got, err)
	}
	c, err := s.Acquire(alice, "s2")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	if c.Workspace == b.Workspace {
		t.Fatal("two sessions share a workspace")
	}
}

func TestBadIDs(t *testing.T) {
	s := newStore(t, time.Hour, 10)
	for _, id := range []string{"", "../x", "a/b", "a b", string(make([]byte, 65)), "ü"} {
		if _, err := s.Acquire(alice, id); err == nil {
			t.Errorf("id %q was accepted", id)
		}
	}
	if entries, _ := os.ReadDir(s.dir); len(entries) != 0 {
		t.Errorf("refused ids left directories: %v", entries)
	}
}

func TestMaximum(t *testing.T) {
	s := newStore(t, time.Hour, 2)
	for _, id := range []string{"a", "b"} {
		ses, err := s.Acquire(alice, id)
		if err != nil {
			t.Fatal(err)
		}
		ses.Release()
	}
	if _, err := s.Acquire(alice, "c"); !errors.Is(err, ErrTooMany) {
		t.Fatalf("a third session: %v", err)
	}
	if ses, err := s.Acquire(alice, "a"); err != nil {
		t.Fatalf("an existing session at the maximum: %v", err)
	} else {
		ses.Release()
	}
	a, err := s.Acquire(alice, "a")
	if err != nil {
		t.Fatal(err)
	}
	a.Release()
	if err := s.Delete(alice, a.ID); err != nil {
		t.Fatalf("Delete of an existing session: %v", err)
	}
	if ses, err := s.Acquire(alice, "c"); err != nil {
		t.Fatalf("after a delete: %v", err)
	} else {
		ses.Release()
	}
}

// One program of a session runs at a time.
func TestOneProgramAtATime(t *testing.T) {
	s := newStore(t, time.Hour, 10)
	var running, most atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ses, err := s.Acquire(alice, "shared")
			if err != nil {
				t.Error(err)
				return
			}
			n := running.Add(1)
			for {
				m := most.Load()
				if n <= m || most.CompareAndSwap(m, n) {
					break
				}
			}
			time.Sleep(5 * time.Millisecond)
			running.Add(-1)
			ses.Release()
		}()
	}
	wg.Wait()
	if most.Load() != 1 {
		t.Fatalf("%d programs of one session ran at once", most.Load())
	}
}

// An idle session expires and its workspace goes; a held one stays however
// long its program runs.
func TestExpiry(t *testing.T) {
	s := newStore(t, 100*time.Millisecond, 10)
	idle, _ := s.Acquire(alice, "idle")
	idle.Release()
	busy, _ := s.Acquire(alice, "busy")
	deadline := time.Now().Add(10 * time.Second)
	for s.Len() > 1 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if left := s.List(alice); len(left) != 1 || left[0].Name != "busy" {
		t.Fatalf("sessions left: %v, want busy alone", left)
	}
	if _, err := os.Stat(idle.Workspace); !os.IsNotExist(err) {
		t.Errorf("the expired session's workspace is still there: %v", err)
	}
	if _, err := os.Stat(busy.Workspace); err != nil {
		t.Errorf("the busy session's workspace: %v", err)
	}
	busy.Release()
	// Coming back after expiry gives a fresh, empty workspace.
	again, err := s.Acquire(alice, "idle")
	if err != nil {
		t.Fatal(err)
	}
	defer again.Release()
	if entries, err := os.ReadDir(again.Workspace); err != nil || len(entries) != 0 {
		t.Errorf("the new session's workspace: %v %v", entries, err)
	}
}

// A live session's interpreters end with it, whether it expires or is
// deleted.
func TestLiveEndsWithSession(t *testing.T) {
	s := newStore(t, 100*time.Millisecond, 10)
	eng := &codecell.Engine{}
	lives := map[string]*codecell.Live{}
	for _, name := range []string{"expires", "deleted"} {
		live := eng.NewLive()
		lives[name] = live
		ses, err := s.AcquireOr(alice, name, func() Options { return Options{Live: live} })
		if err != nil {
			t.Fatal(err)
		}
		if ses.State() != "live" || ses.Live != live {
			t.Fatalf("%s: state %q", name, ses.State())
		}
		if name != "expires" {
			// Held: not idle, so it does not expire.
			defer ses.Release()
		} else {
			ses.Release()
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for !lives["expires"].Ended() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if !lives["expires"].Ended() || lives["deleted"].Ended() {
		t.Fatalf("after expiry: %v %v", lives["expires"].Ended(), lives["deleted"].Ended())
	}
	for _, ses := range s.List(alice) {
		if ses.Name == "deleted" {
			go func() {
				if err := s.Delete(alice, ses.ID); err != nil {
					t.Error(err)
				}
			}()
		}
	}
	// Delete ends the interpreters before it waits for the held session.
	for !lives["deleted"].Ended() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if !lives["deleted"].Ended() {
		t.Fatal("deleting the session left its interpreters")
	}
}

// Close removes every workspace.
func TestClose(t *testing.T) {
	dir := t.TempDir()
	s, err := NewStore(dir, time.Hour, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b"} {
		ses, _ := s.Acquire(alice, id)
		os.WriteFile(filepath.Join(ses.Workspace, "f"), []byte("x"), 0o644)
		ses.Release()
	}
	s.Close()
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("left after Close: %v", entries)
	}
}

func TestCreateGetTryAcquire(t *testing.T) {
	s := newStore(t, time.Hour, 2)
	a, err := s.Create(alice, Options{Tier: "native"})
	if err != nil {
		t.Fatal(err)
	}
	if !validID().MatchString(a.ID) || len(a.ID) < 32 {
		t.Fatalf("id %q is not a long valid id", a.ID)
	}
	if got, err := s.Get(alice, a.ID); err != nil || got != a || got.Tier != "native" {
		t.Fatalf("Get: %v, %v", got, err)
	}
	if a.Owner != "alice" || a.Name != "" {
		t.Fatalf("a created session's owner and name: %q %q", a.Owner, a.Name)
	}
	if _, err := s.Get(alice, "ses_nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get of a missing session: %v", err)
	}
	held, err := s.TryAcquire(alice, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.TryAcquire(alice, a.ID); !errors.Is(err, ErrBusy) {
		t.Fatalf("a second TryAcquire while held: %v, want ErrBusy", err)
	}
	held.Running(func() {})
	if info := held.Info(); !info.Running || info.Executions != 1 {
		t.Fatalf("info while running: %+v", info)
	}
	held.Release()
	if info := a.Info(); info.Running || info.Executions != 1 {
		t.Fatalf("info after: %+v", info)
	}
	if _, err := s.Create(alice, Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(alice, Options{}); !errors.Is(err, ErrTooMany) {
		t.Fatalf("a third session in a store of two: %v", err)
	}
}

func TestDeleteEndsTheRunningProgram(t *testing.T) {
	s := newStore(t, time.Hour, 5)
	var ended []string
	var mu sync.Mutex
	s.OnEnd(func(ses *Session, reason string) {
		mu.Lock()
		ended = append(ended, reason)
		mu.Unlock()
	})
	a, _ := s.Create(alice, Options{})
	held, err := s.TryAcquire(alice, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	stopped := make(chan struct{})
	held.Running(func() { close(stopped) })
	go func() {
		<-stopped // the program ends when cancelled
		held.Release()
	}()
	if err := s.Delete(alice, a.ID); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := os.Stat(a.Workspace); !os.IsNotExist(err) {
		t.Fatalf("the workspace is still there: %v", err)
	}
	if _, err := s.TryAcquire(alice, a.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("TryAcquire after Delete: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ended) != 1 || ended[0] != "deleted" {
		t.Fatalf("OnEnd saw %v", ended)
	}
}

func TestLifetimeAndIdle(t *testing.T) {
	s := newStore(t, time.Hour, 5)
	short, _ := s.Create(alice, Options{TTL: 1500 * time.Millisecond})
	idle, _ := s.Create(alice, Options{Idle: 1500 * time.Millisecond})
	kept, _ := s.Create(alice, Options{})
	// Use the idle one while the short-lived one's lifetime runs out: use
	// does not extend a lifetime.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if h, err := s.TryAcquire(alice, short.ID); err == nil {
			h.Release()
		}
		if _, err := s.Get(alice, short.ID); errors.Is(err, ErrNotFound) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := s.Get(alice, short.ID); !errors.Is(err, ErrNotFound) {
		t.Fatal("a session past its lifetime was kept because it was used")
	}
	for time.Now().Before(deadline) {
		if _, err := s.Get(alice, idle.ID); errors.Is(err, ErrNotFound) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := s.Get(alice, idle.ID); !errors.Is(err, ErrNotFound) {
		t.Fatal("an idle session was kept past its idle timeout")
	}
	if _, err := s.Get(alice, kept.ID); err != nil {
		t.Fatalf("a session with the store's hour of idle time ended: %v", err)
	}
}
