//go:build linux

package attack_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/codecell-dev/codecell"
)

// tenantAProgram leaves a secret where a neighbour might look: its
// workspace, /tmp, /dev/shm and the name of an abstract unix socket. Then it
// shows the host it is ready (a child tagged $MARK-ready in argv) and holds
// everything for 3 s.
const tenantAProgram = `
secret = os.environ['SECRET']
for d in ('/workspace', '/tmp', '/dev/shm'):
    with open(d + '/secret.txt', 'w') as f:
        f.write(secret)
servers = []
for name in (os.environ['ABSTRACT'], os.environ['ABSTRACT'] + '-' + secret):
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind('\0' + name)
    srv.listen(1)
    servers.append(srv)
subprocess.run([os.environ['MARK'] + '-ready', '3'], executable='/bin/sleep')
R['held'] = 'ok'
`

// tenantBProgram searches everything it can reach for what A left; it is
// told where A's things would be, and A's argv marker, but not the secret:
// it returns what it finds and the test looks for the secret in it.
const tenantBProgram = `
found = {}
def grab(p):
    try:
        if os.path.isdir(p):
            for n in os.listdir(p):
                grab(os.path.join(p, n))
        else:
            found[p] = read_all(p, 4096).decode(errors='replace')
    except OSError as e:
        pass
pids = [d for d in os.listdir('/proc') if d.isdigit()]
for pid in pids:
    for sub in ('root/tmp', 'root/workspace', 'root/dev/shm', 'cwd', 'environ', 'cmdline'):
        grab('/proc/%s/%s' % (pid, sub))
for d in ('/tmp', '/workspace', '/dev/shm'):
    grab(d)
R['found'] = json.dumps(found)
R['unix'] = read_all('/proc/net/unix').decode(errors='replace')
R['procs'] = ' '.join(p for p in pids if os.environ['MARK'].encode() in attempt(lambda: read_all('/proc/%s/cmdline' % p)).encode())
def connect():
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.settimeout(2)
    c.connect('\0' + os.environ['ABSTRACT'])
R['connect-abstract'] = attempt(connect)
`

func attackConcurrent(t *testing.T) {
	t.Parallel()
	secret := "tenant-secret-" + randHex(12)
	m := marker("tenant-a")
	abstract := marker("tenant-abstract")
	type outcome struct {
		res *codecell.Result
		err error
	}
	aDone := make(chan outcome, 1)
	go func() {
		res, err := engine.Run(context.Background(), &codecell.Exec{Tier: "native", Language: "python", Code: pyPrelude + tenantAProgram + "\nR\n",
			Env: map[string]string{"SECRET": secret, "MARK": m, "ABSTRACT": abstract}, Limits: codecell.Limits{Timeout: 30 * time.Second}})
		aDone <- outcome{res, err}
	}()
	// B starts once A is seen, from the host, holding its secrets.
	deadline := time.Now().Add(15 * time.Second)
	for len(hostProcs(m+"-ready")) == 0 {
		if time.Now().After(deadline) {
			a := <-aDone
			t.Fatalf("tenant A never became ready: %v %s", a.err, describe(a.res))
		}
		time.Sleep(20 * time.Millisecond)
	}
	r, resB := probes(t, codecell.Exec{Env: map[string]string{"MARK": m, "ABSTRACT": abstract}}, tenantBProgram)
	aliveDuringB := len(hostProcs(m+"-ready")) > 0
	a := <-aDone
	if a.err != nil {
		t.Fatalf("tenant A: %v", a.err)
	}
	resA := a.res
	if resA.Status != codecell.StatusSuccess {
		t.Fatalf("tenant A failed: %s", describe(resA))
	}
	t.Run("a-really-wrote", func(t *testing.T) {
		var listed bool
		for _, f := range resA.Files {
			listed = listed || f.Path == "secret.txt"
		}
		if !listed {
			t.Errorf("tenant A's workspace change is not in its Result: %+v", resA.Files)
		}
		if !aliveDuringB {
			t.Errorf("tenant A had ended before B finished: the search proved nothing")
		}
	})
	t.Run("no-secret-in-b", func(t *testing.T) {
		noSecret(t, resB, secret)
		t.Logf("B read %d bytes of files", len(r["found"]))
	})
	t.Run("no-abstract-socket-of-a", func(t *testing.T) {
		if strings.Contains(r["unix"], abstract) {
			t.Errorf("B's /proc/net/unix lists A's abstract socket")
		}
		expectErrno(t, r, "connect-abstract", "ECONNREFUSED", "EPERM")
	})
	t.Run("no-process-of-a", func(t *testing.T) {
		if r["procs"] != "" {
			t.Errorf("B sees A's processes: pids %s", r["procs"])
		}
	})
}

