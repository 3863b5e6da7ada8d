//go:build linux

package attack_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codecell-dev/codecell"
)

// setuidProgram runs each setuid-root binary of SETUID with harmless
// arguments, its stdin an open pipe (su then waits for a password), and
// reads the child's credentials from /proc while it runs (or as a zombie,
// which keeps them).
const setuidProgram = `
args = {'su': ['-c', 'id', 'root'], 'passwd': ['-S'], 'mount': ['--version'], 'umount': ['--version'],
        'newgrp': [], 'sg': ['root', 'id']}
for p in json.loads(os.environ['SETUID']):
    def run():
        c = subprocess.Popen([p] + args.get(os.path.basename(p), ['--help']),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        seen = set()
        try:
            for _ in range(3):
                st = read_all('/proc/%d/status' % c.pid).decode()
                seen.update(' '.join(l.split()) for l in st.splitlines() if l.startswith(('Uid:', 'Gid:', 'CapEff:')))
                time.sleep(0.1)
        finally:
            c.kill()
            out, err = c.communicate()
        if b'uid=0' in out:
            seen.add('printed uid=0')
        return ';'.join(sorted(seen))
    R['setuid/' + os.path.basename(p)] = attempt(run)
`

// hostSetuidBinaries lists setuid-root executables in the host's /usr/bin.
func hostSetuidBinaries() []string {
	var out []string
	entries, _ := os.ReadDir("/usr/bin")
	for _, e := range entries {
		p := filepath.Join("/usr/bin", e.Name())
		var st syscall.Stat_t
		if syscall.Stat(p, &st) != nil {
			continue
		}
		if st.Mode&syscall.S_IFMT == syscall.S_IFREG && st.Mode&syscall.S_ISUID != 0 && st.Uid == 0 {
			out = append(out, p)
		}
	}
	return out
}

// capsProgram reads the program's own credentials and confinement.
const capsProgram = `
for l in read_all('/proc/self/status').decode().splitlines():
    k, _, v = l.partition(':')
    if k in ('Uid', 'Gid', 'Groups', 'CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb', 'NoNewPrivs', 'Seccomp'):
        R[k] = ' '.join(v.split())
`

