//go:build linux

// Package attack_test attacks the native tier the way hostile code would,
// and checks the outcome from the host's side, not only from what the
// program says about itself. Every attack is harmless if it gets through:
// writability is probed with access(2) or an open without O_TRUNC, values
// are rewritten with themselves, the only files written are marker files
// with names the test owns, traffic goes only to listeners the test started,
// and every bomb is bounded in count, size and time. A broken sandbox fails
// a test; it does not break the machine.
//
// The categories, and the host-side evidence each one checks:
//
//   - read (fs_test.go): canaries the test writes on the host (in a
//     temporary directory, /root and /etc) cannot be read by absolute path,
//     ../ walks, chdir(".."), /proc/{1,self,*}/root or /proc/*/cwd; init's
//     /proc files (exe, environ, fd, mem, root) refuse; the host's
//     /etc/shadow, /root and /home are absent; no token shows in Stdout,
//     Stderr or Value.
//   - write (fs_test.go): marker files the program tries to create in /,
//     /usr, /etc, /bin, /dev, /run/codecell and a host directory, and in its
//     own /tmp and /dev/shm, do not appear at those host paths nor in the
//     engine's runner directory; access(W_OK) and open(O_WRONLY) refuse on
//     system files and /proc/sys; the host's hostname is unchanged.
//   - env (env_net_test.go): a secret in this process's environment and in a
//     host helper's /proc/<pid>/environ is absent from everything inside.
//   - network (env_net_test.go): TCP, UDP and unix listeners the test runs on
//     the host (loopback, its other addresses, abstract and path sockets)
//     accept or read nothing within a deadline; DNS, vsock, raw sockets and
//     in-sandbox TCP bind/connect fail with the expected errno.
//   - network-policy (netpolicy_test.go): with a policy that allows names
//     (one that resolves to the host's loopback, a wildcard likewise), the
//     same listeners, reached by address or by name, hear nothing, and the
//     Result lists the refused connections.
//   - network-secrets (netsecrets_test.go): with a secret for one host,
//     the program finds its value nowhere (environment, every process's
//     environ and cmdline, readable files; nor a private key), and its
//     placeholder sent to another host (a header, the request line, a
//     second request, a ClientHello, a Host or an absolute URI naming
//     that host on the secret's connection, a smuggled request) is
//     refused: the host's servers record no value and no placeholder
//     anywhere but at the secret's host, and the Result lists the
//     refusals.
//   - outlive (process_test.go): processes tagged with a marker in argv are
//     seen in the host's /proc while the program runs, and are gone from it
//     after Run returns, on exit and on timeout.
//   - signals (process_test.go): a host sleeper and the test survive
//     kill -9 -1, kills aimed at their host pids and a sweep of all pids;
//     a kill of init does not stop the run from reporting.
//   - fork-bomb, disk, output-flood, memory-bomb (process_test.go,
//     limits_test.go): the host's process count, its free space on
//     os.TempDir() and /dev/shm, and this process's heap stay within stated
//     bounds; nothing of the sandbox's host uid remains; the Result says
//     which limit stopped the program.
//   - privilege, proc, devices, tty (privilege_test.go): errnos of refused
//     system calls; setuid binaries' credentials read from /proc; from the
//     host, the program's uid, capabilities and namespaces, and those of
//     every thread of its init.
//   - symlinks (symlink_test.go): links come back to the caller's directory
//     as links (os.Readlink) and are listed unhashed; canaries keep their
//     content; writes through links create no host path; no setuid file or
//     FIFO comes back.
//   - sparse-file, hard-link-fan-out (inodes_test.go, hardlink_test.go): a
//     file of 4 GiB that holds 1 MiB, and one file of 4 MiB with 256
//     names, cost the caller's directory about the data they hold (blocks
//     from stat), and are listed (the first without a sha256 and with a
//     warning).
//   - inherited-fds, concurrent, ipc-uts, fresh (isolation_test.go): no host
//     descriptor reaches the program; a second sandbox finds nothing of a
//     first that the host sees holding its secrets; SysV objects the test
//     made on the host are invisible and survive; the host's hostname is
//     unchanged; nothing of one Exec is visible to the next.
//
// Local-tier controls (the subtests named local-control) run the same
// programs with no isolation and assert that the attack then succeeds: the
// probes can see what they look for, so their failing against the sandbox
// means something.
package attack_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/testenv"
	_ "github.com/codecell-dev/codecell/tier/local"
	"github.com/codecell-dev/codecell/tier/native"
)