// ipcProgram looks for the host's SysV objects by key and id, and tries the
// hostname.
const ipcProgram = `
for f in ('msgget', 'shmget', 'semget', 'msgctl', 'sethostname'):
    getattr(libc, f).restype = ctypes.c_int
def ret(r):
    return 'ok:%d' % r if r >= 0 else ename(ctypes.get_errno())
keys = json.loads(os.environ['KEYS'])
R['msgget'] = ret(libc.msgget(keys['msg'], 0))
R['shmget'] = ret(libc.shmget(keys['shm'], 0, 0))
R['semget'] = ret(libc.semget(keys['sem'], 0, 0))
if os.environ.get('RMID') == '1':
    R['msgctl-rmid-host-id'] = ret(libc.msgctl(int(os.environ['MSGID']), 0, None))
R['ipcs'] = subprocess.run(['/usr/bin/ipcs'], capture_output=True).stdout.decode()
R['hostname'] = socket.gethostname()
R['nodename'] = os.uname().nodename
if os.environ.get('SETHOSTNAME') == '1' and socket.gethostname() == 'codecell':
    # Only in the sandbox's own UTS namespace (named codecell): anywhere
    # else, with privilege, this would rename the host.
    R['sethostname'] = ret(libc.sethostname(b'attack', 6))
    R['hostname-after'] = socket.gethostname()
`

// sysvObjects creates a message queue, a shared memory segment and a
// semaphore set on the host, with random keys; they are removed when the
// test ends.
func sysvObjects(t *testing.T) (keys map[string]int, msgID int) {
	t.Helper()
	keys = map[string]int{"msg": int(rand.Int32()), "shm": int(rand.Int32()), "sem": int(rand.Int32())}
	id, _, errno := unix.Syscall(unix.SYS_MSGGET, uintptr(keys["msg"]), unix.IPC_CREAT|unix.IPC_EXCL|0o666, 0)
	if errno != 0 {
		t.Fatalf("msgget: %v", errno)
	}
	msgID = int(id)
	t.Cleanup(func() { unix.Syscall(unix.SYS_MSGCTL, uintptr(msgID), unix.IPC_RMID, 0) })
	shm, err := unix.SysvShmGet(keys["shm"], 4096, unix.IPC_CREAT|unix.IPC_EXCL|0o666)
	if err != nil {
		t.Fatalf("shmget: %v", err)
	}
	t.Cleanup(func() { unix.SysvShmCtl(shm, unix.IPC_RMID, nil) })
	sem, _, errno := unix.Syscall(unix.SYS_SEMGET, uintptr(keys["sem"]), 1, unix.IPC_CREAT|unix.IPC_EXCL|0o666)
	if errno != 0 {
		t.Fatalf("semget: %v", errno)
	}
	t.Cleanup(func() { unix.Syscall(unix.SYS_SEMCTL, sem, 0, unix.IPC_RMID) })
	return keys, msgID
}

