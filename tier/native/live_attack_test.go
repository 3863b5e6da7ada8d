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
