package codecell

import (
	"bufio"
	"context"
	"os"
	"sync"
	"testing"
	"time"
)

// stuckProgram is a live interpreter that reads nothing on its control
// socket (stopped, or its runner held by a thread a cell left): its end
// stays open until it is killed.
type stuckProgram struct {
	end    *os.File // the interpreter's end of the control socket
	once   sync.Once
	done   chan struct{}
	killed chan struct{}
}

func (s *stuckProgram) SyncIn() error                     { return nil }
func (s *stuckProgram) SyncOut() ([]FileChange, []string) { return nil, nil }
func (s *stuckProgram) Interrupt() error                  { return nil }
func (s *stuckProgram) Done() <-chan struct{}             { return s.done }
func (s *stuckProgram) Isolation() Isolation              { return Isolation{} }
func (s *stuckProgram) MemoryUsage() int64                { return 0 }
func (s *stuckProgram) Close()                            { s.Kill() }
func (s *stuckProgram) Exit() *Outcome                    { return nil }
func (s *stuckProgram) Kill() {
	s.once.Do(func() {
		s.end.Close()
		close(s.killed)
		close(s.done)
	})
}

// A request larger than the control socket holds, to an interpreter that
// does not read, is bounded by the request's time as its answer is: once
// the time and the grace are up the interpreter is killed, and ask
// returns, rather than wait on the write for good.
func TestLiveAskBoundedWhileWriting(t *testing.T) {
	host, end, err := filePair("control")
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	prog := &stuckProgram{end: end, done: make(chan struct{}), killed: make(chan struct{})}
	p := &liveProc{prog: prog, ctl: host, ctlR: bufio.NewReader(host)}
	p.nextID()
	req := make([]byte, 8<<20) // far more than a socket's buffer
	for i := range req {
		req[i] = 'x'
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	asked := make(chan error, 1)
	go func() {
		_, _, _, err := p.ask(ctx, req, 1<<20)
		asked <- err
	}()
	select {
	case err := <-asked:
		if err == nil {
			t.Fatal("an answer came from an interpreter that wrote none")
		}
	case <-time.After(LiveInterruptGrace + 30*time.Second):
		prog.Kill()
		t.Fatal("ask still waits on its write, long past the time and the grace")
	}
	select {
	case <-prog.killed:
	default:
		t.Fatal("the interpreter was not killed")
	}
}

// A fork's first cell waits for the state copied from the session forked
// within the time a restore has, not for good: a copy that stalls (its
// sender stopped in the other session's sandbox) costs the fork its state,
// with a warning, not the cell.
func TestLiveRestoreWaitBounded(t *testing.T) {
	defer func(d time.Duration) { restoreWithin = d }(restoreWithin)
	restoreWithin = 100 * time.Millisecond
	sock, other, err := filePair("fork")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	st := &forkState{done: make(chan struct{}), sock: sock}
	go func() {
		// The copy: it reads until the socket is closed.
		defer close(st.done)
		b := make([]byte, 1)
		for {
			if _, err := sock.Read(b); err != nil {
				return
			}
		}
	}()
	p := &liveProc{}
	warned := make(chan string, 1)
	go func() { warned <- p.restore(context.Background(), st) }()
	select {
	case w := <-warned:
		if w == "" {
			t.Fatal("no warning for a state that never came")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the restore still waits for a state that does not come")
	}
}