// syscallProgram makes system calls the sandbox must refuse, with
// arguments that would be harmless if one got through (x86-64 numbers).
const syscallProgram = `
buf = ctypes.create_string_buffer(512)
def clone_probe(nr, *args):
    r = sc(nr, *args)
    if r == 'ok:0':
        os._exit(0)  # the child, should the call ever succeed
    if r.startswith('ok:'):
        os.waitpid(int(r[3:]), 0)
    return r
CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWNET, CLONE_NEWPID = 0x10000000, 0x00020000, 0x40000000, 0x20000000
R['unshare-user'] = sc(272, CLONE_NEWUSER)
R['unshare-mount'] = sc(272, CLONE_NEWNS)
R['unshare-net'] = sc(272, CLONE_NEWNET)
R['unshare-pid'] = sc(272, CLONE_NEWPID)
R['clone-newuser'] = clone_probe(56, CLONE_NEWUSER | signal.SIGCHLD, 0, 0, 0, 0)
cargs = ctypes.create_string_buffer(64)
ctypes.c_uint64.from_buffer(cargs, 0).value = CLONE_NEWUSER
ctypes.c_uint64.from_buffer(cargs, 32).value = signal.SIGCHLD
R['clone3-newuser'] = clone_probe(435, cargs, 64)
nsfd = os.open('/proc/self/ns/uts', os.O_RDONLY)
R['setns'] = sc(308, nsfd, 0)
# A directory of the program's own: mounting on it, or pivoting or
# chrooting into it, could not touch anything else.
mnt = os.path.join(os.getcwd(), 'attack-mnt')
os.mkdir(mnt)
R['mount'] = sc(165, b'none', mnt.encode(), b'tmpfs', 0, None)
R['umount2'] = sc(166, mnt.encode(), 2)
R['pivot_root'] = sc(155, mnt.encode(), mnt.encode())
R['ptrace-traceme'] = sc(101, 0, 0, 0, 0)
R['ptrace-seize-init'] = sc(101, 0x4206, 1, 0, 0)  # PTRACE_SEIZE does not stop the tracee
R['process_vm_readv'] = sc(310, 1, buf, 1, buf, 1, 0)
R['keyctl'] = sc(250, 0, -3, 0)
R['add_key'] = sc(248, b'user', b'codecell-attack', b'x', 1, -2)
R['request_key'] = sc(249, b'user', b'codecell-attack', None, 0)
R['bpf'] = sc(321, 0, buf, 72)
R['io_uring_setup'] = sc(425, 1, buf)
R['userfaultfd'] = sc(323, os.O_CLOEXEC)
perf = ctypes.create_string_buffer(128)
ctypes.c_uint32.from_buffer(perf, 0).value = 1    # PERF_TYPE_SOFTWARE
ctypes.c_uint32.from_buffer(perf, 4).value = 128  # size
R['perf_event_open'] = sc(298, perf, 0, -1, -1, 0)
R['init_module'] = sc(175, None, 0, b'')
R['finit_module'] = sc(313, -1, b'', 0)
R['kexec_load'] = sc(246, 0, 0, None, 3 << 16)  # a foreign architecture: refused even with privilege
R['reboot'] = sc(169, 0, 0, 0, None)  # wrong magic numbers
R['settimeofday'] = sc(164, None, None)  # sets nothing
name = socket.gethostname().encode()
R['sethostname'] = sc(170, name, len(name))  # the name it already has
R['open_by_handle_at'] = sc(304, -100, buf, 0)
R['syslog'] = sc(103, 10, None, 0)  # the size of the kernel log buffer
R['iopl'] = sc(172, 0)
R['personality-no-aslr'] = sc(135, 0x0040000)
R['chroot'] = sc(161, mnt.encode())  # last: it would change the program's own root
`