func attackIPC(t *testing.T) {
	t.Parallel()
	t.Run("sandbox", func(t *testing.T) {
		t.Parallel()
		keys, msgID := sysvObjects(t)
		hostname, _ := os.Hostname()
		env := map[string]string{"KEYS": mustJSON(keys), "MSGID": fmt.Sprint(msgID), "RMID": "1", "SETHOSTNAME": "1"}
		r, _ := probes(t, codecell.Exec{Env: env}, ipcProgram)
		for _, k := range []string{"msgget", "shmget", "semget"} {
			t.Run("sysv-"+k, func(t *testing.T) { expectErrno(t, r, k, "ENOENT") })
		}
		t.Run("ipcs", func(t *testing.T) {
			for name, key := range keys {
				if strings.Contains(r["ipcs"], fmt.Sprintf("0x%08x", key)) {
					t.Errorf("ipcs inside shows the host's %s key 0x%08x:\n%s", name, key, r["ipcs"])
				}
			}
		})
		t.Run("host-queue-survives", func(t *testing.T) {
			expectErrno(t, r, "msgctl-rmid-host-id", "EINVAL", "EIDRM", "EPERM")
			id, _, errno := unix.Syscall(unix.SYS_MSGGET, uintptr(keys["msg"]), 0, 0)
			if errno != 0 || int(id) != msgID {
				t.Errorf("the host's message queue is gone (%v) or changed (id %d, was %d)", errno, id, msgID)
			}
		})
		t.Run("hostname", func(t *testing.T) {
			if r["hostname"] != "codecell" || r["nodename"] != "codecell" {
				t.Errorf("hostname inside is %q (uname %q), want codecell", r["hostname"], r["nodename"])
			}
			expectErrno(t, r, "sethostname", "EPERM")
			if r["hostname-after"] != "codecell" {
				t.Errorf("the sandbox's hostname became %q", r["hostname-after"])
			}
			if now, _ := os.Hostname(); now != hostname {
				t.Errorf("the host's hostname changed from %q to %q", hostname, now)
			}
		})
	})

	// With no isolation, the same lookups find the host's objects: the
	// probes work. (No RMID, no SETHOSTNAME: the control only looks.)
	t.Run("local-control", func(t *testing.T) {
		t.Parallel()
		keys, msgID := sysvObjects(t)
		r, _ := probes(t, codecell.Exec{Tier: "local", Env: map[string]string{"KEYS": mustJSON(keys), "MSGID": fmt.Sprint(msgID)}}, ipcProgram)
		if r["msgget"] != fmt.Sprintf("ok:%d", msgID) {
			t.Errorf("local control: msgget of the host's key gave %q, want ok:%d", r["msgget"], msgID)
		}
		expectOK(t, r, "shmget")
		expectOK(t, r, "semget")
		if !strings.Contains(r["ipcs"], fmt.Sprintf("0x%08x", keys["msg"])) {
			t.Errorf("local control: ipcs does not show the host's queue: the check would miss it")
		}
	})
}

// leaveBehindProgram leaves files, a process and a SysV queue.
const leaveBehindProgram = `
M="$MARK"
echo "$M" > "/tmp/$M"; echo "$M" > "/dev/shm/$M"; echo "$M" > "/workspace/$M"
setsid nohup bash -c 'exec -a "$0" sleep 300' "$M" >/dev/null 2>&1 &
/usr/bin/python3 -c 'import ctypes, sys; sys.exit(0 if ctypes.CDLL(None).msgget(int(sys.argv[1]), 0o1600) >= 0 else 1)' "$KEY" || exit 3
sleep 0.3
echo left
`

// lookBehindProgram looks for what leaveBehindProgram left.
const lookBehindProgram = `
m = os.environ['MARK']
for d in ('/tmp', '/dev/shm', '/workspace'):
    R['file' + d] = attempt(lambda: read_all(os.path.join(d, m)).decode())
libc.msgget.restype = ctypes.c_int
r = libc.msgget(int(os.environ['KEY']), 0)
R['msgget'] = 'ok:%d' % r if r >= 0 else ename(ctypes.get_errno())
R['procs'] = ' '.join(p for p in os.listdir('/proc') if p.isdigit() and m.encode() in attempt(lambda: read_all('/proc/%s/cmdline' % p)).encode())
R['workspace'] = ' '.join(os.listdir('/workspace'))
`

func attackFresh(t *testing.T) {
	t.Parallel()
	m := marker("fresh")
	key := fmt.Sprint(rand.Int32())
	env := map[string]string{"MARK": m, "KEY": key}
	res := run(t, codecell.Exec{Language: "bash", Code: leaveBehindProgram, Env: env})
	if res.Status != codecell.StatusSuccess || !strings.Contains(res.Stdout, "left") {
		t.Fatalf("the first Exec did not leave its things: %s", describe(res))
	}
	waitNoHostProcs(t, m)
	// The next Exec: one from the pool (built before the first ran) and
	// one built afresh (a workspace size the pool does not hold).
	for _, c := range []struct {
		name   string
		limits codecell.Limits
	}{{"pooled", codecell.Limits{}}, {"new", codecell.Limits{Workspace: 64 << 20}}} {
		t.Run(c.name, func(t *testing.T) {
			r, _ := probes(t, codecell.Exec{Env: env, Limits: c.limits}, lookBehindProgram)
			for _, d := range []string{"/tmp", "/dev/shm", "/workspace"} {
				t.Run("file"+dashed(d), func(t *testing.T) { expectErrno(t, r, "file"+d, "ENOENT") })
			}
			t.Run("sysv-queue", func(t *testing.T) { expectErrno(t, r, "msgget", "ENOENT") })
			t.Run("process", func(t *testing.T) {
				if r["procs"] != "" {
					t.Errorf("the previous Exec's process is visible: pids %s", r["procs"])
				}
			})
			t.Run("workspace-empty", func(t *testing.T) {
				if r["workspace"] != "" {
					t.Errorf("the fresh workspace holds %q", r["workspace"])
				}
			})
		})
	}
}

