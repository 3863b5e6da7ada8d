//go:build linux

package docker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"golang.org/x/sys/unix"

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
// as data only: links as links (never followed), a hard link as a copy of
// its file, a fifo left with a warning, and nothing written outside the
// caller's directory.
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

	if !strings.Contains(strings.Join(res.Warnings, "\n"), "1 pipe, socket or device node left in the workspace is in no list and not copied back") {
		t.Errorf("warnings %q", res.Warnings)
	}

	// A hard link comes back as a copy of the file it names, as every
	// name of a file does on the native tier, without a warning.
	res = run(t, tier, codecell.Exec{Language: "python", Code: "import os\nopen('a', 'w').write('x')\nos.link('a', 'b')\n", Workspace: ws})
	if res.Status != codecell.StatusSuccess || len(res.Warnings) != 0 || len(res.Files) != 2 {
		t.Errorf("got %s, warnings %q, files %+v", res.Status, res.Warnings, res.Files)
	}
	for _, f := range []string{"a", "b"} {
		if b, err := os.ReadFile(filepath.Join(ws, f)); err != nil || string(b) != "x" {
			t.Errorf("%s = %q, %v", f, b, err)
		}
	}

	// Links that climb out of the workspace (which Docker's unpacking
	// refuses) are in the program's workspace too, and stay the user's.
	res = run(t, tier, codecell.Exec{Language: "python", Code: "import os\n[os.readlink('up'), os.readlink('escape'), os.readlink('passwd')]\n", Workspace: ws})
	if res.Status != codecell.StatusSuccess || string(res.Value) != `["..","../escape","/etc/passwd"]` {
		t.Errorf("the program saw %s: %s %+v", res.Value, res.Status, res.Error)
	}
	for name, want := range map[string]string{"up": "..", "escape": "../escape", "passwd": "/etc/passwd"} {
		if got, err := os.Readlink(filepath.Join(ws, name)); err != nil || got != want {
			t.Errorf("%s = %q, %v after the runs, want %q", name, got, err, want)
		}
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

// TestAttackWorkspaceFill: a program writing 64 MiB into a workspace
// limited to 8 MiB gets ENOSPC at the limit, in a container made for the
// run and in one the pool readied: while it runs, the host holds its
// workspace in a tmpfs of the limit's size, and what comes back is no
// larger. The Result is the native tier's for the same program: a failure
// whose error is the program's OSError.
func TestAttackWorkspaceFill(t *testing.T) {
	tier := newTier(t)
	tier.Pool = 1
	cli, err := client.New(client.WithHost(engineHost), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	const limit = 8 << 20
	const slack = 1 << 20
	code := `import os
written = 0
try:
    with open("fill.bin", "wb") as f:
        for i in range(64):
            f.write(b"x" * (1 << 20))
            f.flush()
            written += 1
finally:
    call_tool_sync("measure", {"host": os.uname().nodename, "written": written})
`
	for i, path := range []string{"made for the run", "ready pool"} {
		// The tool runs on the host while the program waits for it: the
		// container, and its workspace, are still there.
		var measured struct {
			fsType       int64
			size, used   uint64
			written      int
			source, name string
		}
		measure := codecell.Tool{Name: "measure", Call: func(ctx context.Context, p json.RawMessage) (json.RawMessage, error) {
			var in struct {
				Host    string
				Written int
			}
			if err := json.Unmarshal(p, &in); err != nil {
				return nil, err
			}
			measured.written = in.Written
			got, err := cli.ContainerInspect(ctx, in.Host, client.ContainerInspectOptions{})
			if err != nil {
				return nil, err
			}
			for _, m := range got.Container.Mounts {
				if m.Destination == "/workspace" {
					measured.source, measured.name = m.Source, m.Name
				}
			}
			var st syscall.Statfs_t
			if err := syscall.Statfs(measured.source, &st); err != nil {
				return nil, fmt.Errorf("the workspace's volume on the host: %w", err)
			}
			measured.fsType = int64(st.Type)
			measured.size = st.Blocks * uint64(st.Bsize)
			measured.used = (st.Blocks - st.Bfree) * uint64(st.Bsize)
			return json.Marshal("ok")
		}}
		ws := t.TempDir()
		res := run(t, tier, codecell.Exec{Language: "python", Code: code, Workspace: ws, Tools: []codecell.Tool{measure},
			Limits: codecell.Limits{Workspace: limit}})
		if !strings.Contains(res.Isolation.Engine, "ready pool") != (i == 0) {
			t.Errorf("run %d: want a container %s; isolation.engine %q", i, path, res.Isolation.Engine)
		}
		if res.Status != codecell.StatusFailure || res.Error == nil || res.Error.Code != codecell.CodeRuntimeError ||
			!strings.Contains(res.Error.Message, "No space left on device") {
			t.Fatalf("%s: got %s, error %+v, stderr %q", path, res.Status, res.Error, res.Stderr)
		}
		if measured.source == "" || measured.fsType != unix.TMPFS_MAGIC || measured.size > limit+slack || measured.used > limit+slack {
			t.Errorf("%s: the workspace on the host (%s, volume %q): type %#x, size %d, used %d; want a tmpfs of at most %d",
				path, measured.source, measured.name, measured.fsType, measured.size, measured.used, limit+slack)
		}
		if measured.written < 7 || measured.written > 8 {
			t.Errorf("%s: the program wrote %d MiB before ENOSPC", path, measured.written)
		}
		if len(res.Files) != 1 || res.Files[0].Path != "fill.bin" || res.Files[0].Size > limit {
			t.Errorf("%s: files %+v, warnings %q", path, res.Files, res.Warnings)
		}
		if info, err := os.Stat(filepath.Join(ws, "fill.bin")); err != nil || info.Size() > limit {
			t.Errorf("%s: the file brought back: %v, %v", path, info, err)
		}
		if !strings.Contains(res.Isolation.Limits.Workspace, "tmpfs") {
			t.Errorf("isolation.limits.workspace = %q", res.Isolation.Limits.Workspace)
		}
		// The volume goes with its container.
		if measured.name != "" {
			if _, err := cli.VolumeInspect(context.Background(), measured.name, client.VolumeInspectOptions{}); err == nil {
				t.Errorf("%s: the volume %s outlived its container", path, measured.name)
			}
		}
		if i == 0 {
			waitReady(t, tier)
		}
	}

	// A workspace that does not fit is refused before the program runs,
	// as the native tier refuses it.
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "big.bin"), make([]byte, limit+(2<<20)), 0o644); err != nil {
		t.Fatal(err)
	}
	res := run(t, tier, codecell.Exec{Language: "python", Code: "print('ran')\n", Workspace: ws, Limits: codecell.Limits{Workspace: limit}})
	if res.Error == nil || res.Error.Code != codecell.CodeWorkspaceTooLarge || strings.Contains(res.Stdout, "ran") {
		t.Errorf("a workspace over the limit: got %s, error %+v, stdout %q", res.Status, res.Error, res.Stdout)
	}
}

