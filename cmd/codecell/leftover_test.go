package main

import (
	"bufio"
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
	"github.com/codecell-dev/codecell/api"
	"github.com/codecell-dev/codecell/client"
	"github.com/codecell-dev/codecell/internal/testenv"
	"github.com/codecell-dev/codecell/tier/native"
)

// userDirs are the directories a codecell process is given as its user's:
// its temporary, home, cache, runtime and state directories, each the
// test's own, and empty at the start.
type userDirs struct {
	tmp, home, cache, runtime, state string
}

func newUserDirs(t *testing.T) userDirs {
	t.Helper()
	root := t.TempDir()
	d := userDirs{
		tmp: filepath.Join(root, "tmp"), home: filepath.Join(root, "home"), cache: filepath.Join(root, "cache"),
		runtime: filepath.Join(root, "run"), state: filepath.Join(root, "state"),
	}
	for _, dir := range []string{d.tmp, d.home, d.cache, d.runtime, d.state} {
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

func (d userDirs) env() []string {
	return []string{"TMPDIR=" + d.tmp, "HOME=" + d.home, "XDG_CACHE_HOME=" + d.cache,
		"XDG_RUNTIME_DIR=" + d.runtime, "XDG_STATE_HOME=" + d.state}
}

// command is cliCommand in these directories.
func (d userDirs) command(args ...string) *exec.Cmd {
	cmd := cliCommand(args...)
	cmd.Env = append(cmd.Env, d.env()...)
	return cmd
}

// left lists what is in the directories, but for what the cache keeps as
// documented (compiled runners, ~/.cache/codecell/python).
func (d userDirs) left() []string {
	var out []string
	for _, root := range []string{d.tmp, d.home, d.cache, d.runtime, d.state} {
		filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
			rel, _ := filepath.Rel(root, p)
			switch {
			case err != nil:
				out = append(out, fmt.Sprintf("%s: %v", p, err))
			case rel == ".":
			case root == d.cache && (rel == "codecell" || rel == filepath.Join("codecell", "python") ||
				strings.HasPrefix(rel, filepath.Join("codecell", "python")+"/")):
			default:
				out = append(out, p)
			}
			return nil
		})
	}
	return out
}

// ownDirs are the directories of its own a codecell process of this user,
// pid, holds: under /dev/shm or its fallbacks (internal/instdir), and a
// service's in its state directory.
func (d userDirs) ownDirs(pid int) []string {
	var found []string
	for _, base := range []string{fmt.Sprintf("/dev/shm/codecell-%d", os.Geteuid()), filepath.Join(d.tmp, fmt.Sprintf("codecell-%d", os.Geteuid())),
		filepath.Join(d.cache, "codecell", "tmp"), d.state} {
		for _, prefix := range []string{"proc-", "serve-"} {
			m, _ := filepath.Glob(filepath.Join(base, fmt.Sprintf("%s%d-*", prefix, pid)))
			found = append(found, m...)
		}
	}
	return found
}

