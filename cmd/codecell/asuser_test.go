package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/testenv"
	"github.com/codecell-dev/codecell/tier/native"
)

// TestRunAsAUser: codecell run by a user who is not root, with the
// workspace that user's directory, brings back every file the program
// made, also those it left without read permission (in a directory it
// left without any), with the permissions it gave them, and warns of
// nothing: the sandbox maps the program's user to that user, who owns
// the files and can open them (workspace.Unlock).
func TestRunAsAUser(t *testing.T) {
	const uid = 2_138_000_003
	res, ws := asUser(t, uid, `import os
os.makedirs("shut/inner")
for name, data in [("shut/g.txt", "g"), ("shut/inner/f.txt", "f"), ("none.txt", "n"), ("write-only.txt", "w")]:
    with open(name, "w") as f:
        f.write(data)
os.chmod("none.txt", 0)
os.chmod("write-only.txt", 0o200)
os.chmod("shut/inner", 0)
os.chmod("shut", 0)
`, "")
	for _, w := range res.Warnings {
		if !strings.Contains(w, "cgroup") { // a user may have no cgroup of their own
			t.Errorf("warning: %s", w)
		}
	}
	want := map[string]os.FileMode{"shut/g.txt": 0o644, "shut/inner/f.txt": 0o644, "none.txt": 0, "write-only.txt": 0o200}
	listed := map[string]bool{}
	for _, f := range res.Files {
		listed[f.Path] = true
	}
	for name, perm := range want {
		if !listed[name] {
			t.Errorf("%s is not in the Result's files: %+v", name, res.Files)
		}
		p := filepath.Join(ws, name)
		info, err := os.Stat(p)
		if err != nil {
			t.Errorf("%s was not brought back: %v", name, err)
			continue
		}
		if info.Mode().Perm() != perm {
			t.Errorf("%s brought back with %v, want %v", name, info.Mode().Perm(), perm)
		}
		if st := info.Sys().(*syscall.Stat_t); int(st.Uid) != uid {
			t.Errorf("%s belongs to uid %d, want %d", name, st.Uid, uid)
		}
		if b, err := os.ReadFile(p); err != nil || string(b) != strings.TrimSuffix(filepath.Base(name), ".txt")[:1] {
			t.Errorf("%s holds %q, %v", name, b, err)
		}
	}
}

// asUser runs codecell run on a Python program as uid, a user who is
// not root, with a workspace of that user's and config, when not empty,
// as its configuration: it returns the Result and the workspace. The
// test must run as root.
func asUser(t *testing.T, uid int, program, config string) (codecell.Result, string) {
	t.Helper()
	testenv.RequireNative(t, native.Default.Probe)
	dir, bin := testenv.ForAnotherUser(t)
	ws, home := filepath.Join(dir, "ws"), filepath.Join(dir, "home")
	for _, d := range []string{ws, home} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
	prog := filepath.Join(dir, "prog.py")
	if err := os.WriteFile(prog, []byte(program), 0o644); err != nil {
		t.Fatal(err)
	}
	var flags []string
	if config != "" {
		flags = []string{"--config", filepath.Join(dir, "codecell.json")}
		if err := os.WriteFile(flags[1], []byte(config), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, append(append([]string{"run", "--tier", "native", "--workspace", ws, "--json"}, flags...), prog)...)
	cmd.Dir = dir
	cmd.Env = []string{"CODECELL_TEST_AS_CLI=1", "HOME=" + home, "PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v\n%s%s", err, stdout, stderr.String())
	}
	var res codecell.Result
	if err := json.Unmarshal(stdout, &res); err != nil || res.Status != codecell.StatusSuccess {
		t.Fatalf("%v: %s\n%s", err, stdout, stderr.String())
	}
	return res, ws
}

// TestForkBombAsAUser: without a cgroup of its own, as a user who is
// not root, a program's processes are still bounded by the limit: the
// kernel counts RLIMIT_NPROC in the sandbox's own user namespace, not
// over every process of the user (whom a fork bomb would leave unable
// to start any, codecell included). The bomb is bounded at 300 children,
// each of which waits for its parent to close a pipe.
func TestForkBombAsAUser(t *testing.T) {
	const uid = 2_138_000_005
	res, _ := asUser(t, uid, `import os
r, w = os.pipe()
n = 0
for i in range(300):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        os.close(w)
        os.read(r, 1)
        os._exit(0)
    n += 1
os.close(w)
for i in range(n):
    os.wait()
print(n)
`, `{"limits": {"processes": 40}}`)
	if res.Status != codecell.StatusSuccess {
		t.Fatalf("%s: %+v %q", res.Status, res.Error, res.Stderr)
	}
	n, err := strconv.Atoi(strings.TrimSpace(res.Stdout))
	if err != nil || n >= 40 || n < 1 {
		t.Errorf("the program forked %q children, want fewer than the limit of 40; processes limit %q", res.Stdout, res.Isolation.Limits.Processes)
	}
	if !strings.Contains(res.Isolation.Limits.Processes, "40") && !strings.Contains(res.Isolation.Limits.Processes, "pids controller") {
		t.Errorf("the Result says processes are limited by %q", res.Isolation.Limits.Processes)
	}
}