// fdProgram lists its open file descriptors and tries to use each one it
// did not open itself: read a file, list a directory and open a file
// relative to it (NAME).
const fdProgram = `
for fd in sorted(int(f) for f in os.listdir('/proc/self/fd')):
    try:
        target = os.readlink('/proc/self/fd/%d' % fd)
    except OSError:
        continue  # the descriptor listdir used
    R['fd/%d' % fd] = target
    if fd <= 3 or not target.startswith('/'):
        continue  # stdio, the result channel, and pipes and sockets: never touched
    def use():
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            names = os.listdir(fd)
            g = os.open(os.environ['NAME'], os.O_RDONLY, dir_fd=fd)
            try:
                data = os.read(g, 200)
            finally:
                os.close(g)
            return 'dir [%s], %s: %r' % (','.join(names), os.environ['NAME'], data)
        return 'file: %r' % os.pread(fd, 200, 0)
    R['use/%d' % fd] = attempt(use)
print(json.dumps(R))
`

// attackInheritedFDs runs alone (not parallel): it gives this process
// descriptors without close-on-exec, as an embedding program may have
// inherited from its own parent (a shell's redirection, a service
// manager's socket), and any other run started meanwhile would inherit them
// too.
func attackInheritedFDs(t *testing.T) {
	for _, tier := range []string{"native", "local", "direct"} {
		name := map[string]string{"native": "sandbox", "local": "local", "direct": "direct-control"}[tier]
		t.Run(name, func(t *testing.T) {
			dir := hostTempDir(t)
			c := newCanary(t, filepath.Join(dir, "canary"))
			// syscall.Open, unlike os.Open, does not add O_CLOEXEC.
			fileFD, err := syscall.Open(c.Path, syscall.O_RDONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer syscall.Close(fileFD)
			dirFD, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer syscall.Close(dirFD)
			if tier == "direct" {
				// The control: the same probe as a plain child of this process,
				// which inherits the descriptors, must read the canary.
				cmd := exec.Command("/usr/bin/python3", "-c", pyPrelude+fdProgram)
				cmd.Env = []string{"NAME=canary", "PATH=/usr/bin:/bin"}
				out, _ := cmd.Output()
				if !strings.Contains(string(out), c.Token) {
					t.Errorf("direct control: the probe did not read the canary through the inherited descriptors (%s): the check would miss a leak", out)
				}
				return
			}
			// A workspace size the pool does not hold: a sandbox started now,
			// while the descriptors are open. The local tier does not isolate,
			// but it does not hand the host's descriptors on either.
			r, res := probes(t, codecell.Exec{Tier: tier, Env: map[string]string{"NAME": "canary"}, Limits: codecell.Limits{Workspace: 32 << 20}}, fdProgram)
			for _, fd := range []int{fileFD, dirFD} {
				if got, ok := r[fmt.Sprintf("fd/%d", fd)]; ok {
					t.Errorf("the program holds the test's descriptor %d (%s); using it: %s", fd, got, r[fmt.Sprintf("use/%d", fd)])
				}
			}
			noSecret(t, res, c.Token)
			// Beyond stdin, stdout, stderr, the result channel (3) and the
			// tool channel (4), the program should hold nothing it did not
			// open: whatever else it holds came from the host (this process
			// inherited it).
			for _, k := range sortedKeys(r) {
				var fd int
				if _, err := fmt.Sscanf(k, "fd/%d", &fd); err == nil && fd > 4 && fd != fileFD && fd != dirFD {
					t.Errorf("the program holds a descriptor from the host: %d → %s", fd, r[k])
				}
			}
		})
	}
}