// TestNothingLeftBehind: codecell run (Python and shell), codecell serve
// stopped with SIGTERM after an execution and a session, and codecell mcp
// ended by closing its stdin leave nothing in the temporary, home, runtime
// and state directories they are given, nor directories of their own on
// /dev/shm, nor (serve and mcp) cgroups; the cache directory keeps only its
// documented cache. A codecell run killed with SIGKILL leaves its
// directory, which the next codecell process removes.
func TestNothingLeftBehind(t *testing.T) {
	testenv.RequireNative(t, native.Default.Probe)
	d := newUserDirs(t)
	check := func(what string, pid int) {
		t.Helper()
		if left := d.left(); len(left) > 0 {
			t.Errorf("%s left %v", what, left)
		}
		if own := existing(d.ownDirs(pid)); len(own) > 0 {
			t.Errorf("%s left its own directories %v", what, own)
		}
	}

	for _, p := range []struct{ name, code, want string }{
		{"p.py", "import os\nopen('out.txt', 'w').write('x')\nprint(6*7)\n", "42\n"},
		{"p.sh", "echo x > out.txt\necho 42\n", "42\n"},
	} {
		cmd := d.command("run", "--tier", "native", writeFile(t, p.name, p.code))
		if out, err := cmd.Output(); err != nil || string(out) != p.want {
			t.Fatalf("codecell run %s: %v, %q", p.name, err, out)
		}
		check("codecell run "+p.name, cmd.Process.Pid)
	}

	ctx := deadlineCtx(t, time.Minute)
	s := startServed(t, d.env(), "--state", d.state)
	c := client.New(s.base, "")
	if res, err := c.Execute(ctx, "", api.Execution{Language: "python", Code: "print(6*7)"}); err != nil || res.Stdout != "42\n" {
		t.Fatalf("an execution on the service: %v, %+v", err, res)
	}
	ses, err := c.CreateSession(ctx, api.SessionSpec{})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := c.Execute(ctx, ses.ID, api.Execution{Language: "bash", Code: "echo kept > kept.txt"}); err != nil || res.Status != codecell.StatusSuccess {
		t.Fatalf("an execution in a session: %v, %+v", err, res)
	}
	pid := s.cmd.Process.Pid
	groups := cgroupsOf(t, pid)
	s.stop(t)
	check("codecell serve, stopped", pid)
	waitGone(t, "a cgroup of the stopped service", func() []string { return existing(groups) })

	mcp := d.command("mcp", "--state", d.state)
	in, err := mcp.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := mcp.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	mcp.Stderr = &stderr
	if err := mcp.Start(); err != nil {
		t.Fatal(err)
	}
	// Its answers, one a line, until it ends; then how it ended.
	lines, exited := make(chan string, 16), make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- mcp.Wait()
	}()
	t.Cleanup(func() { mcp.Process.Kill() })
	call := func(id int, request string) {
		t.Helper()
		fmt.Fprintln(in, request)
		if id == 0 {
			return
		}
		var line string
		select {
		case line = <-lines:
		case <-time.After(30 * time.Second):
		}
		if !strings.Contains(line, fmt.Sprintf(`"id":%d`, id)) || strings.Contains(line, `"isError":true`) {
			t.Fatalf("codecell mcp answered %q\n%s", line, stderr.String())
		}
	}
	call(1, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	call(0, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	call(2, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"execute","arguments":{"code":"print(6*7)"}}}`)
	call(3, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"execute","arguments":{"session":"s","code":"open('kept.txt', 'w').write('x')"}}}`)
	pid = mcp.Process.Pid
	groups = cgroupsOf(t, pid)
	in.Close()
	for range lines {
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("codecell mcp, its stdin closed: %v\n%s", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("codecell mcp did not end within 20s of its stdin closing\n%s", stderr.String())
	}
	check("codecell mcp, its stdin closed", pid)
	waitGone(t, "a cgroup of the ended MCP server", func() []string { return existing(groups) })

	// Killed: its sandbox's processes end with it (PR_SET_PDEATHSIG), and
	// what it cannot remove the next codecell process does.
	killed := d.command("run", "--tier", "native", writeFile(t, "slow.sh", "echo started\nsleep 60\n"))
	slow, err := killed.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := killed.Start(); err != nil {
		t.Fatal(err)
	}
	defer killed.Process.Kill()
	if line, err := bufio.NewReader(slow).ReadString('\n'); line != "started\n" {
		t.Fatalf("the program did not start: %q, %v", line, err)
	}
	pid = killed.Process.Pid
	own, children, groups := d.ownDirs(pid), processesOf(pid), cgroupsOf(t, pid)
	if len(own) == 0 || len(children) == 0 {
		t.Fatalf("the running codecell has directories %v and sandbox processes %v: this test no longer sees what it tests", own, children)
	}
	killed.Process.Kill()
	killed.Wait()
	waitGone(t, "a process of the killed run's sandbox", func() []string { return stillRunning(children) })
	if len(existing(own)) == 0 {
		t.Fatalf("the killed run's directories %v are already gone: nothing to test", own)
	}
	next := d.command("run", "--tier", "native", writeFile(t, "next.sh", "true\n"))
	if out, err := next.CombinedOutput(); err != nil {
		t.Fatalf("the next run: %v\n%s", err, out)
	}
	if still := existing(own); len(still) > 0 {
		t.Errorf("the next codecell process left the killed one's %v", still)
	}
	waitGone(t, "a cgroup of the killed run", func() []string { return existing(groups) })
	check("the next codecell run", next.Process.Pid)

	// The local tier runs a program in its workspace in place, on disk:
	// a killed run's workspace is in the process's own directory there,
	// which the next codecell process removes.
	killed = d.command("run", "--tier", "local", writeFile(t, "local.sh", "echo $$\nexec sleep 60\n"))
	slow, err = killed.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := killed.Start(); err != nil {
		t.Fatal(err)
	}
	defer killed.Process.Kill()
	line, err := bufio.NewReader(slow).ReadString('\n')
	program, perr := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || perr != nil {
		t.Fatalf("the local program did not start: %q, %v", line, err)
	}
	// The local tier's program is a plain process: no parent-death
	// signal ends it with codecell, so the test does.
	defer syscall.Kill(program, syscall.SIGKILL)
	workspaces, _ := filepath.Glob(filepath.Join(d.tmp, fmt.Sprintf("codecell-%d", os.Geteuid()), fmt.Sprintf("proc-%d-*", killed.Process.Pid), "codecell-ws-*"))
	if len(workspaces) != 1 {
		t.Fatalf("the local run's workspace is not in its process's directory on disk: %v; the temporary directory holds %v", workspaces, d.left())
	}
	killed.Process.Kill()
	killed.Wait()
	syscall.Kill(program, syscall.SIGKILL)
	if len(existing(workspaces)) == 0 {
		t.Fatalf("the killed local run's workspace %v is already gone: nothing to test", workspaces)
	}
	next = d.command("run", "--tier", "local", writeFile(t, "next-local.sh", "true\n"))
	if out, err := next.CombinedOutput(); err != nil {
		t.Fatalf("the next local run: %v\n%s", err, out)
	}
	if still := existing(workspaces); len(still) > 0 {
		t.Errorf("the next codecell process left the killed local run's workspace %v", still)
	}
	check("the next local run", next.Process.Pid)
}
