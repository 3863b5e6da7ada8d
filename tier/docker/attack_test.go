//go:build linux

package docker_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/tier/docker"
)

// Attacks on the docker tier, checked from the host's side. Each is
// harmless if it gets through: it reads a canary the test wrote, connects
// to a listener the test started, or writes marker files the test owns.

// TestAttackHostFiles: a canary in a host directory and the host's
// /etc/shadow cannot be read from the container.
func TestAttackHostFiles(t *testing.T) {
	tier := newTier(t)
	dir := t.TempDir()
	canary := filepath.Join(dir, "canary")
	const token = "canary-5b1f0e"
	if err := os.WriteFile(canary, []byte(token), 0o644); err != nil {
		t.Fatal(err)
	}
	code := `import os
for p in [` + "'" + canary + "'" + `, "/etc/shadow", "/proc/1/root` + canary + `", "/run/podman/podman.sock", "/var/run/docker.sock"]:
    try:
        print(p, open(p).read())
    except Exception as e:
        print(p, "refused", type(e).__name__)
`
	res := run(t, tier, codecell.Exec{Language: "python", Code: code})
	if res.Status != codecell.StatusSuccess {
		t.Fatalf("got %s: %s %+v", res.Status, res.Stderr, res.Error)
	}
	if strings.Contains(res.Stdout+res.Stderr, token) || strings.Count(res.Stdout, "refused") != 5 {
		t.Errorf("a host file was read:\n%s", res.Stdout)
	}
}

// TestAttackHostNetwork: a listener on the host's loopback hears nothing
// from the container, which has no network.
func TestAttackHostNetwork(t *testing.T) {
	tier := newTier(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	code := `import socket
for host in ["127.0.0.1", "10.0.2.2", "172.17.0.1"]:
    s = socket.socket()
    s.settimeout(2)
    try:
        s.connect((host, ` + strconv.Itoa(port) + `))
        print(host, "connected")
    except OSError as e:
        print(host, "refused", e.errno)
`
	res := run(t, tier, codecell.Exec{Language: "python", Code: code})
	if res.Status != codecell.StatusSuccess || strings.Contains(res.Stdout, "connected") {
		t.Fatalf("got %s:\n%s%s", res.Status, res.Stdout, res.Stderr)
	}
	// Anything that reached the listener is queued by now: the program
	// has ended.
	l.(*net.TCPListener).SetDeadline(time.Now())
	if c, err := l.Accept(); err == nil {
		c.Close()
		t.Errorf("the host's listener accepted a connection from the container")
	}
	if !strings.Contains(res.Isolation.Network, "none") {
		t.Errorf("isolation.network = %q", res.Isolation.Network)
	}
}

// TestAttackPrivileges: the program runs as the configured user with no
// capabilities, no_new_privs and a seccomp filter, and cannot write to
// the root, the runner's files or the sockets' directory.
func TestAttackPrivileges(t *testing.T) {
	tier := newTier(t)
	code := `import os
st = {l.split(":")[0]: l.split(":", 1)[1].strip() for l in open("/proc/self/status")}
print("uid", os.getuid(), os.getgid())
print("caps", st["CapEff"], st["CapPrm"], st["CapBnd"])
print("nnp", st["NoNewPrivs"], "seccomp", st["Seccomp"])
for d in ["/", "/usr", "/etc", "/run/codecell", "/run/codecell-channels", "/run/codecell-init"]:
    try:
        open(os.path.join(d, "marker-7d1c"), "w").close()
        print(d, "written")
    except OSError as e:
        print(d, "refused")
`
	res := run(t, tier, codecell.Exec{Language: "python", Code: code})
	if res.Status != codecell.StatusSuccess {
		t.Fatalf("got %s: %s %+v", res.Status, res.Stderr, res.Error)
	}
	for _, want := range []string{"uid 65534 65534\n", "caps 0000000000000000 0000000000000000 0000000000000000\n", "nnp 1 seccomp 2\n"} {
		if !strings.Contains(res.Stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, res.Stdout)
		}
	}
	if strings.Contains(res.Stdout, "written") {
		t.Errorf("a write outside the workspace and /tmp went through:\n%s", res.Stdout)
	}
	// The Result says what the program saw.
	if iso := res.Isolation; !iso.NoNewPrivs || !strings.Contains(iso.Seccomp, "profile") || !strings.Contains(iso.User, "uid 65534") {
		t.Errorf("isolation %+v", iso)
	}
}

// TestAttackReadBack: what the program leaves in its workspace comes back
// as data only: links as links (never followed), a hard link refused with
// a warning, and nothing written outside the caller's directory.
func TestAttackReadBack(t *testing.T) {
	tier := newTier(t)
	parent := t.TempDir()
	ws := filepath.Join(parent, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	code := `import os
os.symlink("/etc/passwd", "passwd")
os.symlink("..", "up")
os.symlink("../escape", "escape")
os.mkfifo("fifo")
`
	res := run(t, tier, codecell.Exec{Language: "python", Code: code, Workspace: ws})
	if res.Status != codecell.StatusSuccess {
		t.Fatalf("got %s: %s %+v", res.Status, res.Stderr, res.Error)
	}
	if target, err := os.Readlink(filepath.Join(ws, "passwd")); err != nil || target != "/etc/passwd" {
		t.Errorf("passwd = %q, %v; files %+v warnings %q", target, err, res.Files, res.Warnings)
	}
	if _, err := os.Lstat(filepath.Join(parent, "escape")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the program's link wrote beside the workspace: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(ws, "fifo")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a fifo came back: %v", err)
	}

	if !strings.Contains(strings.Join(res.Warnings, "\n"), "fifo was left in the container") {
		t.Errorf("warnings %q", res.Warnings)
	}

	// A hard link does not come back (the file it names does), and the
	// Result says so.
	res = run(t, tier, codecell.Exec{Language: "python", Code: "import os\nopen('a', 'w').write('x')\nos.link('a', 'b')\n", Workspace: ws})
	if res.Status != codecell.StatusSuccess || !strings.Contains(strings.Join(res.Warnings, "\n"), "a hard link") {
		t.Errorf("got %s, warnings %q, files %+v", res.Status, res.Warnings, res.Files)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "a")); err != nil || string(b) != "x" {
		t.Errorf("a = %q, %v", b, err)
	}
}

// TestAttackLeavesNoContainer: after a run, on exit and on timeout, no
// container of this process is left.
func TestAttackLeavesNoContainer(t *testing.T) {
	tier := newTier(t)
	tier.Pool = -1
	res := run(t, tier, codecell.Exec{Language: "python", Code: "import time\nprint('up', flush=True)\ntime.sleep(60)\n",
		Limits: codecell.Limits{Timeout: 2 * time.Second}})
	if res.Status != codecell.StatusTimeout || res.Stdout != "up\n" {
		t.Fatalf("got %s, stdout %q", res.Status, res.Stdout)
	}
	if n := countContainers(t, tier); n != 0 {
		t.Errorf("%d containers left", n)
	}
}

func countContainers(t *testing.T, tier *docker.Tier) int {
	t.Helper()
	ids, err := tier.Containers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return len(ids)
}