// attackPrivilege checks privilege escalation: setuid binaries,
// capabilities and refused system calls, and the program's host identity.
func attackPrivilege(t *testing.T) {
	t.Parallel()
	t.Run("setuid-binaries", func(t *testing.T) {
		t.Parallel()
		if rootless() {
			t.Skip("rootless: the program is uid 0 of its user namespace, so a setuid-root binary changes nothing to see")
		}
		bins := hostSetuidBinaries()
		if len(bins) == 0 {
			t.Skip("the host's /usr/bin has no setuid-root binary")
		}
		r, _ := probes(t, codecell.Exec{Env: map[string]string{"SETUID": mustJSON(bins)}}, setuidProgram)
		for _, b := range bins {
			name := filepath.Base(b)
			t.Run(name, func(t *testing.T) {
				got := r["setuid/"+name]
				if !strings.HasPrefix(got, "ok:") || !strings.Contains(got, "Uid: 1000") {
					t.Fatalf("%s: could not read the child's credentials: %q", name, got)
				}
				for _, line := range strings.Split(strings.TrimPrefix(got, "ok:"), ";") {
					f := strings.Fields(line)
					switch {
					case line == "printed uid=0":
						t.Errorf("%s ran a command as uid 0", name)
					case len(f) == 5 && (f[0] == "Uid:" || f[0] == "Gid:") && slicesContain(f[1:], "0"):
						t.Errorf("%s ran with %s", name, line)
					case len(f) == 2 && f[0] == "CapEff:" && f[1] != "0000000000000000":
						t.Errorf("%s ran with %s", name, line)
					}
				}
			})
		}
	})

	t.Run("capabilities", func(t *testing.T) {
		t.Parallel()
		r, _ := probes(t, codecell.Exec{}, capsProgram)
		want := map[string]string{
			"Uid": "1000 1000 1000 1000", "Gid": "1000 1000 1000 1000", "Groups": "",
			"CapInh": "0000000000000000", "CapPrm": "0000000000000000", "CapEff": "0000000000000000",
			"CapBnd": "0000000000000000", "CapAmb": "0000000000000000",
			"NoNewPrivs": "1", "Seccomp": "2",
		}
		if rootless() {
			want["Uid"], want["Gid"] = "0 0 0 0", "0 0 0 0"
		}
		for _, k := range sortedKeys(want) {
			t.Run(k, func(t *testing.T) {
				if got, ok := r[k]; !ok || got != want[k] {
					t.Errorf("%s: got %q, want %q", k, got, want[k])
				}
			})
		}
	})

	t.Run("syscalls", func(t *testing.T) {
		t.Parallel()
		requireAMD64(t)
		r, _ := probes(t, codecell.Exec{}, syscallProgram)
		for _, k := range sortedKeys(r) {
			t.Run(k, func(t *testing.T) {
				switch k {
				case "clone3-newuser":
					// Refused whole, with ENOSYS so that libc falls back to clone.
					expectErrno(t, r, k, "EPERM", "ENOSYS")
				default:
					expectErrno(t, r, k, "EPERM")
				}
			})
		}
	})

	// From the host: the program's process runs as an unprivileged host
	// uid of its own, without capabilities.
	t.Run("host-identity", func(t *testing.T) {
		t.Parallel()
		m := marker("identity")
		// What the host sees of the program, read while it runs.
		type found struct {
			pid      int
			status   string
			ns       map[string]string            // the program's namespaces
			initNS   map[string]map[string]string // init's threads' namespaces, by tid
			initConf map[string]string            // init's threads' confinement lines, by tid
			initPID  string
			readErrs []string
		}
		nsNames := []string{"cgroup", "ipc", "mnt", "net", "pid", "user", "uts"}
		look := func(pid int) (found, bool) {
			f := found{pid: pid, ns: map[string]string{}, initNS: map[string]map[string]string{}, initConf: map[string]string{}}
			st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
			if err != nil {
				return f, false
			}
			f.status = string(st)
			for _, ns := range nsNames {
				l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", pid, ns))
				if err != nil {
					return f, false
				}
				f.ns[ns] = l
			}
			for _, l := range strings.Split(f.status, "\n") {
				if v, ok := strings.CutPrefix(l, "PPid:"); ok {
					f.initPID = strings.TrimSpace(v)
				}
			}
			tasks, _ := filepath.Glob("/proc/" + f.initPID + "/task/*")
			for _, task := range tasks {
				m := map[string]string{}
				for _, ns := range nsNames {
					if l, err := os.Readlink(filepath.Join(task, "ns", ns)); err == nil {
						m[ns] = l
					}
				}
				f.initNS[filepath.Base(task)] = m
				if st, err := os.ReadFile(filepath.Join(task, "status")); err == nil {
					f.initConf[filepath.Base(task)] = statusLines(string(st), "CapBnd", "NoNewPrivs", "Seccomp")
				}
			}
			return f, len(f.initNS) > 0
		}
		got := make(chan found, 1)
		stop := make(chan struct{})
		go func() {
			defer close(got)
			for {
				for _, pid := range hostProcs(m) {
					if f, ok := look(pid); ok {
						got <- f
						return
					}
				}
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		}()
		res := run(t, codecell.Exec{Language: "bash", Code: "sleep 1.5", Args: []string{m}})
		close(stop)
		f, ok := <-got
		if !ok {
			t.Fatalf("the host never saw the program (argv tagged %s): %s", m, describe(res))
		}
		t.Logf("host pid %d: %s", f.pid, statusLines(f.status, "Uid", "Gid", "CapEff", "NoNewPrivs", "Seccomp"))
		fields := map[string][]string{}
		for _, l := range strings.Split(f.status, "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok {
				fields[k] = strings.Fields(v)
			}
		}
		t.Run("uid", func(t *testing.T) {
			if rootless() {
				t.Skip("rootless: the program runs as the caller's own uid, by design")
			}
			for _, k := range []string{"Uid", "Gid"} {
				for _, id := range fields[k] {
					if n, _ := strconv.Atoi(id); n == 0 || n == os.Getuid() {
						t.Errorf("the program runs on the host with %s %v (the test's uid is %d)", k, fields[k], os.Getuid())
						break
					}
				}
			}
		})
		t.Run("capabilities", func(t *testing.T) {
			for _, k := range []string{"CapEff", "CapPrm", "CapAmb"} {
				if got := fields[k]; len(got) != 1 || got[0] != "0000000000000000" {
					t.Errorf("the program holds capabilities on the host: %s %v", k, got)
				}
			}
			if got := fields["NoNewPrivs"]; len(got) != 1 || got[0] != "1" {
				t.Errorf("the program can gain privileges: NoNewPrivs %v", got)
			}
		})
		t.Run("namespaces", func(t *testing.T) {
			for _, ns := range nsNames {
				host, _ := os.Readlink("/proc/self/ns/" + ns)
				if f.ns[ns] == host {
					t.Errorf("the program is in the host's %s namespace (%s)", ns, host)
				}
			}
		})
		// Every thread of init may be the one that forks the program, which
		// then inherits that thread's namespaces and confinement: what only
		// one thread did to itself (unshare(2), PR_CAPBSET_DROP and
		// landlock_restrict_self(2) act on the calling thread) is not surely
		// the program's.
		t.Run("init-threads-confinement", func(t *testing.T) {
			// init holds CAP_KILL, CAP_SETUID, CAP_SETGID and CAP_SETPCAP
			// over its own user namespace (to start and end the program);
			// every thread must hold no more than that, with no_new_privs
			// and the seccomp filter. The thread that forked the program
			// has emptied its bounding set; the program's own is checked to
			// be empty above.
			want := "CapBnd: 00000000000001e0, NoNewPrivs: 1, Seccomp: 2"
			wantForker := "CapBnd: 0000000000000000, NoNewPrivs: 1, Seccomp: 2"
			var bad []string
			for tid, conf := range f.initConf {
				if conf != want && !(tid == f.initPID && conf == wantForker) {
					bad = append(bad, tid+": "+conf)
				}
			}
			if len(bad) > 0 {
				t.Errorf("%d of init's %d threads (init is host pid %s) are not confined (want %s): %v",
					len(bad), len(f.initConf), f.initPID, want, bad)
			}
		})
		t.Run("init-threads-namespaces", func(t *testing.T) {
			for _, ns := range nsNames {
				host, _ := os.Readlink("/proc/self/ns/" + ns)
				var inHost []string
				for tid, links := range f.initNS {
					if links[ns] == host {
						inHost = append(inHost, tid)
					}
				}
				if len(inHost) > 0 {
					t.Errorf("%d of init's %d threads (host tids %v; init is %s) are in the host's %s namespace (%s): a program forked from one of them runs there",
						len(inHost), len(f.initNS), inHost, f.initPID, ns, host)
				}
			}
		})
	})
}