// hostSecretVar is set in the test process's environment by TestMain; no
// sandboxed program may see its value.
const hostSecretVar = "CODECELL_ATTACK_HOST_SECRET"

var hostSecret = "host-secret-" + randHex(12)

func TestMain(m *testing.M) {
	// The native tier's init, and the local tier's supervisor, are
	// re-executions of this test binary.
	codecell.Init()
	os.Setenv(hostSecretVar, hostSecret)
	os.Exit(testenv.Run(m))
}

// TestAttack is the suite. The first four subtests run one at a time:
// three measure host-wide quantities (the host's process count, its free
// disk space, this process's heap) that concurrent runs would blur, and
// inherited-fds opens descriptors that any child started meanwhile would
// inherit. Subtests that call t.Parallel wait until this function returns,
// so the rest run after them, concurrently.
func TestAttack(t *testing.T) {
	// How the native tier served the suite's runs: in sandboxes of their
	// own, started warm, or forked from a template interpreter.
	t.Cleanup(func() { t.Logf("native tier: %+v", native.Default.Stats()) })
	requireNative(t)
	for _, c := range []struct {
		name string
		f    func(*testing.T)
	}{
		{"fork-bomb", attackForkBomb},
		{"disk", attackDisk},
		{"output-flood", attackOutputFlood},
		{"inherited-fds", attackInheritedFDs},
		{"read", attackRead},
		{"write", attackWrite},
		{"env", attackEnv},
		{"network", attackNetwork},
		{"network-policy", attackNetworkPolicy},
		{"network-secrets", attackNetworkSecrets},
		{"outlive", attackOutlive},
		{"signals", attackSignals},
		{"memory-bomb", attackMemoryBomb},
		{"privilege", attackPrivilege},
		{"proc", attackProc},
		{"devices", attackDevices},
		{"tty", attackTTY},
		{"symlinks", attackSymlinks},
		{"hard-links", attackHardLink},
		{"hard-link-fan-out", attackHardLinkFanOut},
		{"huge-workspace", attackHugeWorkspace},
		{"deep-workspace", attackDeepWorkspace},
		{"runner-hijack", attackRunnerHijack},
		{"forged-records", attackForgedRecords},
		{"fill-tmpfs", attackFillTmpfs},
		{"oom-score", attackOOMScore},
		{"python-policy-bypasses", attackPythonPolicyBypasses},
		{"empty-files", attackEmptyFiles},
		{"disk-cost", attackDiskCost},
		{"sparse-file", attackSparseFile},
		{"node-permissions", attackNodePermissions},
		{"concurrent", attackConcurrent},
		{"ipc-uts", attackIPC},
		{"fresh", attackFresh},
	} {
		t.Run(c.name, c.f)
	}
}

// engine runs every Exec of the suite; an Engine is safe for concurrent use.
var engine = &codecell.Engine{}

// requireNative skips a test on a host without the native sandbox, or fails
// it when CODECELL_REQUIRE_NATIVE=1.
func requireNative(t *testing.T) { t.Helper(); testenv.RequireNative(t, native.Default.Probe) }

// rootless reports whether codecell runs without root here. The native
// tier then maps the program to the caller's own uid (uid 0 inside, without
// capabilities) rather than to a host uid of its own, so the checks of a
// distinct host identity do not apply.
func rootless() bool { return os.Geteuid() != 0 }

