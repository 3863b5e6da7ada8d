package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

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
	return asUserIn(t, uid, program, config, nil)
}

// asUserIn is asUser with prepare, when not nil, called before the run
// with the workspace (the user's, empty) and the temporary directory the
// run is given (empty, and, as /tmp, any user's to write in).
func asUserIn(t *testing.T, uid int, program, config string, prepare func(ws, tmp string)) (codecell.Result, string) {
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
	tmp := sharedTmp(t, dir, uid)
	if prepare != nil {
		prepare(ws, tmp)
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
	cmd.Env = []string{"CODECELL_TEST_AS_CLI=1", "HOME=" + home, "TMPDIR=" + tmp, "PATH=/usr/bin:/bin"}
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

// sharedTmp makes dir/tmp, a temporary directory for codecell run as uid
// that, as /tmp, any user may write in (the test's own, not the host's
// /tmp, so that nothing codecell leaves there outlives the test). At the
// end of the test it removes the directory codecell makes for uid on
// /dev/shm, if it is empty: each codecell process removes its own
// directory in it as it exits.
func sharedTmp(t *testing.T, dir string, uid int) string {
	t.Helper()
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(tmp, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(filepath.Join("/dev/shm", fmt.Sprintf("codecell-%d", uid))) })
	return tmp
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

// TestRunAsAUserWhoseNamesAreTaken: the names codecell gives a user's
// directories in the shared temporary directories ($TMPDIR/codecell-root-<uid>,
// $TMPDIR/codecell-<uid>, /dev/shm/codecell-<uid>) may be taken by another
// user first, with directories of theirs that anyone may write. codecell
// still runs that user's programs, and puts nothing in the other user's
// directories, which that user could change under it.
func TestRunAsAUserWhoseNamesAreTaken(t *testing.T) {
	const uid, squatter = 2_138_000_007, 2_138_000_008
	var taken []string
	res, _ := asUserIn(t, uid, "print('ran')", "", func(_, tmp string) {
		for _, dir := range []string{tmp, "/dev/shm"} {
			for _, name := range []string{"codecell-root-%d", "codecell-%d"} {
				p := filepath.Join(dir, fmt.Sprintf(name, uid))
				if err := os.Mkdir(p, 0o777); err != nil {
					if errors.Is(err, os.ErrNotExist) {
						continue // no /dev/shm
					}
					t.Fatal(err)
				}
				t.Cleanup(func() { os.RemoveAll(p) })
				if err := os.Chmod(p, 0o777); err != nil {
					t.Fatal(err)
				}
				if err := os.Chown(p, squatter, squatter); err != nil {
					t.Fatal(err)
				}
				taken = append(taken, p)
			}
		}
	})
	if res.Stdout != "ran\n" {
		t.Errorf("stdout %q", res.Stdout)
	}
	for _, p := range taken {
		if names, err := os.ReadDir(p); err != nil || len(names) > 0 {
			t.Errorf("%s, another user's, holds %v (%v)", p, names, err)
		}
	}
}

// TestLeftoversRemovedByTheNextProcess: what a codecell process of a user
// who is not root leaves when it is killed (its directory of its own, with
// the run's workspace and runner directory in it) is removed by the next
// codecell process of that user, which, ending normally, leaves no
// directory of its own.
func TestLeftoversRemovedByTheNextProcess(t *testing.T) {
	const uid = 2_138_000_009
	testenv.RequireNative(t, native.Default.Probe)
	dir, bin := testenv.ForAnotherUser(t)
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(home, uid, uid); err != nil {
		t.Fatal(err)
	}
	tmp := sharedTmp(t, dir, uid)
	prog := filepath.Join(dir, "slow.sh")
	if err := os.WriteFile(prog, []byte("echo started\nsleep 60\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	command := func(args ...string) *exec.Cmd {
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		cmd.Env = []string{"CODECELL_TEST_AS_CLI=1", "HOME=" + home, "TMPDIR=" + tmp, "PATH=/usr/bin:/bin"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		return cmd
	}
	// A process's own directory is under the first base that takes it (see
	// instdir.Bases).
	ownDirs := func(pid int) []string {
		var found []string
		for _, base := range []string{fmt.Sprintf("/dev/shm/codecell-%d", uid), filepath.Join(tmp, fmt.Sprintf("codecell-%d", uid)), filepath.Join(home, ".cache", "codecell", "tmp")} {
			m, _ := filepath.Glob(filepath.Join(base, fmt.Sprintf("proc-%d-*", pid)))
			found = append(found, m...)
		}
		return found
	}

	killed := command("run", "--tier", "native", prog)
	stdout, err := killed.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	killed.Stderr = &stderr
	if err := killed.Start(); err != nil {
		t.Fatal(err)
	}
	defer killed.Process.Kill()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); line != "started\n" {
		killed.Process.Kill()
		killed.Wait()
		t.Fatalf("the program did not start: %q, %v\n%s", line, err, stderr.String())
	}
	left := ownDirs(killed.Process.Pid)
	if len(left) == 0 {
		t.Fatal("the running codecell has no directory of its own: this test no longer sees what it tests")
	}
	killed.Process.Kill()
	killed.Wait()
	if len(existing(left)) == 0 {
		t.Fatalf("the killed process's directories %v are already gone: nothing to test", left)
	}

	next := command("doctor")
	if out, err := next.CombinedOutput(); err != nil {
		t.Fatalf("codecell doctor: %v\n%s", err, out)
	}
	if still := existing(left); len(still) > 0 {
		t.Errorf("the killed process's %v are still there after the next process", still)
	}
	if own := ownDirs(next.Process.Pid); len(own) > 0 {
		t.Errorf("codecell doctor, ended, left %v", own)
	}
}

// TestRunAsAUserOnUnreadableFiles: a workspace that holds files its owner
// may not read (as a program leaves them in a session, for the next
// program of the session to run on) is copied into the sandbox whole, as
// codecell, not root, runs as that owner: the program finds them with
// their permissions, and the workspace keeps its own.
func TestRunAsAUserOnUnreadableFiles(t *testing.T) {
	const uid = 2_138_000_013
	var ws string
	res, _ := asUserIn(t, uid, `import os
print(oct(os.stat("none.txt").st_mode & 0o777), oct(os.stat("shut/g.txt").st_mode & 0o777), open("shut/g.txt").read())
`, "", func(dir, _ string) {
		ws = dir
		if err := os.Mkdir(filepath.Join(ws, "shut"), 0o755); err != nil {
			t.Fatal(err)
		}
		for name, perm := range map[string]os.FileMode{"none.txt": 0, "shut/g.txt": 0o644} {
			p := filepath.Join(ws, name)
			if err := os.WriteFile(p, []byte("g"), perm); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, perm); err != nil {
				t.Fatal(err)
			}
		}
		for _, p := range []string{filepath.Join(ws, "none.txt"), filepath.Join(ws, "shut/g.txt"), filepath.Join(ws, "shut")} {
			if err := os.Chown(p, uid, uid); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chmod(filepath.Join(ws, "shut"), 0o100); err != nil {
			t.Fatal(err)
		}
	})
	if res.Stdout != "0o0 0o644 g\n" {
		t.Errorf("the program saw %q", res.Stdout)
	}
	for name, perm := range map[string]os.FileMode{"none.txt": 0, "shut": 0o100 | os.ModeDir} {
		if info, err := os.Lstat(filepath.Join(ws, name)); err != nil || info.Mode()&(os.ModePerm|os.ModeDir) != perm {
			t.Errorf("%s in the workspace after the run: %v %v, want %v", name, info.Mode(), err, perm)
		}
	}
}

// TestServeAsAUserWithoutAHome: codecell serve as a user whose home it
// cannot write (nobody's /nonexistent) ends at once, saying which
// directory it could not make and how to give it another.
func TestServeAsAUserWithoutAHome(t *testing.T) {
	const uid = 2_138_000_015
	dir, bin := testenv.ForAnotherUser(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	home := filepath.Join(dir, "nonexistent", "home")
	cmd := exec.CommandContext(ctx, bin, "serve", "--addr", "127.0.0.1:0")
	cmd.Dir = dir
	cmd.Env = []string{"CODECELL_TEST_AS_CLI=1", "HOME=" + home, "TMPDIR=" + sharedTmp(t, dir, uid), "PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	out, err := cmd.CombinedOutput()
	if err == nil || ctx.Err() != nil {
		t.Fatalf("codecell serve: %v (%v)\n%s", err, ctx.Err(), out)
	}
	if !strings.Contains(string(out), "--state DIR") || !strings.Contains(string(out), filepath.Dir(home)) {
		t.Errorf("codecell serve says:\n%s", out)
	}
}

// TestLocalRunAsAUserLeavesNoWorkspace: a program run unsandboxed (tier
// local) in a temporary workspace, by a user who is not root, that leaves
// a directory there shut (its owner may not change it): the workspace is
// removed all the same when the run ends.
func TestLocalRunAsAUserLeavesNoWorkspace(t *testing.T) {
	const uid = 2_138_000_017
	dir, bin := testenv.ForAnotherUser(t)
	tmp := sharedTmp(t, dir, uid)
	prog := filepath.Join(dir, "shut.sh")
	if err := os.WriteFile(prog, []byte("mkdir -p shut/in && echo x > shut/in/f && chmod 500 shut/in shut\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "--tier", "local", prog)
	cmd.Dir = dir
	cmd.Env = []string{"CODECELL_TEST_AS_CLI=1", "HOME=" + filepath.Join(dir, "nohome"), "TMPDIR=" + tmp, "PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("codecell run --tier local: %v\n%s", err, out)
	}
	var left []string
	filepath.WalkDir(tmp, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), "codecell-ws-") {
			left = append(left, p)
		}
		return nil
	})
	if len(left) > 0 {
		t.Errorf("the run's workspace is left: %v", left)
	}
}

// TestRunAsAUserOnAnotherUsersWorkspace: a workspace the user may not
// read (root's) is refused before anything runs, as the caller's mistake
// (blocked, INVALID_REQUEST), not as the sandbox's failure that a retry
// might mend.
func TestRunAsAUserOnAnotherUsersWorkspace(t *testing.T) {
	const uid = 2_138_000_019
	dir, bin := testenv.ForAnotherUser(t)
	ws := filepath.Join(dir, "roots")
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	prog := filepath.Join(dir, "p.py")
	if err := os.WriteFile(prog, []byte("print(1)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "--tier", "native", "--json", "--workspace", ws, prog)
	cmd.Dir = dir
	cmd.Env = []string{"CODECELL_TEST_AS_CLI=1", "HOME=" + filepath.Join(dir, "nohome"), "TMPDIR=" + sharedTmp(t, dir, uid), "PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	stdout, _ := cmd.Output()
	var res codecell.Result
	if err := json.Unmarshal(stdout, &res); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	if res.Status != codecell.StatusBlocked || res.Error == nil || res.Error.Code != codecell.CodeInvalidRequest || !strings.Contains(res.Error.Message, "cannot be read") {
		t.Errorf("%s: %+v", res.Status, res.Error)
	}
}
