//go:build linux

package tiertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/codecell-dev/codecell"
)

// nothingCarriesOver: what one run leaves — files outside its workspace,
// processes, environment, SysV IPC objects, the hostname, and the state of
// its interpreter (a patched module, sys.modules, builtins, a thread, the
// working directory, an open descriptor) — the next run on the same tier,
// which may get a sandbox or an interpreter made ready in advance, sees
// none of.
func (s *suite) nothingCarriesOver(t *testing.T) {
	if !s.caps.Isolating {
		t.Skip("a tier that does not isolate shares the host with every run")
	}
	leave := `import builtins, ctypes, os, socket, string, subprocess, sys, threading, time
open('/tmp/codecell-carry', 'w').write('A')
try:
    open('/dev/shm/codecell-carry', 'w').write('A')
except OSError:
    pass
os.environ['CODECELL_CARRY'] = 'A'
string.capwords = lambda *a, **k: 'patched'
sys.modules['codecell_carry'] = type(sys)('codecell_carry')
builtins.codecell_carry = True
threading.Thread(target=time.sleep, args=(30,), name='codecell-carry', daemon=True).start()
fd = os.open('/tmp/codecell-carry-fd', os.O_CREAT | os.O_RDWR)
os.set_inheritable(fd, True)
subprocess.Popen(['sleep', '29'], start_new_session=True)
libc = ctypes.CDLL(None, use_errno=True)
IPC_CREAT = 0o1000
made = [libc.shmget(0x5eed, 4096, IPC_CREAT | 0o600) >= 0, libc.msgget(0x5eed, IPC_CREAT | 0o600) >= 0,
        libc.semget(0x5eed, 1, IPC_CREAT | 0o600) >= 0]
libc.sethostname(b'carried', 7)
os.chdir('/tmp')
{"ipc": made, "hostname": socket.gethostname()}
`
	a := s.run(t, codecell.Exec{Language: "python", Code: leave})
	expect(t, a, codecell.StatusSuccess)
	look := `import builtins, os, socket, string, sys, threading
seen = []
for p in ('/tmp/codecell-carry', '/tmp/codecell-carry-fd', '/dev/shm/codecell-carry'):
    if os.path.exists(p):
        seen.append('file ' + p)
if 'CODECELL_CARRY' in os.environ:
    seen.append('environment')
if string.capwords('a b') != 'A B':
    seen.append('a patched module')
if 'codecell_carry' in sys.modules:
    seen.append('sys.modules')
if hasattr(builtins, 'codecell_carry'):
    seen.append('builtins')
if any(t.name == 'codecell-carry' for t in threading.enumerate()):
    seen.append('a thread')
if os.getcwd() != os.environ['HOME']:
    seen.append('working directory ' + os.getcwd())
for fd in os.listdir('/proc/self/fd'):
    try:
        if 'codecell-carry' in os.readlink('/proc/self/fd/' + fd):
            seen.append('descriptor ' + fd)
    except OSError:
        pass
for pid in os.listdir('/proc'):
    if pid.isdigit():
        try:
            cmd = open('/proc/%s/cmdline' % pid, 'rb').read()
        except OSError:
            continue
        if b'sleep\x0029' in cmd:
            seen.append('process ' + pid)
for kind in ('shm', 'msg', 'sem'):
    try:
        if len(open('/proc/sysvipc/' + kind).read().splitlines()) > 1:
            seen.append('SysV ' + kind)
    except OSError:
        pass
if socket.gethostname() == 'carried':
    seen.append('hostname')
seen
`
	for i := range 2 {
		b := s.run(t, codecell.Exec{Language: "python", Code: look})
		expect(t, b, codecell.StatusSuccess)
		expectValue(t, b, "[]")
		if t.Failed() {
			t.Logf("run %d after the one that left things (its value %s); isolation: %+v", i+1, a.Value, b.Isolation)
			return
		}
	}
}

