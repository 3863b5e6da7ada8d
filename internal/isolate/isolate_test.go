package isolate

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const workerArg = "isolate-test-worker"

func init() {
	Register("echo", func(in json.RawMessage) (any, error) {
		var s string
		err := json.Unmarshal(in, &s)
		return s, err
	})
	Register("pid", func(json.RawMessage) (any, error) { return os.Getpid(), nil })
	Register("fail", func(json.RawMessage) (any, error) { return nil, errors.New("refused by the function") })
	Register("panic", func(json.RawMessage) (any, error) { panic("a fault in the function") })
	// A recursion as deep as the input asks: bounded by the worker's stack.
	Register("recurse", func(in json.RawMessage) (any, error) {
		var n int
		if err := json.Unmarshal(in, &n); err != nil {
			return nil, err
		}
		return recurse(n), nil
	})
	// An allocation as large as the input asks, touched so that it is
	// real: bounded by the worker's memory limit.
	Register("alloc", func(in json.RawMessage) (any, error) {
		var n int
		if err := json.Unmarshal(in, &n); err != nil {
			return nil, err
		}
		b := make([]byte, n)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		return len(b), nil
	})
	// A loop that ends only when the process does. Given a FIFO, it says
	// there that it has started.
	Register("spin", func(in json.RawMessage) (any, error) {
		var fifo string
		_ = json.Unmarshal(in, &fifo)
		if fifo != "" {
			f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
			if err != nil {
				return nil, err
			}
			f.Write([]byte{1})
			f.Close()
		}
		for {
			time.Sleep(time.Millisecond)
		}
	})
}

//go:noinline
func recurse(n int) int {
	var pad [256]byte
	if n == 0 {
		return int(pad[0])
	}
	return recurse(n-1) + 1 + int(pad[n%256])
}

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == workerArg {
		Serve()
	}
	os.Exit(m.Run())
}

func newPool(t *testing.T) *Pool {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := &Pool{Path: exe, Args: []string{exe, workerArg}, Max: 2, Timeout: 20 * time.Second}
	t.Cleanup(p.Close)
	return p
}

func TestCall(t *testing.T) {
	p := newPool(t)
	ctx := context.Background()
	var s string
	if err := p.Call(ctx, "echo", "héllo", &s); err != nil || s != "héllo" {
		t.Fatalf("%q %v", s, err)
	}
	// The worker is kept for the next call.
	var pid1, pid2 int
	if err := p.Call(ctx, "pid", nil, &pid1); err != nil {
		t.Fatal(err)
	}
	if err := p.Call(ctx, "pid", nil, &pid2); err != nil {
		t.Fatal(err)
	}
	if pid1 == os.Getpid() || pid1 != pid2 {
		t.Fatalf("pids %d %d (this process %d)", pid1, pid2, os.Getpid())
	}
	// A function's error and a panic are the function's, and cost nothing
	// more: the same worker answers next.
	if err := p.Call(ctx, "fail", nil, &s); err == nil || err.Error() != "refused by the function" {
		t.Fatalf("%v", err)
	}
	var f *Failure
	if err := p.Call(ctx, "panic", nil, &s); err == nil || !strings.Contains(err.Error(), "a fault in the function") || errors.As(err, &f) {
		t.Fatalf("%v", err)
	}
	if err := p.Call(ctx, "nothing such", nil, &s); err == nil || !strings.Contains(err.Error(), "no function") {
		t.Fatalf("%v", err)
	}
	if err := p.Call(ctx, "pid", nil, &pid2); err != nil || pid2 != pid1 {
		t.Fatalf("%d %v", pid2, err)
	}
}

// What would kill a process kills only the worker: the call gets a
// *Failure that says why, and the next call gets a new worker.
func TestFailures(t *testing.T) {
	p := newPool(t)
	p.Base, p.Timeout = 3*time.Second, 3*time.Second
	ctx := context.Background()
	cases := []struct {
		fn     string
		in     any
		reason string
	}{
		// 1,000,000 frames of more than 256 bytes: past StackLimit (or,
		// under the race detector, past MemoryLimit first).
		{"recurse", 1_000_000, "ran out of"},
		// Twice MemoryLimit.
		{"alloc", 2 * MemoryLimit, "ran out of memory"},
		{"spin", nil, "took longer than 3s"},
	}
	for _, c := range cases {
		t.Run(c.fn, func(t *testing.T) {
			var before, after int
			if err := p.Call(ctx, "pid", nil, &before); err != nil {
				t.Fatal(err)
			}
			var out any
			err := p.Call(ctx, c.fn, c.in, &out)
			var f *Failure
			if !errors.As(err, &f) || !strings.Contains(f.Reason, c.reason) {
				t.Fatalf("err = %v, want a Failure: %s (%+v)", err, c.reason, f.Detail)
			}
			if err := p.Call(ctx, "pid", nil, &after); err != nil {
				t.Fatal(err)
			}
			if after == before {
				t.Fatal("the worker that failed was used again")
			}
			if processAlive(before) {
				t.Fatalf("the worker %d that failed is still alive", before)
			}
		})
	}
	// Bounded inputs still work.
	var n int
	if err := p.Call(ctx, "recurse", 10_000, &n); err != nil || n != 10_000 {
		t.Fatal(n, err)
	}
	if err := p.Call(ctx, "alloc", 64<<20, &n); err != nil || n != 64<<20 {
		t.Fatal(n, err)
	}
}

func processAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// A zombie is dead.
	f := strings.Fields(string(b))
	return len(f) > 2 && f[2] != "Z"
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// A caller that gives up ends its call at once, and the worker with it.
func TestCancel(t *testing.T) {
	p := newPool(t)
	var pid int
	if err := p.Call(context.Background(), "pid", nil, &pid); err != nil {
		t.Fatal(err)
	}
	fifo := t.TempDir() + "/started"
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		var out any
		done <- p.Call(ctx, "spin", fifo, &out)
	}()
	// Opening the FIFO waits for the worker to open it: the call is under
	// way in the worker.
	started, err := os.ReadFile(fifo)
	if err != nil || len(started) != 1 {
		t.Fatal(started, err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("%v", err)
	}
	if processAlive(pid) {
		t.Fatal("the worker of a cancelled call is still alive")
	}
}

// Calls run concurrently up to Max, each in its own worker.
func TestConcurrent(t *testing.T) {
	p := newPool(t)
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := strings.Repeat("x", i*1000)
			var out string
			if err := p.Call(context.Background(), "echo", in, &out); err != nil {
				errs <- err
			} else if out != in {
				errs <- errors.New("a mixed-up answer")
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.idle) > p.Max {
		t.Fatalf("%d idle workers, more than Max %d", len(p.idle), p.Max)
	}
}

// A call's time is bounded in proportion to its input, up to Timeout.
func TestBudget(t *testing.T) {
	p := &Pool{Base: 100 * time.Millisecond, PerMiB: time.Second, Timeout: 2 * time.Second}
	small, large := p.Budget(1000), p.Budget(1<<20)
	if small < p.Base || small >= large || large != 1100*time.Millisecond || p.Budget(100<<20) != p.Timeout {
		t.Fatalf("budgets %v, %v, %v", small, large, p.Budget(100<<20))
	}
	// The defaults give an ordinary program of the largest size codecell
	// takes several seconds, and a small one a second.
	d := &Pool{}
	if b := d.Budget(200_000); b < 5*time.Second || b > 10*time.Second*slowdown {
		t.Fatalf("200,000 bytes: %v", b)
	}
	if b := d.Budget(100); b < time.Second || b > 2*time.Second*slowdown {
		t.Fatalf("100 bytes: %v", b)
	}
	// A call that runs past its budget is ended there, and says so.
	q := newPool(t)
	q.Base, q.PerMiB = 200*time.Millisecond, time.Second
	var out any
	err := q.Call(context.Background(), "spin", "", &out)
	var f *Failure
	if !errors.As(err, &f) || !strings.Contains(f.Reason, "took longer than "+q.Budget(2).String()) {
		t.Fatalf("%v", err)
	}
}

// One owner holds at most PerOwner workers: its other calls wait, and
// another owner's call runs in the worker left.
func TestPerOwner(t *testing.T) {
	p := newPool(t) // Max 2, so PerOwner 1
	dir := t.TempDir()
	fifo := func(name string) string {
		path := dir + "/" + name
		if err := syscall.Mkfifo(path, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	spin := func(owner, fifo string) (context.CancelFunc, chan error) {
		ctx, cancel := context.WithCancel(WithOwner(context.Background(), owner))
		done := make(chan error, 1)
		go func() {
			var out any
			done <- p.Call(ctx, "spin", fifo, &out)
		}()
		return cancel, done
	}
	started := func(fifo string) {
		if b, err := os.ReadFile(fifo); err != nil || len(b) != 1 {
			t.Fatal(b, err)
		}
	}
	fa, fb, fc := fifo("a"), fifo("b"), fifo("c")
	cancelA, doneA := spin("alice", fa)
	started(fa)
	cancelB, doneB := spin("alice", fb)
	defer cancelB()
	// Alice's second call waits for her first; Bob's runs meanwhile.
	cancelC, doneC := spin("bob", fc)
	defer cancelC()
	started(fc)
	select {
	case err := <-doneB:
		t.Fatalf("alice's second call ran beside her first: %v", err)
	default:
	}
	p.mu.Lock()
	waiting := p.owners["alice"].refs
	p.mu.Unlock()
	if waiting != 2 {
		t.Fatalf("alice has %d calls, want 2", waiting)
	}
	// When her first ends, her second runs.
	cancelA()
	if err := <-doneA; !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	started(fb)
	cancelB()
	cancelC()
	<-doneB
	<-doneC
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.owners) != 0 {
		t.Fatalf("owners without calls are kept: %v", p.owners)
	}
}