// TestAttackLauncher: the launcher waits beside the program as the same
// user. The program cannot reach its descriptors (the host's control
// socket) through /proc; a program that kills it loses its own run's
// changes, never the caller's files: the workspace is not read back from a
// container that has ended, whose tmpfs is gone.
func TestAttackLauncher(t *testing.T) {
	tier := newTier(t)
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "keep.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	code := `import os, signal
launcher = os.getppid()
for p in ["/proc/%d/fd" % launcher, "/proc/%d/environ" % launcher]:
    try:
        print(p, os.listdir(p) if p.endswith("fd") else open(p, "rb").read(1))
    except OSError as e:
        print(p, "refused", e.errno)
open("new.txt", "w").write("x")
os.remove("keep.txt")
os.kill(launcher, signal.SIGKILL)
`
	res := run(t, tier, codecell.Exec{Language: "python", Code: code, Workspace: ws, Limits: codecell.Limits{Workspace: 8 << 20}})
	if strings.Count(res.Stdout, "refused 13\n") != 2 {
		t.Errorf("the program reached the launcher's descriptors:\n%s", res.Stdout)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "keep.txt")); err != nil || string(b) != "mine" {
		t.Errorf("the caller's file after the launcher was killed: %q, %v; files %+v", b, err, res.Files)
	}
	if _, err := os.Stat(filepath.Join(ws, "new.txt")); err == nil || len(res.Files) != 0 ||
		!strings.Contains(strings.Join(res.Warnings, "\n"), "no change was kept") {
		t.Errorf("got %s, files %+v, warnings %q", res.Status, res.Files, res.Warnings)
	}
}
