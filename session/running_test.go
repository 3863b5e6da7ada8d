package session

import (
	"sync"
	"testing"
)

func TestRunningBoundsServerAndPrincipal(t *testing.T) {
	r := NewRunning(3)
	alice := &Principal{Name: "alice", MaxRunning: 2}
	bob := &Principal{Name: "bob"}
	var refusedOf []bool
	r.OnRefused = func(_ string, ofPrincipal bool) { refusedOf = append(refusedOf, ofPrincipal) }

	a1, env := r.Acquire(alice)
	if env != nil {
		t.Fatal(env)
	}
	if _, env = r.Acquire(alice); env != nil {
		t.Fatal(env)
	}
	if _, env = r.Acquire(alice); env == nil || env.Code != CodeTooManyExecutions || !env.Retryable {
		t.Fatalf("alice's third program: %+v, want a retryable %s", env, CodeTooManyExecutions)
	}
	if _, env = r.Acquire(bob); env != nil {
		t.Fatal(env)
	}
	if _, env = r.Acquire(bob); env == nil {
		t.Fatal("a fourth program ran on a server of 3")
	}
	if r.Len() != 3 {
		t.Fatalf("Len = %d, want 3", r.Len())
	}
	a1()
	a1() // a second release gives back nothing more
	if r.Len() != 2 {
		t.Fatalf("Len after one release (twice) = %d, want 2", r.Len())
	}
	if _, env = r.Acquire(alice); env != nil {
		t.Fatalf("alice after a release: %v", env)
	}
	if len(refusedOf) != 2 || !refusedOf[0] || refusedOf[1] {
		t.Fatalf("refusals reported %v, want [principal server]", refusedOf)
	}
}

func TestRunningConcurrentNeverExceedsMax(t *testing.T) {
	r := NewRunning(4)
	var mu sync.Mutex
	now, peak := 0, 0
	r.OnStart = func(string) {
		mu.Lock()
		now++
		peak = max(peak, now)
		mu.Unlock()
	}
	r.OnEnd = func(string) {
		mu.Lock()
		now--
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := &Principal{Name: []string{"a", "b"}[i%2], MaxRunning: 3}
			for range 50 {
				if release, env := r.Acquire(p); env == nil {
					release()
				}
			}
		}()
	}
	wg.Wait()
	if peak > 4 || r.Len() != 0 {
		t.Fatalf("peak %d running (max 4), %d left", peak, r.Len())
	}
}