// requireAMD64 skips tests that use x86-64 system call numbers.
func requireAMD64(t *testing.T) {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		t.Skipf("system call numbers are written for amd64, not %s", runtime.GOARCH)
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// marker returns a unique word for argv, file names and payloads.
func marker(what string) string { return "codecell-attack-" + what + "-" + randHex(6) }

// run runs x (tier native and Python unless set, a generous code size) and
// fails the test when no Result could be produced or the sandbox itself
// failed: an attack must be judged on a program that really ran.
func run(t *testing.T, x codecell.Exec) *codecell.Result {
	t.Helper()
	return runWith(t, engine, x)
}

// runWith is run with an Engine of the test's own.
func runWith(t *testing.T, eng *codecell.Engine, x codecell.Exec) *codecell.Result {
	t.Helper()
	if x.Tier == "" {
		x.Tier = native.Name
	}
	if x.Language == "" {
		x.Language = "python"
	}
	if x.Limits.Timeout == 0 {
		x.Limits.Timeout = 20 * time.Second
	}
	if x.Limits.CodeSize == 0 {
		x.Limits.CodeSize = 200_000
	}
	ctx, cancel := context.WithTimeout(context.Background(), x.Limits.Timeout+60*time.Second)
	defer cancel()
	res, err := eng.Run(ctx, &x)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Status == codecell.StatusBlocked || res.Status == codecell.StatusSandboxError {
		t.Fatalf("the program did not run: %s", describe(res))
	}
	if x.Tier == "local" && res.Isolation.Level != "none" {
		t.Fatalf("a local-tier control ran with isolation %q", res.Isolation.Level)
	}
	if x.Tier == native.Name && res.Isolation.Level != "sandbox" {
		t.Fatalf("a native run reports isolation %q", res.Isolation.Level)
	}
	return res
}

// describe renders a Result for a failure message.
func describe(res *codecell.Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "status %s, exit %d", res.Status, res.ExitCode)
	if res.Error != nil {
		fmt.Fprintf(&b, ", error %s: %s", res.Error.Code, res.Error.Message)
	}
	if len(res.Value) > 0 {
		fmt.Fprintf(&b, "\nvalue: %s", clip(string(res.Value), 4000))
	}
	if res.Stdout != "" {
		fmt.Fprintf(&b, "\nstdout: %s", clip(res.Stdout, 2000))
	}
	if res.Stderr != "" {
		fmt.Fprintf(&b, "\nstderr: %s", clip(res.Stderr, 2000))
	}
	if len(res.Warnings) > 0 {
		fmt.Fprintf(&b, "\nwarnings: %q", res.Warnings)
	}
	return b.String()
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// pyPrelude gives every Python attack program the same vocabulary. A probe's
// outcome is a string: "ok" or "ok:<detail>" when the operation succeeded,
// else the errno's name (EACCES, ENOENT, …), so that the test asserts on
// errno values and a success is never mistaken for a refusal.
const pyPrelude = `
import os, sys, errno, ctypes, socket, json, time, signal, stat, subprocess
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

def ename(n):
    return errno.errorcode.get(n, 'E%d' % n)

def attempt(f):
    try:
        v = f()
    except OSError as e:
        if e.errno:
            return ename(e.errno)
        return 'OSError:' + str(e)
    except Exception as e:
        return type(e).__name__ + ':' + str(e)
    return 'ok' if v is None else 'ok:' + str(v)

def sc(nr, *args):
    """A raw system call; 'ok:<ret>' or the errno's name."""
    conv = []
    for a in args:
        conv.append(ctypes.c_long(a) if isinstance(a, int) else a)
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *conv)
    if r == -1:
        return ename(ctypes.get_errno())
    return 'ok:%d' % r

def read_all(p, n=1 << 20):
    with open(p, 'rb') as f:
        return f.read(n)

def can_write(p):
    """access(W_OK): asks, changes nothing."""
    ctypes.set_errno(0)
    if libc.access(p.encode(), 2) == 0:
        return 'ok'
    return ename(ctypes.get_errno())

def open_write(p):
    """Opens for writing without O_TRUNC or O_CREAT, and closes: no change."""
    fd = os.open(p, os.O_WRONLY | os.O_NOCTTY | os.O_NONBLOCK)
    os.close(fd)

R = {}
`

// probes runs a Python program built from pyPrelude and src, whose return
// value is the dict R of probe → outcome, and returns that dict with the
// Result.
func probes(t *testing.T, x codecell.Exec, src string) (map[string]string, *codecell.Result) {
	t.Helper()
	return probesWith(t, engine, x, src)
}

// probesWith is probes with an Engine of the test's own.
func probesWith(t *testing.T, eng *codecell.Engine, x codecell.Exec, src string) (map[string]string, *codecell.Result) {
	t.Helper()
	x.Language = "python"
	if x.Tier == "" {
		x.Tier = native.Name
	}
	x.Code = pyPrelude + src + "\nR\n"
	res := runWith(t, eng, x)
	if res.Status != codecell.StatusSuccess {
		t.Fatalf("the probe program failed: %s", describe(res))
	}
	var r map[string]string
	if err := json.Unmarshal(res.Value, &r); err != nil {
		t.Fatalf("the probe program's value is not a map of strings: %v: %s", err, describe(res))
	}
	t.Logf("%s probes: %s", x.Tier, res.Value)
	return r, res
}

// expectErrno asserts that probe name failed with one of the errnos.
func expectErrno(t *testing.T, r map[string]string, name string, errnos ...string) {
	t.Helper()
	got, ok := r[name]
	if !ok {
		t.Fatalf("probe %q did not report", name)
	}
	if !slices.Contains(errnos, got) {
		t.Errorf("probe %s: got %q, want a refusal with one of %v", name, got, errnos)
	}
}

// expectRefused asserts that probe name did not succeed, whatever the errno.
func expectRefused(t *testing.T, r map[string]string, name string) {
	t.Helper()
	got, ok := r[name]
	if !ok {
		t.Fatalf("probe %q did not report", name)
	}
	if got == "ok" || strings.HasPrefix(got, "ok:") {
		t.Errorf("probe %s succeeded (%q); it must be refused", name, got)
	}
}

// expectOK asserts that probe name succeeded (used by the local controls and
// by sanity checks that a probe can succeed where it should).
func expectOK(t *testing.T, r map[string]string, name string) {
	t.Helper()
	got := r[name]
	if got != "ok" && !strings.HasPrefix(got, "ok:") {
		t.Errorf("probe %s: got %q, want success", name, got)
	}
}

// noSecret asserts that none of the secrets shows anywhere in the Result.
func noSecret(t *testing.T, res *codecell.Result, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		for where, text := range map[string]string{"stdout": res.Stdout, "stderr": res.Stderr, "value": string(res.Value)} {
			if strings.Contains(text, s) {
				t.Errorf("the secret %q leaked into %s", s, where)
			}
		}
	}
}

