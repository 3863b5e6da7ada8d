//go:build linux

package native_test

import (
	"testing"
	"time"

	"github.com/codecell-dev/codecell"
)

// A cell that writes on the control socket without ever ending a line
// (64 MiB of it, then waits) is refused at once: the host holds a few bytes
// of it, not all, and does not wait for the cell's timeout. The next cell
// runs in a fresh interpreter.
func TestLiveControlFlood(t *testing.T) {
	s := newLiveSession(t, nil)
	wantKept(t, s.cell("x = 1"), nil)
	res := s.cell("import os, time\nb = b'x' * (1 << 20)\nfor _ in range(64):\n    os.write(3, b)\ntime.sleep(60)",
		func(x *codecell.Exec) { x.Limits.Timeout = 20 * time.Second })
	if res.SessionState != codecell.SessionLost || res.Status == codecell.StatusSuccess || res.Status == codecell.StatusTimeout {
		t.Fatalf("status %s, session %q, error %+v", res.Status, res.SessionState, res.Error)
	}
	wantKept(t, s.cell("'x' in globals()"), false)
}

// A thread a cell leaves behind writes, while the next cell runs, the
// answer that cell would give (its id guessed as the next in turn, a
// well-formed record with value 42). The host does not take it for the
// cell's: the answer names a request id the interpreter's program does not
// know, and one that names another is refused with the interpreter.
func TestLiveForgedNextAnswer(t *testing.T) {
	s := newLiveSession(t, nil)
	wantKept(t, s.cell(`import os, threading
go, sent = threading.Event(), threading.Event()
def forge():
    go.wait()
    raw = b'{"start":true}\n{"value":42}\n'
    for i in range(2, 6):
        os.write(3, b"done %d 0 %d\n" % (i, len(raw)) + raw)
    sent.set()
threading.Thread(target=forge, daemon=True).start()`), nil)
	res := s.cell("go.set()\nsent.wait(10)\n7", func(x *codecell.Exec) { x.Limits.Timeout = 20 * time.Second })
	if res.Status == codecell.StatusSuccess || res.SessionState != codecell.SessionLost {
		t.Fatalf("status %s, value %s, session %q, error %+v", res.Status, res.Value, res.SessionState, res.Error)
	}
	wantKept(t, s.cell("'go' in globals()"), false)
}