// concurrentApart: two runs at once cannot reach each other — no signal,
// abstract socket, loopback port, /dev/shm file or /proc entry of one is
// the other's to reach. The first waits, in a tool call, until the second
// has tried.
func (s *suite) concurrentApart(t *testing.T) {
	if !s.caps.Isolating {
		t.Skip("a tier that does not isolate shares the host with every run")
	}
	var token [6]byte
	_, _ = rand.Read(token[:])
	name := "codecell-apart-" + hex.EncodeToString(token[:])
	type where struct {
		PID  int `json:"pid"`
		Port int `json:"port"`
	}
	ready := make(chan where, 1)
	tried := make(chan struct{})
	box := &codecell.Toolbox{}
	rendezvous, err := codecell.Func("rendezvous", "Says where the first run listens, and waits until the second has tried.", func(ctx context.Context, in where) (bool, error) {
		select {
		case ready <- in:
		default:
		}
		select {
		case <-tried:
			return true, nil
		case <-ctx.Done():
			return false, ctx.Err()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := box.Add(rendezvous); err != nil {
		t.Fatal(err)
	}
	first := fmt.Sprintf(`import os, signal, socket
got = []
signal.signal(signal.SIGUSR1, lambda *a: got.append('signal'))
ab = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
ab.bind('\0%[1]s')
ab.listen()
ab.setblocking(False)
listening = [ab]
port = 0
try:
    tcp = socket.socket()
    tcp.bind(('127.0.0.1', 0))
    tcp.listen()
    tcp.setblocking(False)
    listening.append(tcp)
    port = tcp.getsockname()[1]
except PermissionError:
    pass  # the sandbox refuses TCP (Landlock): nothing to reach
open('/dev/shm/%[1]s', 'w').write('A')
await call_tool('rendezvous', {'pid': os.getpid(), 'port': port})
for s in listening:
    try:
        s.accept()
        got.append('a connection')
    except BlockingIOError:
        pass
got
`, name)
	done := make(chan *codecell.Result, 1)
	go func() {
		x := codecell.Exec{Tier: s.tier.Name(), Language: "python", Code: first, Limits: codecell.Limits{Timeout: 60 * time.Second}}
		res, err := s.engine(&codecell.Engine{Tools: box}).Run(context.Background(), &x)
		if err != nil {
			res = &codecell.Result{Status: codecell.StatusSandboxError, Stderr: err.Error()}
		}
		done <- res
	}()
	var at where
	select {
	case at = <-ready:
	case res := <-done:
		t.Fatalf("the first run ended before it listened: %s %s %s", res.Status, res.Stderr, res.Value)
	}
	second := fmt.Sprintf(`import os, socket
reached = []
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect('\0%[1]s')
    reached.append('abstract socket')
except OSError:
    pass
if %[2]d:
    try:
        socket.create_connection(('127.0.0.1', %[2]d), timeout=5).close()
        reached.append('loopback port')
    except OSError:
        pass
if os.path.exists('/dev/shm/%[1]s'):
    reached.append('/dev/shm')
# The program's init and its parent (an init, or a launcher that waits
# for it) are its sandbox's own.
mine = {1, os.getppid(), os.getpid()}
other = %[3]d
try:
    # /proc/N also answers for a thread N of a process here (init's own):
    # it is the first run's only if its thread group is not one of ours.
    status = open('/proc/%%d/status' %% other).read()
    tgid = int(status.split('Tgid:')[1].split()[0])
except (OSError, IndexError, ValueError):
    tgid = None
if tgid is not None and tgid not in mine:
    reached.append('/proc')
if tgid not in mine:
    try:
        os.kill(other, 0)
        reached.append('signal')
    except OSError:
        pass
reached += ['process %%s' %% p for p in os.listdir('/proc') if p.isdigit() and int(p) not in mine]
reached
`, name, at.Port, at.PID)
	b := s.run(t, codecell.Exec{Language: "python", Code: second})
	close(tried)
	a := <-done
	expect(t, b, codecell.StatusSuccess)
	expectValue(t, b, "[]")
	expect(t, a, codecell.StatusSuccess)
	expectValue(t, a, "[]")
	if t.Failed() {
		t.Logf("first: %s %q; second: %s %q", a.Value, strings.TrimSpace(a.Stderr), b.Value, strings.TrimSpace(b.Stderr))
	}
}

// pythonEndsAsPython: a Python program ends as the interpreter's own exit
// would end it — a file left open is flushed, atexit handlers run,
// non-daemon threads are waited for, SystemExit's code is kept — however
// the runner ends the interpreter.
func (s *suite) pythonEndsAsPython(t *testing.T) {
	code := `import atexit, sys, threading
f = open('left-open.txt', 'w')
f.write('x' * 10)
atexit.register(lambda: print('atexit ran', flush=True))
done = threading.Event()
def later():
    done.wait(10)
    print('thread ended')
t = threading.Thread(target=later)
t.start()
done.set()
`
	res := s.run(t, codecell.Exec{Language: "python", Code: code})
	expect(t, res, codecell.StatusSuccess)
	if !strings.Contains(res.Stdout, "thread ended") || !strings.Contains(res.Stdout, "atexit ran") {
		t.Errorf("stdout %q: want the thread's line and the atexit handler's", res.Stdout)
	}
	var size int64 = -1
	for _, f := range res.Files {
		if f.Path == "left-open.txt" {
			size = f.Size
		}
	}
	if size != 10 {
		t.Errorf("left-open.txt is %d bytes (-1: absent), want 10: files %+v", size, res.Files)
	}
	res = s.run(t, codecell.Exec{Language: "python", Code: "import atexit, sys\natexit.register(lambda: print('bye'))\nsys.exit(7)\n"})
	if res.ExitCode != 7 || res.Stdout != "bye\n" {
		t.Errorf("exit code %d, stdout %q: want 7 and bye", res.ExitCode, res.Stdout)
	}
	res = s.run(t, codecell.Exec{Language: "python", Code: "import sys\nsys.exit('too bad')\n"})
	if res.ExitCode != 1 || !strings.Contains(res.Stderr, "too bad") {
		t.Errorf("exit code %d, stderr %q: want 1 and the message", res.ExitCode, res.Stderr)
	}
}