// hostProcs returns the host pids whose command line contains word.
func hostProcs(word string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	w := []byte(word)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmdline, w) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// waitNoHostProcs waits up to 2 s (for the kernel to finish killing and
// reaping) until no host process's command line contains word.
func waitNoHostProcs(t *testing.T, word string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		pids := hostProcs(word)
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			var desc []string
			for _, p := range pids {
				st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", p))
				desc = append(desc, fmt.Sprintf("pid %d: %s", p, statusLines(string(st), "State", "Uid", "PPid")))
			}
			t.Errorf("processes tagged %s outlived the Exec: %s", word, strings.Join(desc, "; "))
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// watchHostProcs polls the host's /proc for word until stop is closed, and
// reports the host pids it saw: evidence that the host-side scan does see
// the sandbox's processes.
func watchHostProcs(word string, stop <-chan struct{}) <-chan []int {
	seen := make(chan []int, 1)
	go func() {
		set := map[int]bool{}
		for {
			for _, p := range hostProcs(word) {
				set[p] = true
			}
			select {
			case <-stop:
				var pids []int
				for p := range set {
					pids = append(pids, p)
				}
				seen <- pids
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return seen
}

// statusLines picks lines of a /proc/<pid>/status by field name.
func statusLines(status string, fields ...string) string {
	var out []string
	for _, l := range strings.Split(status, "\n") {
		for _, f := range fields {
			if strings.HasPrefix(l, f+":") {
				out = append(out, strings.Join(strings.Fields(l), " "))
			}
		}
	}
	return strings.Join(out, ", ")
}

// hostTempDir makes a directory on the host that every uid may enter and
// read, so that only the sandbox, not file permissions, keeps a program from
// it. It is removed when the test ends.
func hostTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "codecell-attack-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// canary is a world-readable host file holding a secret token.
type canary struct {
	Path, Token string
}

// newCanary writes a canary at path (removed when the test ends).
func newCanary(t *testing.T, path string) canary {
	t.Helper()
	c := canary{Path: path, Token: "canary-secret-" + randHex(12)}
	if err := os.WriteFile(path, []byte(c.Token+"\n"), 0o644); err != nil {
		t.Fatalf("writing the canary %s: %v", path, err)
	}
	t.Cleanup(func() { os.Remove(path) })
	return c
}

// unchanged asserts that the canary still holds its token and nothing else.
func (c canary) unchanged(t *testing.T) {
	t.Helper()
	info, err := os.Lstat(c.Path)
	if err != nil {
		t.Errorf("canary %s: %v", c.Path, err)
		return
	}
	if !info.Mode().IsRegular() {
		t.Errorf("canary %s is now %v", c.Path, info.Mode())
		return
	}
	data, err := os.ReadFile(c.Path)
	if err != nil || string(data) != c.Token+"\n" {
		t.Errorf("canary %s changed: %q, %v", c.Path, data, err)
	}
}

// hostAbsent asserts that nothing exists at a host path; a path that the
// attack did create is removed, so that a failing run leaves nothing behind.
func hostAbsent(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Lstat(path); err == nil {
		t.Errorf("the sandboxed program created %s on the host", path)
		os.RemoveAll(path)
	}
}
