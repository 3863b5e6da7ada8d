package testenv

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/codecell-dev/codecell"
)

// Gate makes a FIFO that the test MCP server, started with "gate FIFO",
// waits on before it speaks MCP, and returns the function that lets it go
// on. A test that ends without opening it opens it then, so that no server
// is left waiting.
func Gate(t testing.TB) (path string, open func()) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "gate")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	opened := false
	open = func() {
		if opened {
			return
		}
		opened = true
		// Opening for writing alone would block until the server opens it
		// for reading; O_RDWR does not, and the server's open then returns.
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
	}
	t.Cleanup(open)
	return path, open
}

// WaitState waits, on the source's own notifications, until it is in
// state, and returns its status then; the minute only bounds a failure.
func WaitState(t testing.TB, src codecell.StartingSource, state codecell.SourceState) codecell.SourceStatus {
	t.Helper()
	changed := make(chan struct{}, 1)
	stop := src.Watch(func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	})
	defer stop()
	timeout := time.After(time.Minute)
	for {
		st := src.Status()
		if st.State == state {
			return st
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("%s is %s, not %s, after a minute", src.Name(), st, state)
		}
	}
}
