//go:build linux

package native_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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

// An error nothing catches in a JavaScript cell — thrown in a timer the
// cell left, or a promise rejected with no handler — is that cell's, or is
// reported between cells; it does not end node, which would lose what
// every earlier cell left and fail the next cell, whatever that cell does.
func TestLiveJavaScriptUncaught(t *testing.T) {
	s := newLiveSession(t, nil)
	js := func(x *codecell.Exec) { x.Language = "javascript"; x.Limits.Timeout = 20 * time.Second }
	wantKept(t, s.cell("var kept = 'yes'\n1", js), float64(1))

	// Rejected with no handler, while the cell runs: the cell fails with it.
	res := s.cell("Promise.reject(new Error('nobody waits'))\n5", js)
	if res.Status != codecell.StatusFailure || res.SessionState != codecell.SessionKept || !strings.Contains(res.Stderr, "nobody waits") {
		t.Fatalf("unhandled rejection: status %s, session %q, stderr %q, warnings %q", res.Status, res.SessionState, res.Stderr, res.Warnings)
	}
	// Thrown in a timer while the cell waits: the cell fails with it.
	res = s.cell("setTimeout(() => { throw new Error('from a timer') }, 0)\nawait new Promise(() => {})", js)
	if res.Status != codecell.StatusFailure || res.SessionState != codecell.SessionKept || !strings.Contains(res.Stderr, "from a timer") {
		t.Fatalf("thrown in a timer: status %s, session %q, stderr %q", res.Status, res.SessionState, res.Stderr)
	}
	// Thrown in a timer as the cell ends: the cell's (when it fires before
	// the cell's end) or said on stderr between cells; either way node
	// lives on, with what the cells left.
	res = s.cell("setTimeout(() => { throw new Error('after the cell') }, 0)\n2", js)
	if res.SessionState != codecell.SessionKept {
		t.Fatalf("thrown as the cell ends: status %s, session %q", res.Status, res.SessionState)
	}
	stderr := res.Stderr
	for i := 0; i < 3 && !strings.Contains(stderr, "after the cell"); i++ {
		res = s.cell("await new Promise((r) => setTimeout(r, 10))\nkept", js)
		if res.SessionState != codecell.SessionKept || res.Status != codecell.StatusSuccess && !strings.Contains(res.Stderr, "after the cell") {
			t.Fatalf("a cell after: status %s, session %q, stderr %q", res.Status, res.SessionState, res.Stderr)
		}
		stderr += res.Stderr
	}
	if !strings.Contains(stderr, "after the cell") {
		t.Fatalf("the timer's error was not reported: %q", stderr)
	}
	wantKept(t, s.cell("kept", js), "yes")
}

// A cell that breaks its interpreter's control channel (file descriptor 3)
// gets a Result that says so, not "killed by signal 9": what came on the
// channel that is no answer, or a channel closed under the runner. The
// session's interpreter is lost either way, and nothing waits for the
// cell's timeout. Python's runner answers on a descriptor of its own, so
// that closing 3 alone costs nothing.
func TestLiveControlChannelBroken(t *testing.T) {
	s := newLiveSession(t, nil)
	long := func(x *codecell.Exec) { x.Limits.Timeout = 20 * time.Second }
	wantKept(t, s.cell("x = 1"), nil)
	wantKept(t, s.cell("import os\nos.close(3)\nf = open('reuses-3.txt', 'w')\nf.fileno()", long), float64(3))
	wantKept(t, s.cell("x"), float64(1))
	s.live.Restart()
	for _, c := range []struct{ language, code string }{
		{"python", "import os, time\nos.write(3, b'not an answer\\n')\ntime.sleep(30)"},
		{"python", "import os\nos.closerange(3, 65536)\n5"},
		{"javascript", "require('fs').closeSync(3)\n5"},
	} {
		wantKept(t, s.cell("x = 1", func(x *codecell.Exec) {
			if c.language == "javascript" {
				x.Code = "var x = 1"
			}
			x.Language = c.language
		}), nil)
		start := time.Now()
		res := s.cell(c.code, long, func(x *codecell.Exec) { x.Language = c.language })
		if res.Status != codecell.StatusFailure || res.SessionState != codecell.SessionLost || res.Error == nil ||
			res.Error.Code == codecell.CodeKilledBySignal || !strings.Contains(res.Error.Message+res.Stderr, "control channel") {
			t.Errorf("%s %q: status %s, session %q, error %+v, stderr %q", c.language, c.code, res.Status, res.SessionState, res.Error, res.Stderr)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("%q took %v", c.code, d)
		}
	}
}

