package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/api"
	"github.com/codecell-dev/codecell/client"
	"github.com/codecell-dev/codecell/internal/cgroup"
	"github.com/codecell-dev/codecell/internal/proc"
	"github.com/codecell-dev/codecell/internal/testenv"
	"github.com/codecell-dev/codecell/server"
	"github.com/codecell-dev/codecell/tier/native"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// served is a `codecell serve` process, a child of the test.
type served struct {
	cmd  *exec.Cmd
	base string // http://host:port

	mu     sync.Mutex
	stderr bytes.Buffer
	done   chan struct{} // closed when the process has exited
	err    error         // Wait's, after done
}

// log is what the server wrote on stderr so far.
func (s *served) log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stderr.String()
}

// startServed starts codecell serve with these flags (and a free loopback
// port), and waits until it says where it serves. It is stopped at the end
// of the test unless the test stopped it.
func startServed(t *testing.T, env []string, args ...string) *served {
	t.Helper()
	cmd := cliCommand(append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(cmd.Env, env...)
	// A group of its own, which stop can end whole.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &served{cmd: cmd, done: make(chan struct{})}
	t.Cleanup(func() { s.stop(t) })
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.stderr.WriteString(line + "\n")
			s.mu.Unlock()
			if u, ok := strings.CutPrefix(line, "codecell: serving the REST API at "); ok {
				select {
				case urls <- strings.TrimSuffix(u, "/v1"):
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, pipe)
		s.err = cmd.Wait()
		close(s.done)
	}()
	select {
	case s.base = <-urls:
	case <-s.done:
		t.Fatalf("codecell serve exited before serving: %v\n%s", s.err, s.log())
	case <-time.After(time.Minute):
		t.Fatalf("codecell serve did not say where it serves within a minute:\n%s", s.log())
	}
	return s
}

// stop ends the server with SIGTERM, and waits for it.
func (s *served) stop(t *testing.T) {
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(20 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
		t.Errorf("codecell serve did not stop on SIGTERM:\n%s", s.log())
	}
}

// The whole job over HTTP with a token from the configuration, on
// the real binary: a session, files in, Python that reads them and plots,
// the plot out; codecell run --remote; 429 past the maximum.
func TestServeREST(t *testing.T) {
	testenv.RequireNative(t, native.Default.Probe)
	cfg := writeFile(t, "codecell.json", `{"auth": {"tokens": ["cfg-token"]}, "server": {"max_running": 1, "max_sessions": 5}}`)
	s := startServed(t, nil, "--config", cfg, "--state", t.TempDir())
	ctx := deadlineCtx(t, 2*time.Minute)

	if _, err := client.New(s.base, "").Sessions(ctx); client.StatusOf(err) != http.StatusUnauthorized {
		t.Fatalf("without a token: %v", err)
	}
	c := client.New(s.base, "cfg-token")
	ses, err := c.CreateSession(ctx, api.SessionSpec{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Upload(ctx, ses.ID, "in/sales.csv", strings.NewReader("month,units\n1,5\n2,9\n3,4\n")); err != nil {
		t.Fatal(err)
	}
	res, err := c.Execute(ctx, ses.ID, api.Execution{Language: "python", Code: `
import csv, matplotlib.pyplot as plt
rows = list(csv.DictReader(open("in/sales.csv")))
plt.bar([r["month"] for r in rows], [int(r["units"]) for r in rows])
plt.savefig("out/sales.png") if __import__("os").makedirs("out", exist_ok=True) is None else None
sum(int(r["units"]) for r in rows)`})
	if err != nil || res.Status != codecell.StatusSuccess || string(res.Value) != "18" {
		t.Fatalf("the plot: %v %+v", err, res)
	}
	rc, err := c.Download(ctx, ses.ID, "out/sales.png")
	if err != nil {
		t.Fatal(err)
	}
	png, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Fatalf("the plot downloaded is not a PNG: %q", png[:min(16, len(png))])
	}

	// codecell run --remote, with the token from CODECELL_TOKEN.
	prog := writeFile(t, "remote.py", "import sys\nprint('hello from', sys.stdin.read().strip() or 'nowhere')\nprint('to stderr', file=sys.stderr)\nsys.exit(int(sys.argv[1]))\n")
	for _, c := range []struct {
		token string
		arg   string
		code  int
		out   string
	}{
		{"cfg-token", "0", 0, "hello from remote\n"},
		{"cfg-token", "3", 3, "hello from remote\n"},
		{"wrong", "0", exitInternal, ""},
	} {
		cmd := cliCommand("run", "--remote", s.base, prog, c.arg)
		cmd.Env = append(cmd.Env, "CODECELL_TOKEN="+c.token)
		cmd.Stdin = strings.NewReader("remote\n") // the program's standard input, sent along
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		if code != c.code || stdout.String() != c.out {
			t.Errorf("run --remote (token %s, exit %s): exit %d, stdout %q, stderr %q", c.token, c.arg, code, stdout.String(), stderr.String())
		}
		if c.code == exitInternal && !strings.Contains(stderr.String(), server.CodeUnauthorized) {
			t.Errorf("a wrong token does not say so: %q", stderr.String())
		}
		if c.code != exitInternal && !strings.Contains(stderr.String(), "to stderr") {
			t.Errorf("stderr did not pass through: %q", stderr.String())
		}
	}

	// MCP at /mcp on the same server shares the sessions, and a REST
	// session's policy holds for an MCP run in it.
	guarded, err := c.CreateSession(ctx, api.SessionSpec{Policy: &api.Policy{Guard: &codecell.GuardPolicy{AllowedImports: []string{"json"}}}})
	if err != nil {
		t.Fatal(err)
	}
	cs := connectHTTP(t, s.base+"/mcp", "cfg-token")
	for code, want := range map[string]codecell.Status{"import json\njson.dumps(1)": codecell.StatusSuccess, "import socket": codecell.StatusBlocked} {
		r, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "execute", Arguments: map[string]any{"code": code, "session": guarded.ID}})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(r.StructuredContent)
		var res codecell.Result
		if err := json.Unmarshal(b, &res); err != nil || res.Status != want {
			t.Errorf("MCP run %q in a REST session with a policy: %s, want %s (%v)", code, res.Status, want, err)
		}
	}

	// One execution runs at most (max_running 1): the next gets 429 at once.
	done := make(chan error, 1)
	go func() {
		_, err := c.Execute(ctx, "", api.Execution{Language: "bash", Code: "sleep 3"})
		done <- err
	}()
	waitHealth(t, c, 1)
	if _, err := c.Execute(ctx, "", api.Execution{Language: "bash", Code: "true"}); client.StatusOf(err) != http.StatusTooManyRequests {
		t.Fatalf("past max_running: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func waitHealth(t *testing.T, c *client.Client, running float64) {
	t.Helper()
	for i := 0; i < 1000; i++ {
		if h, err := c.Health(context.Background()); err == nil && h["running"] == running {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the execution did not start")
}

// A server killed with SIGKILL leaves no process; the next server started
// on the same state directory removes what it left: its instance
// directory (with the sessions' workspaces) and its sandboxes' cgroups. A
// server stopped with SIGTERM leaves nothing.
func TestServeRestartCleansUp(t *testing.T) {
	testenv.RequireNative(t, native.Default.Probe)
	state := t.TempDir()
	ctx := deadlineCtx(t, 2*time.Minute)
	first := startServed(t, nil, "--state", state, "--config", mcpConfig(t))
	c := client.New(first.base, "")
	ses, err := c.CreateSession(ctx, api.SessionSpec{})
	if err != nil {
		t.Fatal(err)
	}
	// An upstream MCP server, started by a tool call: a process of the
	// server's that is not a sandbox.
	if res, err := c.Execute(ctx, "", api.Execution{Language: "python", Code: "await call_tool('t.echo', {'text': 'up'})"}); err != nil || res.Status != codecell.StatusSuccess {
		t.Fatalf("calling the upstream tool: %v %+v", err, res)
	}
	if _, err := c.Upload(ctx, ses.ID, "kept.txt", strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	go c.Execute(ctx, ses.ID, api.Execution{Language: "bash", Code: "sleep 60 & sleep 60"})
	waitHealth(t, c, 1)
	pid := first.cmd.Process.Pid
	children := waitProcessesOf(t, pid)
	groups := cgroupsOf(t, pid)
	if len(children) == 0 {
		t.Fatal("the server has no sandbox processes to test with")
	}
	if cgroup.Detect().Version != 0 && len(groups) == 0 {
		t.Fatal("the server's sandboxes have no cgroups to test with")
	}
	insts, _ := filepath.Glob(filepath.Join(state, fmt.Sprintf("serve-%d-*", pid)))
	if len(insts) != 1 {
		t.Fatalf("the server's instance directory: %v", insts)
	}
	// Its runner directories, on /dev/shm where that is a tmpfs.
	shm, _ := filepath.Glob(fmt.Sprintf("/dev/shm/codecell-%d/serve-%d-*", os.Geteuid(), pid))
	t.Logf("killing the server: %d sandbox processes, %d cgroup directories, directories %v", len(children), len(groups), append(insts, shm...))
	first.cmd.Process.Kill()
	<-first.done

	// Its sandboxes died with it, and so did its upstream MCP server.
	waitGone(t, "a process of the killed server's sandboxes", func() []string { return stillRunning(children) })
	if _, err := os.Stat(insts[0]); err != nil {
		t.Fatalf("the killed server's instance directory is already gone (%v): nothing to test", err)
	}

	second := startServed(t, nil, "--state", state)
	if left := existing(append(insts, shm...)); len(left) > 0 {
		t.Errorf("the restarted server left the killed one's instance directories: %v", left)
	}
	waitGone(t, "a cgroup of the killed server", func() []string { return existing(groups) })
	c2 := client.New(second.base, "")
	if _, err := c2.Session(ctx, ses.ID); client.StatusOf(err) != http.StatusNotFound {
		t.Errorf("a session of the killed server: %v", err)
	}
	res, err := c2.Execute(ctx, "", api.Execution{Language: "python", Code: "'after'"})
	if err != nil || string(res.Value) != `"after"` {
		t.Fatalf("the restarted server: %v %+v", err, res)
	}

	// A clean stop leaves nothing of its own either.
	pid2 := second.cmd.Process.Pid
	children2 := processesOf(pid2)
	groups2 := cgroupsOf(t, pid2)
	insts2, _ := filepath.Glob(filepath.Join(state, fmt.Sprintf("serve-%d-*", pid2)))
	shm2, _ := filepath.Glob(fmt.Sprintf("/dev/shm/codecell-%d/serve-%d-*", os.Geteuid(), pid2))
	insts2 = append(insts2, shm2...)
	second.stop(t)
	waitGone(t, "a process of the stopped server's sandboxes", func() []string { return stillRunning(children2) })
	waitGone(t, "a cgroup of the stopped server", func() []string { return existing(groups2) })
	waitGone(t, "the stopped server's instance directory", func() []string { return existing(insts2) })
}

// processesOf are pid's living children: the inits of its sandboxes,
// which hold the rest of each sandbox in their pid namespaces, and its
// upstream MCP servers.
// waitProcessesOf waits until the server pid has a sandbox's process as a
// child: its program is under way.
func waitProcessesOf(t *testing.T, pid int) []proc.Process {
	t.Helper()
	for i := 0; i < 1000; i++ {
		if ps := processesOf(pid); len(ps) > 0 {
			return ps
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the server started no sandbox")
	return nil
}

func processesOf(pid int) []proc.Process {
	var out []proc.Process
	for _, p := range proc.List() {
		if p.PPID == pid && !p.Dead() {
			out = append(out, p)
		}
	}
	return out
}

// stillRunning lists those of ps that still run: the same processes (their
// start times tell them from later ones with their pids), not exited.
func stillRunning(ps []proc.Process) []string {
	var out []string
	for _, p := range ps {
		if now, ok := proc.Stat(p.PID); ok && !now.Dead() && now.Start == p.Start {
			out = append(out, strconv.Itoa(p.PID)+" "+proc.Cmdline(p.PID))
		}
	}
	return out
}

// cgroupsOf are the sandbox cgroups whose owner is pid (see
// cgroup.OwnedID: "<pidns>-<pid>-<start>-<random>", in hex).
func cgroupsOf(t *testing.T, pid int) []string {
	h := cgroup.Detect()
	var out []string
	for _, parent := range h.Parents() {
		entries, _ := os.ReadDir(parent)
		for _, e := range entries {
			f := strings.Split(e.Name(), "-")
			if e.IsDir() && len(f) == 4 && f[1] == strconv.FormatInt(int64(pid), 16) {
				out = append(out, filepath.Join(parent, e.Name()))
			}
		}
	}
	return out
}

func existing(paths []string) []string {
	var out []string
	for _, p := range paths {
		if _, err := os.Lstat(p); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// waitGone waits up to 10 seconds for list to be empty.
func waitGone(t *testing.T, what string, list func() []string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := list()
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%s is left: %v", what, left)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// SIGTERM lets running executions go on for the grace period, then ends
// them: their clients get 503 SERVER_STOPPING, and the server leaves
// nothing behind.
func TestServeStopEndsRunning(t *testing.T) {
	testenv.RequireNative(t, native.Default.Probe)
	state := t.TempDir()
	s := startServed(t, nil, "--state", state, "--grace", "1s")
	c := client.New(s.base, "")
	ctx := deadlineCtx(t, time.Minute)
	errc := make(chan error, 1)
	go func() {
		_, err := c.Execute(ctx, "", api.Execution{Language: "bash", Code: "sleep 60"})
		errc <- err
	}()
	waitHealth(t, c, 1)
	pid := s.cmd.Process.Pid
	children := waitProcessesOf(t, pid)
	groups := cgroupsOf(t, pid)
	start := time.Now()
	s.stop(t)
	if d := time.Since(start); d > 8*time.Second {
		t.Errorf("the server took %v to stop with a grace of 1s", d)
	}
	if err := <-errc; client.StatusOf(err) != http.StatusServiceUnavailable || client.CodeOf(err) != server.CodeStopping {
		t.Errorf("the running execution: %v", err)
	}
	waitGone(t, "a process of the stopped server", func() []string { return stillRunning(children) })
	waitGone(t, "a cgroup of the stopped server", func() []string { return existing(groups) })
	if entries, _ := os.ReadDir(state); len(entries) != 0 {
		t.Errorf("the state directory holds %v", entries)
	}
}

// A client in another language: examples/rest_client.py, plain Python with
// the standard library, does the whole job against the real server.
func TestServePythonClient(t *testing.T) {
	testenv.RequireNative(t, native.Default.Probe)
	s := startServed(t, []string{"CODECELL_TOKENS=py-token"}, "--state", t.TempDir())
	out := t.TempDir()
	cmd := exec.Command("/usr/bin/python3", "../../examples/rest_client.py", s.base, "py-token", out)
	got, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("examples/rest_client.py: %v\n%s", err, got)
	}
	for _, want := range []string{`status success value {"months": 4, "units": 30}`, "png", "streamed status success", "deleted"} {
		if !strings.Contains(string(got), want) {
			t.Errorf("the client's output lacks %q:\n%s", want, got)
		}
	}
	if png, err := os.ReadFile(filepath.Join(out, "sales.png")); err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Errorf("the downloaded plot: %v", err)
	}
}

// codecell run killed in the middle of a program leaves its workspace
// directory (on /dev/shm) behind; the next codecell run removes it.
func TestRunKilledIsSweptByTheNext(t *testing.T) {
	testenv.RequireNative(t, native.Default.Probe)
	prog := writeFile(t, "slow.sh", "sleep 30\n")
	cmd := cliCommand("run", prog)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	pattern := fmt.Sprintf("/dev/shm/codecell-%d/proc-%d-*/codecell-ws-*", os.Geteuid(), cmd.Process.Pid)
	if _, err := os.Stat("/dev/shm"); err != nil {
		t.Skip("no /dev/shm here")
	}
	var ws []string
	for i := 0; i < 500 && len(ws) == 0; i++ {
		ws, _ = filepath.Glob(pattern)
		time.Sleep(20 * time.Millisecond)
	}
	if len(ws) == 0 {
		t.Fatalf("no workspace directory matches %s", pattern)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if _, err := os.Stat(ws[0]); err != nil {
		t.Fatalf("the killed run's directory is already gone (%v): nothing to test", err)
	}
	next := cliCommand("run", writeFile(t, "quick.sh", "true\n"))
	if out, err := next.CombinedOutput(); err != nil {
		t.Fatalf("the next run: %v\n%s", err, out)
	}
	if left := existing([]string{filepath.Dir(ws[0])}); len(left) > 0 {
		t.Fatalf("the next run left the killed one's directory: %v", left)
	}
}