func slicesContain(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// procProgram looks at what /proc and /sys show.
const procProgram = `
R['sys'] = attempt(lambda: os.listdir('/sys') or None)
for f in ['kcore', 'keys', 'key-users', 'timer_list', 'sched_debug', 'kallsyms', 'config.gz', 'kpageflags', 'sysrq-trigger']:
    R['read/' + f] = attempt(lambda: len(read_all('/proc/' + f, 4096)))
def kind(p):
    st = os.stat(p)
    if stat.S_ISCHR(st.st_mode):
        return 'chr %d:%d' % (os.major(st.st_rdev), os.minor(st.st_rdev))
    return 'mode %o' % st.st_mode
R['stat/sysrq-trigger'] = attempt(lambda: kind('/proc/sysrq-trigger'))
R['stat/dev-null'] = attempt(lambda: kind('/dev/null'))
for p in ['/proc/sys/kernel/hostname', '/proc/sys/kernel/core_pattern', '/proc/sys/vm/overcommit_memory', '/proc/sys/fs/file-max', '/proc/sys/net/ipv4/ip_forward']:
    R['access' + p] = can_write(p)
R['pids'] = ' '.join(sorted((d for d in os.listdir('/proc') if d.isdigit()), key=int))
R['self'] = str(os.getpid())
R['pid1'] = attempt(lambda: read_all('/proc/1/cmdline').split(b'\0')[0].decode())
R['mountinfo'] = read_all('/proc/self/mountinfo').decode()
R['cgroup'] = read_all('/proc/self/cgroup').decode()
`

func attackProc(t *testing.T) {
	t.Parallel()
	r, res := probes(t, codecell.Exec{}, procProgram)
	t.Run("sys", func(t *testing.T) {
		if got := r["sys"]; got != "ok" && got != "ENOENT" {
			t.Errorf("/sys: got %q, want absent or empty", got)
		}
	})
	for _, f := range []string{"kcore", "keys", "key-users", "timer_list", "sched_debug", "kallsyms", "config.gz", "kpageflags"} {
		t.Run("masked-"+f, func(t *testing.T) {
			got := r["read/"+f]
			if _, err := os.Stat("/proc/" + f); err != nil {
				if got != "ENOENT" && got != "ok:0" {
					t.Errorf("/proc/%s (absent on the host): got %q", f, got)
				}
				return
			}
			if got != "ok:0" {
				t.Errorf("/proc/%s: got %q, want it to read empty (masked)", f, got)
			}
		})
	}
	t.Run("sysrq-trigger", func(t *testing.T) {
		// Never written, even here: stat says whether it is /dev/null.
		if _, err := os.Stat("/proc/sysrq-trigger"); err != nil {
			expectErrno(t, r, "stat/sysrq-trigger", "ENOENT")
			t.Logf("the host has no /proc/sysrq-trigger (%v): the sandbox has none either", err)
			return
		}
		if got, null := r["stat/sysrq-trigger"], r["stat/dev-null"]; got != null || !strings.HasPrefix(got, "ok:chr ") {
			t.Errorf("/proc/sysrq-trigger is %q, want the character device of /dev/null (%q)", got, null)
		}
	})
	for _, p := range []string{"/proc/sys/kernel/hostname", "/proc/sys/kernel/core_pattern", "/proc/sys/vm/overcommit_memory", "/proc/sys/fs/file-max", "/proc/sys/net/ipv4/ip_forward"} {
		t.Run("read-only"+dashed(p), func(t *testing.T) { expectErrno(t, r, "access"+p, "EROFS", "EACCES", "EPERM") })
	}
	t.Run("pids", func(t *testing.T) {
		pids := strings.Fields(r["pids"])
		if len(pids) == 0 || pids[0] != "1" || len(pids) > 5 {
			t.Errorf("/proc lists pids %v; want init (1) and the program's few", pids)
		}
		for _, p := range pids {
			if n, _ := strconv.Atoi(p); n > 100 {
				t.Errorf("/proc lists pid %d, not of a fresh pid namespace", n)
			}
		}
		// pid 1 is the sandbox's init, or for a run forked from a template
		// interpreter its supervisor, a fork of that interpreter: never the
		// program.
		want := "ok:" + codecell.InitArg0
		if strings.HasPrefix(res.Isolation.Interpreter, "forked") {
			want = "ok:/usr/bin/python3"
		}
		if got := r["pid1"]; got != want || r["self"] == "1" {
			t.Errorf("pid 1 is %q and the program %s, want %q and the program another", got, r["self"], want)
		}
	})
	t.Run("mountinfo", func(t *testing.T) {
		mi := r["mountinfo"]
		for _, s := range []string{os.TempDir() + "/", "codecell-native-root", "codecell-ws-", "codecell-run-", "/root", "/home"} {
			if strings.Contains(mi, s) {
				t.Errorf("/proc/self/mountinfo names the host path %q:\n%s", s, mi)
			}
		}
	})
	t.Run("cgroup-namespace", func(t *testing.T) {
		for _, l := range strings.Split(strings.TrimSpace(r["cgroup"]), "\n") {
			if !strings.HasSuffix(l, ":/") {
				t.Errorf("/proc/self/cgroup shows a host cgroup path: %q", l)
			}
		}
	})
}

// devicesProgram tries to make device nodes and looks for host devices.
const devicesProgram = `
for d in ['/workspace', '/tmp', '/dev/shm']:
    R['mknod-chr' + d] = attempt(lambda: os.mknod(d + '/attack-null', 0o666 | stat.S_IFCHR, os.makedev(1, 3)))
    R['mknod-blk' + d] = attempt(lambda: os.mknod(d + '/attack-disk', 0o666 | stat.S_IFBLK, os.makedev(254, 0)))
R['dev'] = ' '.join(sorted(os.listdir('/dev')))
for d in json.loads(os.environ['ABSENT']):
    R['stat/dev/' + d] = attempt(lambda: os.stat('/dev/' + d) and None)
`

func attackDevices(t *testing.T) {
	t.Parallel()
	absent := []string{"mem", "kmem", "port", "kmsg", "sda", "vda", "nvme0n1", "tty", "tty0", "console", "ptmx", "pts",
		"kvm", "fuse", "loop0", "loop-control", "net", "hwrng", "vsock", "vhost-vsock", "cpu", "autofs", "btrfs-control"}
	r, _ := probes(t, codecell.Exec{Env: map[string]string{"ABSENT": mustJSON(absent)}}, devicesProgram)
	for _, d := range []string{"/workspace", "/tmp", "/dev/shm"} {
		t.Run("mknod"+dashed(d), func(t *testing.T) {
			expectErrno(t, r, "mknod-chr"+d, "EPERM", "EACCES")
			expectErrno(t, r, "mknod-blk"+d, "EPERM", "EACCES")
		})
	}
	t.Run("dev-contents", func(t *testing.T) {
		want := "fd full null random shm stderr stdin stdout urandom zero"
		if got := r["dev"]; got != want {
			t.Errorf("/dev holds %q, want %q", got, want)
		}
	})
	for _, d := range absent {
		t.Run("absent-"+d, func(t *testing.T) { expectErrno(t, r, "stat/dev/"+d, "ENOENT") })
	}
}

// ttyProgram tries to push input into a terminal, and looks for one.
const ttyProgram = `
import fcntl
for fd in (0, 1, 2):
    R['tiocsti-fd%d' % fd] = attempt(lambda: fcntl.ioctl(fd, 0x5412, b'x'))
R['tioclinux'] = attempt(lambda: fcntl.ioctl(0, 0x541C, b'\x02' + b'\0' * 15))
R['open-dev-tty'] = attempt(lambda: os.close(os.open('/dev/tty', os.O_RDWR | os.O_NOCTTY)))
R['openpty'] = attempt(lambda: [os.close(fd) for fd in os.openpty()] and None)
R['ttyname-0'] = attempt(lambda: os.ttyname(0))
R['tty_nr'] = read_all('/proc/self/stat').decode().rsplit(')', 1)[1].split()[4]
R['session-leader'] = str(os.getsid(0) == os.getpid())
R['stdin'] = sys.stdin.read()
`

func attackTTY(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		stdin string
	}{{"no-stdin", ""}, {"with-stdin", "some input\n"}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			x := codecell.Exec{}
			if c.stdin != "" {
				x.Stdin = strings.NewReader(c.stdin)
			}
			r, _ := probes(t, x, ttyProgram)
			if r["stdin"] != c.stdin {
				t.Errorf("the program read %q from stdin, want %q", r["stdin"], c.stdin)
			}
			for _, p := range []string{"tiocsti-fd0", "tiocsti-fd1", "tiocsti-fd2", "tioclinux"} {
				t.Run(p, func(t *testing.T) { expectErrno(t, r, p, "EPERM") })
			}
			t.Run("no-controlling-terminal", func(t *testing.T) {
				expectErrno(t, r, "open-dev-tty", "ENOENT", "ENXIO")
				expectRefused(t, r, "openpty")
				expectRefused(t, r, "ttyname-0")
				if r["tty_nr"] != "0" {
					t.Errorf("the program has a controlling terminal (tty_nr %s)", r["tty_nr"])
				}
			})
		})
	}
}