// What a cell leaves running or changed in its interpreter — a thread
// writing into the workspace, a forked process, an abstract socket
// listening, a file in /dev/shm, the working directory, the environment,
// a patched module and builtin — reaches neither a fork of the session nor
// the interpreter a restart starts.
func TestLiveForkAndRestartLeaveNothing(t *testing.T) {
	s := newLiveSession(t, nil)
	wantKept(t, s.cell(`import os, socket, threading, time, sys, builtins
os.chdir('/tmp')
os.environ['LEFT'] = 'yes'
sys.modules['json'].left = True
builtins.left = True
ab = socket.socket(socket.AF_UNIX)
ab.bind('\0codecell-left')
ab.listen()
open('/dev/shm/left', 'w').write('x')
stop = threading.Event()
def writer():
    while not stop.is_set():
        with open('/workspace/from-parent.txt', 'a') as f:
            f.write('p')
        time.sleep(0.005)
threading.Thread(target=writer, daemon=True).start()
if os.fork() == 0:
    while True:
        time.sleep(1)
kept = 'parent'`), nil)
	const look = `import os, socket, sys, builtins, threading
def reach():
    c = socket.socket(socket.AF_UNIX)
    try:
        c.connect('\0codecell-left')
        return 'connected'
    except OSError as e:
        return e.errno
[os.getcwd(), os.environ.get('LEFT'), getattr(sys.modules.get('json'), 'left', None), hasattr(builtins, 'left'), reach(),
 os.path.exists('/dev/shm/left'), len([p for p in os.listdir('/proc') if p.isdigit()]), threading.active_count(),
 os.path.exists('/workspace/from-parent.txt')]`
	// The parent still has all of it (but the environment, each cell's own).
	res := s.cell(look)
	wantKept(t, res, nil)
	if got := fmt.Sprint(value(t, res)); got != "[/tmp <nil> true true connected true 3 2 true]" {
		t.Fatalf("in the parent: %s", got)
	}
	forked, _, err := s.live.Fork(context.Background(), 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	f := &liveSession{t: t, e: s.e, ws: t.TempDir(), live: forked}
	t.Cleanup(forked.Close)
	const clean = "[/workspace <nil> <nil> false 111 false 2 1 false]"
	res = f.cell(look)
	wantKept(t, res, nil)
	if got := fmt.Sprint(value(t, res)); got != clean {
		t.Errorf("in the fork: %s, want %s", got, clean)
	}
	wantKept(t, f.cell("kept"), "parent")
	// The parent's thread writes on: into its own workspace, not the fork's.
	wantKept(t, s.cell("n = os.path.getsize('/workspace/from-parent.txt')\nwhile os.path.getsize('/workspace/from-parent.txt') == n:\n    time.sleep(0.005)"), nil)
	if _, err := os.Stat(filepath.Join(f.ws, "from-parent.txt")); !os.IsNotExist(err) {
		t.Errorf("the parent's thread wrote into the fork's workspace: %v", err)
	}
	s.live.Restart()
	os.Remove(filepath.Join(s.ws, "from-parent.txt"))
	res = s.cell(look)
	wantKept(t, res, nil)
	if got := fmt.Sprint(value(t, res)); got != clean {
		t.Errorf("after a restart: %s, want %s", got, clean)
	}
}

// A cell that writes tool calls on its tool channel (descriptor 4) and
// never reads the answers fills the channel both ways: the host's answers
// wait to be written. The cell still ends at its timeout, its Result
// comes, and the session's next cell runs.
func TestLiveToolAnswersUnread(t *testing.T) {
	s := newLiveSession(t, nil)
	wantKept(t, s.cell("x = 1"), nil)
	done := make(chan *codecell.Result, 1)
	go func() {
		done <- s.cell(`import os
req = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nope","arguments":{}}}\n'
for i in range(40000):
    os.write(4, req)`, func(x *codecell.Exec) { x.Limits.Timeout = 2 * time.Second })
	}()
	select {
	case res := <-done:
		if res.Status == codecell.StatusSuccess {
			t.Fatalf("the flood wrote all its calls: %+v", res)
		}
	case <-time.After(time.Minute):
		t.Fatal("the cell's Result did not come a minute after its 2 s timeout")
	}
	res := s.cell("x", func(x *codecell.Exec) { x.Limits.Timeout = 20 * time.Second })
	if res.Status != codecell.StatusSuccess {
		t.Fatalf("the next cell: %s %+v %q", res.Status, res.Error, res.Stderr)
	}
}
