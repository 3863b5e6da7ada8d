//go:build linux

package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/codecell-dev/codecell/internal/proc"
	"golang.org/x/sys/unix"
)

// Most tests below use the real cgroup filesystem of the machine they run on
// (they need root and cgroup v1, and skip otherwise, saying why). The limits
// are tested by what the kernel does to a child process: the test binary
// re-executes itself (as os/exec's tests do), TestMain catches the marker in
// the environment, and the child blocks reading stdin until the test has
// put it in a group. Every child is bounded in processes (50), memory
// (512 MiB) and time, so a broken cgroup fails a test rather than hurting the
// machine.
//
// The v2 logic is tested against a fake cgroupfs in a temporary directory
// (fakeV2 below), since the machine these tests were written on mounts
// cgroup v2 with no controllers.

const (
	childEnv = "CODECELL_CGROUP_TEST_CHILD" // child mode: pids, memory or spawn
	sleepEnv = "CODECELL_CGROUP_TEST_SLEEP" // path of sleep(1) for the pids mode
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(child(mode))
	}
	made := parentsToRemove()
	code := m.Run()
	for _, dir := range made {
		unix.Rmdir(dir) // only succeeds when empty: never removes another user's groups
	}
	os.Exit(code)
}

// parentsToRemove lists the "codecell" parents that Detect may create and
// that do not exist yet, so that the tests leave none behind.
func parentsToRemove() []string {
	lay, err := locate(hostSystem())
	if err != nil {
		return nil
	}
	var dirs []string
	for _, d := range lay.v1 {
		dirs = append(dirs, filepath.Join(d, parentName))
	}
	if lay.v2Mount != "" {
		dirs = append(dirs, filepath.Join(lay.v2Mount, parentName), filepath.Join(lay.v2Own, parentName))
	}
	return slices.DeleteFunc(dirs, exists)
}

// child is the re-executed test binary.
func child(mode string) int {
	if mode == "pids" {
		warmThreads()
	}
	// Block until the test has put this process in its group.
	in := bufio.NewReader(os.Stdin)
	if _, err := in.ReadString('\n'); err != nil {
		return 2
	}
	switch mode {
	case "pids":
		return forkMany(in)
	case "memory":
		return allocate()
	case "spawn":
		return spawn(in)
	}
	fmt.Fprintf(os.Stderr, "unknown child mode %q\n", mode)
	return 2
}

// warmThreads makes the Go runtime start a few threads now, by blocking
// several goroutines in a syscall at once. The runtime reuses idle threads
// before making new ones, and a thread it fails to make once the pids limit
// is reached would be fatal to the child.
func warmThreads() {
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { unix.Nanosleep(&unix.Timespec{Nsec: 50e6}, nil) })
	}
	wg.Wait()
}

// forkMany tries to start 50 sleep(1) processes and reports each success,
// then the count and the first error; it exits when stdin closes.
func forkMany(in io.Reader) int {
	sleep := os.Getenv(sleepEnv)
	started := 0
	var firstErr error
	for range 50 {
		pid, err := syscall.ForkExec(sleep, []string{"sleep", "5"}, &syscall.ProcAttr{})
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		started++
		fmt.Printf("started %d\n", pid)
	}
	fmt.Printf("done %d %v\n", started, firstErr)
	io.Copy(io.Discard, in)
	return 0
}

// allocate maps and touches memory in 8 MiB steps up to 512 MiB, reporting
// the total after each step.
func allocate() int {
	const step = 8 << 20
	page := os.Getpagesize()
	for total := step; total <= 512<<20; total += step {
		b, err := unix.Mmap(-1, 0, step, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			fmt.Printf("mmap: %v\n", err)
			return 3
		}
		for i := 0; i < len(b); i += page {
			b[i] = 1
		}
		fmt.Printf("%d\n", total>>20)
	}
	return 0
}

// spawn starts three sleep(1) processes that the test must see killed: a
// plain child, one in a new session (setsid), and an orphan whose parent
// shell exits at once. It reports their pids and waits until killed.
func spawn(in io.Reader) int {
	plain := exec.Command("sleep", "99")
	session := exec.Command("sleep", "99")
	session.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	var pids []int
	for _, c := range []*exec.Cmd{plain, session} {
		if err := c.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 3
		}
		pids = append(pids, c.Process.Pid)
	}
	out, err := exec.Command("sh", "-c", "sleep 99 </dev/null >/dev/null 2>&1 & echo $!").Output()
	orphan, perr := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil || perr != nil {
		fmt.Fprintln(os.Stderr, "orphan:", err, perr)
		return 3
	}
	pids = append(pids, orphan)
	for _, pid := range pids {
		fmt.Printf("pid %d\n", pid)
	}
	fmt.Println("ready")
	io.Copy(io.Discard, in)
	return 0
}

// childProc is a running child; its output arrives line by line.
type childProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string // closed at EOF
	stderr strings.Builder

	waitOnce sync.Once
	waitErr  error
}

func startChild(t *testing.T, mode string) *childProc {
	t.Helper()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep(1):", err)
	}
	c := &childProc{lines: make(chan string, 128)}
	c.cmd = exec.Command(os.Args[0])
	c.cmd.Env = append(os.Environ(), childEnv+"="+mode, sleepEnv+"="+sleep)
	c.cmd.Stderr = &syncWriter{b: &c.stderr}
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		c.cmd.Process.Kill()
		c.wait()
	})
	return c
}

// release lets the child go on once it is in its group.
func (c *childProc) release(t *testing.T) {
	t.Helper()
	if _, err := io.WriteString(c.stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
}

// next returns the next line, or "", false at EOF or after the timeout.
func (c *childProc) next(timeout time.Duration) (string, bool) {
	select {
	case l, ok := <-c.lines:
		return l, ok
	case <-time.After(timeout):
		return "", false
	}
}

func (c *childProc) wait() error {
	c.waitOnce.Do(func() {
		c.stdin.Close()
		c.waitErr = c.cmd.Wait()
	})
	return c.waitErr
}

type syncWriter struct {
	mu sync.Mutex
	b  *strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (c *childProc) errors() string {
	w := c.cmd.Stderr.(*syncWriter)
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// killedBy reports the signal that ended a child, or 0.
func killedBy(err error) syscall.Signal {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return ws.Signal()
		}
	}
	return 0
}

// v1Host returns the real host when it has usable cgroup v1 and this test
// runs as root, and skips the test otherwise.
func v1Host(t *testing.T) *Host {
	t.Helper()
	h := Detect()
	t.Logf("Detect: version %d, controllers %v, reason %q", h.Version, h.Controllers, h.Reason)
	if os.Geteuid() != 0 {
		t.Skip("needs root to create cgroups")
	}
	if h.Version != 1 {
		t.Skipf("needs usable cgroup v1; Detect gave version %d: %s", h.Version, h.Reason)
	}
	return h
}

func newGroup(t *testing.T, h *Host, lim Limits) *Group {
	t.Helper()
	g, err := h.New(fmt.Sprintf("%016x", rand.Uint64()), lim)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.Destroy(); err != nil {
			t.Error(err)
		}
	})
	return g
}

func readString(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

func TestDetectHost(t *testing.T) {
	h := v1Host(t)
	for _, c := range []string{"memory", "pids"} {
		if !slices.Contains(h.Controllers, c) {
			t.Errorf("controllers %v lack %s", h.Controllers, c)
		}
	}
	for c, dir := range h.v1Parents {
		t.Logf("v1 %s: %s", c, dir)
	}
	if h.v1Parents["memory"] == "" || h.v1Parents["pids"] == "" {
		t.Errorf("no memory or pids parent: %v", h.v1Parents)
	}
}

// The child tries to start 50 processes in a group limited to 20 tasks. The
// kernel counts threads as tasks, so the Go child's own threads use some of
// the 20.
func TestProcessLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes against a real limit")
	}
	h := v1Host(t)
	g := newGroup(t, h, Limits{Memory: 64 << 20, Processes: 20})
	c := startChild(t, "pids")
	if err := g.Add(c.cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	c.release(t)

	started, done := 0, ""
	for done == "" {
		line, ok := c.next(30 * time.Second)
		if !ok {
			t.Fatalf("the child stopped reporting after %d processes (%v); stderr:\n%s", started, c.wait(), c.errors())
		}
		switch {
		case strings.HasPrefix(line, "started "):
			started++
		case strings.HasPrefix(line, "done "):
			done = line
		}
	}
	t.Logf("child: %s", done)
	if started >= 20 {
		t.Errorf("%d of 50 processes started under pids.max 20", started)
	}
	if started == 0 {
		t.Errorf("no process started: the test cannot tell a limit from a failure (%s)", done)
	}
	if !strings.Contains(done, syscall.EAGAIN.Error()) {
		t.Errorf("fork did not fail with EAGAIN: %s", done)
	}
	dir := g.dirs["pids"]
	cur := readString(t, filepath.Join(dir, "pids.current"))
	events := readString(t, filepath.Join(dir, "pids.events"))
	t.Logf("pids.current %s, pids.events %q", cur, events)
	if n, _ := strconv.Atoi(cur); n > 20 {
		t.Errorf("pids.current %d > 20", n)
	}
	if events == "max 0" {
		t.Error("pids.events counts no refused fork")
	}
}

// The child touches memory in 8 MiB steps; the kernel must kill it near
// 64 MiB, and count the kill.
func TestMemoryLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates memory against a real limit")
	}
	h := v1Host(t)
	g := newGroup(t, h, Limits{Memory: 64 << 20, Processes: 20})
	c := startChild(t, "memory")
	if err := g.Add(c.cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	before := g.MemoryUsage() // opens the usage file MemoryUsage keeps
	c.release(t)

	last := ""
	var during int64
	for {
		line, ok := c.next(60 * time.Second)
		if !ok {
			break
		}
		if mib, _ := strconv.Atoi(line); mib == 32 {
			// The child has touched 32 MiB and waits for nothing: the
			// kept file must say so, read again from its start.
			during = g.MemoryUsage()
		}
		last = line
	}
	if during < 24<<20 || during <= before {
		t.Errorf("MemoryUsage said %d bytes before the child allocated and %d once it had 32 MiB", before, during)
	}
	err := c.wait()
	t.Logf("last report %q MiB, exit %v", last, err)
	if sig := killedBy(err); sig != syscall.SIGKILL {
		t.Fatalf("child not killed by SIGKILL (exit %v, last report %q MiB); stderr:\n%s", err, last, c.errors())
	}
	if mib, _ := strconv.Atoi(last); mib >= 512 {
		t.Errorf("child reached %d MiB under a 64 MiB limit", mib)
	}
	if n := g.OOMKills(); n < 1 {
		t.Errorf("OOMKills = %d after an OOM kill", n)
	}
	t.Logf("memory.max_usage_in_bytes %s", readString(t, filepath.Join(g.dirs["memory"], "memory.max_usage_in_bytes")))
	if err := g.Destroy(); err != nil {
		t.Fatal(err)
	}
	if u := g.MemoryUsage(); u != 0 {
		t.Errorf("MemoryUsage of a destroyed group = %d", u)
	}
}

// alive reports whether pid is a live (not zombie) "sleep 99" of spawn.
func alive(pid int) bool {
	if p, ok := proc.Stat(pid); !ok || p.Dead() {
		return false
	}
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return string(cmdline) == "sleep\x0099\x00"
}

func TestKillAndDestroy(t *testing.T) {
	h := v1Host(t)
	noFreezer := *h
	noFreezer.v1Parents = map[string]string{}
	for c, dir := range h.v1Parents {
		if c != "freezer" {
			noFreezer.v1Parents[c] = dir
		}
	}
	for _, tc := range []struct {
		name string
		host *Host
	}{{"freezer", h}, {"no freezer", &noFreezer}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "freezer" && h.v1Parents["freezer"] == "" {
				t.Skip("no v1 freezer mounted")
			}
			g := newGroup(t, tc.host, Limits{Memory: 256 << 20, Processes: 64})
			c := startChild(t, "spawn")
			if err := g.Add(c.cmd.Process.Pid); err != nil {
				t.Fatal(err)
			}
			c.release(t)
			var pids []int
			// Should Kill fail, end the sleeps anyway; the command line
			// check keeps a reused pid safe.
			t.Cleanup(func() {
				for _, pid := range pids {
					if alive(pid) {
						unix.Kill(pid, unix.SIGKILL)
					}
				}
			})
			for {
				line, ok := c.next(30 * time.Second)
				if !ok {
					t.Fatalf("child did not get ready (%v); stderr:\n%s", c.wait(), c.errors())
				}
				if line == "ready" {
					break
				}
				if p, ok := strings.CutPrefix(line, "pid "); ok {
					pid, _ := strconv.Atoi(p)
					pids = append(pids, pid)
				}
			}
			in := g.procs()
			for _, pid := range append([]int{c.cmd.Process.Pid}, pids...) {
				if !slices.Contains(in, pid) {
					t.Errorf("process %d is not in the group (cgroup.procs %v)", pid, in)
				}
			}

			start := time.Now()
			if err := g.Kill(); err != nil {
				t.Fatal(err)
			}
			t.Logf("Kill took %v for %d processes", time.Since(start), len(in))
			if left := g.procs(); len(left) > 0 {
				t.Errorf("processes left after Kill: %v", left)
			}
			for _, pid := range pids {
				if alive(pid) {
					t.Errorf("sleep %d survived Kill", pid)
				}
			}
			if sig := killedBy(c.wait()); sig != syscall.SIGKILL {
				t.Errorf("child ended by %v, not SIGKILL", c.wait())
			}

			paths := slices.Clone(g.paths)
			if err := g.Destroy(); err != nil {
				t.Fatal(err)
			}
			for _, dir := range paths {
				if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s still there after Destroy (%v)", dir, err)
				}
			}
			if err := g.Destroy(); err != nil {
				t.Errorf("second Destroy: %v", err)
			}
			if err := g.Add(os.Getpid()); err == nil {
				t.Error("Add after Destroy succeeded")
			}
		})
	}
}

// Destroy kills processes that are still in the group.
func TestDestroyKills(t *testing.T) {
	h := v1Host(t)
	g, err := h.New(fmt.Sprintf("%016x", rand.Uint64()), Limits{Processes: 8})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "99")
	if err := cmd.Start(); err != nil {
		g.Destroy()
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	if err := g.Add(cmd.Process.Pid); err != nil {
		g.Destroy()
		t.Fatal(err)
	}
	if err := g.Destroy(); err != nil {
		t.Fatal(err)
	}
	if sig := killedBy(cmd.Wait()); sig != syscall.SIGKILL {
		t.Errorf("sleep ended by %v, not SIGKILL", sig)
	}
}

func TestSetLimits(t *testing.T) {
	h := v1Host(t)
	g := newGroup(t, h, Limits{Memory: 64 << 20, Processes: 20, CPU: 0.5})
	mem, pids, cpu := g.dirs["memory"], g.dirs["pids"], g.dirs["cpu"]
	const unlimited = "9223372036854771712" // PAGE_COUNTER_MAX pages, in bytes, with 4 KiB pages

	check := func(memory, procs, quota string) {
		t.Helper()
		if got := readString(t, filepath.Join(mem, "memory.limit_in_bytes")); got != memory && !(memory == "max" && len(got) >= 18) {
			t.Errorf("memory.limit_in_bytes = %s, want %s", got, memory)
		}
		if h.swap {
			lim := readString(t, filepath.Join(mem, "memory.limit_in_bytes"))
			if got := readString(t, filepath.Join(mem, "memory.memsw.limit_in_bytes")); got != lim {
				t.Errorf("memory.memsw.limit_in_bytes = %s, want %s", got, lim)
			}
		}
		if got := readString(t, filepath.Join(pids, "pids.max")); got != procs {
			t.Errorf("pids.max = %s, want %s", got, procs)
		}
		if cpu != "" {
			if got := readString(t, filepath.Join(cpu, "cpu.cfs_quota_us")); got != quota {
				t.Errorf("cpu.cfs_quota_us = %s, want %s", got, quota)
			}
		}
	}
	check("67108864", "20", "50000")

	// Raising and lowering each need their own order of the memory and
	// memsw writes; the kernel refuses the other order.
	steps := []struct {
		lim                  Limits
		memory, procs, quota string
		describe             string
	}{
		{Limits{Memory: 256 << 20, Processes: 50, CPU: 2}, "268435456", "50", "200000", "memory, pids, cpu"},
		{Limits{Memory: 32 << 20, Processes: 10}, "33554432", "10", "-1", "memory, pids"},
		{Limits{}, unlimited, "max", "-1", "no limits"},
		{Limits{Memory: 48 << 20, Processes: 5, CPU: 0.001}, "50331648", "5", "1000", "memory, pids, cpu"},
	}
	for _, s := range steps {
		if err := g.SetLimits(s.lim); err != nil {
			t.Fatalf("SetLimits(%+v): %v", s.lim, err)
		}
		check(s.memory, s.procs, s.quota)
		if cpu == "" {
			s.describe = strings.TrimSuffix(s.describe, ", cpu")
		}
		if got, want := g.Describe(), "cgroup v1 ("+s.describe+")"; got != want {
			t.Errorf("Describe() = %q, want %q", got, want)
		}
	}
	if err := g.SetLimits(Limits{Memory: -1}); err == nil {
		t.Error("SetLimits accepted a negative memory limit")
	}
	if got := readString(t, filepath.Join(mem, "memory.oom_control")); !strings.Contains(got, "oom_kill_disable 0") {
		t.Errorf("memory.oom_control: %q", got)
	}
	if fd, ok := g.FD(); ok || fd != -1 {
		t.Errorf("FD() = %d, %v on v1", fd, ok)
	}
}

// New makes a missing parent again. The test uses parents of its own,
// never the shared "codecell" ones, which other processes may be using.
func TestNewRecreatesParent(t *testing.T) {
	h := v1Host(t)
	own := *h
	own.v1Parents = map[string]string{}
	var parents []string
	for c, dir := range h.v1Parents {
		p := filepath.Join(filepath.Dir(dir), fmt.Sprintf("codecell-test-%016x", rand.Uint64()))
		own.v1Parents[c] = p
		parents = append(parents, p)
	}
	t.Cleanup(func() {
		for _, p := range parents {
			unix.Rmdir(p)
		}
	})
	g := newGroup(t, &own, Limits{Memory: 32 << 20, Processes: 8})
	for c, dir := range g.dirs {
		if !exists(filepath.Join(dir, "cgroup.procs")) {
			t.Errorf("%s group %s is not a cgroup", c, dir)
		}
	}
	if err := g.Destroy(); err != nil {
		t.Fatal(err)
	}
	for _, p := range parents {
		if err := unix.Rmdir(p); err != nil {
			t.Errorf("rmdir %s: %v", p, err)
		}
	}
}

func TestNewRefuses(t *testing.T) {
	h := v1Host(t)
	for _, id := range []string{"", "../x", "ABC", "a/b", strings.Repeat("a", 65)} {
		if g, err := h.New(id, Limits{}); err == nil {
			g.Destroy()
			t.Errorf("New(%q) succeeded", id)
		}
	}
	for _, lim := range []Limits{{Memory: -1}, {Processes: -1}, {CPU: -1}, {CPU: 1e9}} {
		if g, err := h.New("abc", lim); err == nil {
			g.Destroy()
			t.Errorf("New with %+v succeeded", lim)
		}
	}
	if _, err := (&Host{Reason: "none here"}).New("abc", Limits{}); err == nil || !strings.Contains(err.Error(), "none here") {
		t.Errorf("New on an unusable host: %v", err)
	}
}

// --- Detection and cgroup v2 against a fake cgroupfs ---

// fakePid is this "process" on the fake: above the kernel's PID_MAX_LIMIT
// (4194304), so that no code path can ever signal a real process.
const fakePid = 1 << 30

// fakeV2 is a directory tree shaped like a cgroup2 mount, with mkdir, write
// and rmdir functions that apply the kernel rules the v2 code depends on:
//
//   - mkdir creates the core control files, and those of each controller
//     enabled in the parent's cgroup.subtree_control;
//   - writing to a control file that does not exist fails (ENOENT);
//   - cgroup.subtree_control takes "+ctrl" only for a controller in the
//     cgroup's cgroup.controllers, and refuses with EBUSY in a non-root
//     cgroup that has processes ("no internal processes");
//   - a pid written to cgroup.procs leaves every other cgroup.procs;
//   - "1" written to cgroup.kill empties cgroup.procs;
//   - rmdir refuses with EBUSY while cgroup.procs lists a process.
//
// It records every write. What this proves: which files the v2 code writes,
// with which values and in which order, how it handles subtree_control and
// the no-internal-processes refusal, and what it reports. What it does not
// prove: that a real kernel accepts these writes, has these files, or
// enforces anything — the fake is this package's reading of the kernel's
// documentation (Documentation/admin-guide/cgroup-v2.rst), and nothing here
// runs against a real cgroup v2 with controllers.
type fakeV2 struct {
	root string
	swap bool // the kernel has swap, so memory.swap.max exists

	mu     sync.Mutex
	writes []string // "path=value", path relative to root
}

func (f *fakeV2) rel(path string) string {
	r, _ := filepath.Rel(f.root, path)
	return r
}

func (f *fakeV2) mkdir(path string) error {
	if err := os.Mkdir(path, 0o755); err != nil {
		return err
	}
	ctrls := readTokens(filepath.Join(filepath.Dir(path), "cgroup.subtree_control"))
	files := map[string]string{
		"cgroup.procs":           "",
		"cgroup.controllers":     strings.Join(ctrls, " "),
		"cgroup.subtree_control": "",
		"cgroup.kill":            "",
		"cgroup.freeze":          "0",
		"cgroup.events":          "populated 0\nfrozen 0\n",
	}
	for _, c := range ctrls {
		switch c {
		case "memory":
			files["memory.max"] = "max"
			files["memory.events"] = "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n"
			if f.swap {
				files["memory.swap.max"] = "max"
			}
		case "pids":
			files["pids.max"] = "max"
		case "cpu":
			files["cpu.max"] = "max 100000"
		}
	}
	for name, v := range files {
		if err := os.WriteFile(filepath.Join(path, name), []byte(v), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func (f *fakeV2) write(path, value string) error {
	f.mu.Lock()
	f.writes = append(f.writes, f.rel(path)+"="+value)
	f.mu.Unlock()
	fail := func(err error) error { return &os.PathError{Op: "write", Path: path, Err: err} }
	if !exists(path) {
		return fail(unix.ENOENT)
	}
	dir := filepath.Dir(path)
	switch filepath.Base(path) {
	case "cgroup.subtree_control":
		if dir != f.root && len(readPids(filepath.Join(dir, "cgroup.procs"))) > 0 {
			return fail(unix.EBUSY)
		}
		on := readTokens(path)
		for _, tok := range strings.Fields(value) {
			c := tok[1:]
			if !slices.Contains(readTokens(filepath.Join(dir, "cgroup.controllers")), c) {
				return fail(unix.ENOENT)
			}
			if tok[0] == '+' && !slices.Contains(on, c) {
				on = append(on, c)
			}
		}
		return os.WriteFile(path, []byte(strings.Join(on, " ")), 0o644)
	case "cgroup.procs":
		pid, err := strconv.Atoi(value)
		if err != nil {
			return fail(unix.EINVAL)
		}
		filepath.WalkDir(f.root, func(p string, _ os.DirEntry, _ error) error {
			if filepath.Base(p) == "cgroup.procs" {
				pids := slices.DeleteFunc(readPids(p), func(q int) bool { return q == pid })
				if p == path {
					pids = append(pids, pid)
				}
				os.WriteFile(p, []byte(joinInts(pids)), 0o644)
			}
			return nil
		})
		return nil
	case "cgroup.kill":
		return os.WriteFile(filepath.Join(dir, "cgroup.procs"), nil, 0o644)
	}
	return os.WriteFile(path, []byte(value), 0o644)
}

func (f *fakeV2) rmdir(path string) error {
	if len(readPids(filepath.Join(path, "cgroup.procs"))) > 0 {
		return &os.PathError{Op: "rmdir", Path: path, Err: unix.EBUSY}
	}
	return os.RemoveAll(path)
}

func (f *fakeV2) takeWrites() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := f.writes
	f.writes = nil
	return w
}

func joinInts(ns []int) string {
	var b strings.Builder
	for _, n := range ns {
		fmt.Fprintf(&b, "%d\n", n)
	}
	return b.String()
}

// fakeHost is a host whose only cgroup mount is the fake v2 at root, this
// process (fakePid) sitting in /user.slice/app.scope with the processes
// others, and whose root offers the controllers rootCtrls.
type fakeHost struct {
	euid      int
	rootCtrls string // the root's cgroup.controllers
	rootOn    string // the root's cgroup.subtree_control before Detect
	others    []int  // other processes in this process's cgroup
	swap      bool
}

func (fh fakeHost) detect(t *testing.T) (*Host, *fakeV2) {
	t.Helper()
	tmp := t.TempDir()
	f := &fakeV2{root: filepath.Join(tmp, "cg root"), swap: fh.swap} // a space, to exercise mountinfo's escapes
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Mkdir(f.root, 0o755))
	for name, v := range map[string]string{
		"cgroup.controllers":     fh.rootCtrls,
		"cgroup.subtree_control": fh.rootOn,
		"cgroup.procs":           "1\n",
	} {
		must(os.WriteFile(filepath.Join(f.root, name), []byte(v), 0o644))
	}
	// The path to this process's cgroup, as systemd would have made it:
	// the controllers on at the root are on down to it.
	slice := filepath.Join(f.root, "user.slice")
	must(f.mkdir(slice))
	must(os.WriteFile(filepath.Join(slice, "cgroup.subtree_control"), []byte(fh.rootOn), 0o644))
	own := filepath.Join(slice, "app.scope")
	must(f.mkdir(own))
	must(os.WriteFile(filepath.Join(own, "cgroup.procs"), []byte(joinInts(append([]int{fakePid}, fh.others...))), 0o644))

	mountinfo := filepath.Join(tmp, "mountinfo")
	must(os.WriteFile(mountinfo, []byte(strings.Join([]string{
		"22 1 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw",
		"23 1 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:2 - sysfs sysfs rw",
		"30 23 0:27 / " + strings.ReplaceAll(f.root, " ", `\040`) + " rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot",
	}, "\n")+"\n"), 0o644))
	selfCgroup := filepath.Join(tmp, "cgroup")
	must(os.WriteFile(selfCgroup, []byte("0::/user.slice/app.scope\n"), 0o644))

	h := detect(&system{
		mountinfo:  mountinfo,
		selfCgroup: selfCgroup,
		euid:       fh.euid,
		pid:        fakePid,
		write:      f.write,
		mkdir:      f.mkdir,
		rmdir:      f.rmdir,
	})
	t.Logf("Detect: version %d, controllers %v, reason %q", h.Version, h.Controllers, h.Reason)
	return h, f
}

func TestV2FakeRoot(t *testing.T) {
	h, f := fakeHost{euid: 0, rootCtrls: "cpuset cpu io memory pids", rootOn: "memory", swap: true}.detect(t)
	if h.Version != 2 || !slices.Equal(h.Controllers, []string{"memory", "pids", "cpu"}) || h.Reason != "" {
		t.Fatalf("Detect: version %d, controllers %v, reason %q", h.Version, h.Controllers, h.Reason)
	}
	if want := filepath.Join(f.root, "codecell"); h.v2Parent != want {
		t.Errorf("parent %s, want %s", h.v2Parent, want)
	}
	// memory is already on at the root; the rest is enabled one by one.
	wantWrites(t, f, []string{
		"cgroup.subtree_control=+pids",
		"cgroup.subtree_control=+cpu",
		"codecell/cgroup.subtree_control=+memory",
		"codecell/cgroup.subtree_control=+pids",
		"codecell/cgroup.subtree_control=+cpu",
	})

	g, err := h.New("ab12", Limits{Memory: 64 << 20, Processes: 20, CPU: 1.5})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Destroy() })
	wantWrites(t, f, []string{
		"codecell/ab12/memory.swap.max=0",
		"codecell/ab12/memory.max=67108864",
		"codecell/ab12/pids.max=20",
		"codecell/ab12/cpu.max=150000 100000",
	})
	if got := g.Describe(); got != "cgroup v2 (memory, pids, cpu)" {
		t.Errorf("Describe() = %q", got)
	}

	fd, ok := g.FD()
	if !ok {
		t.Fatal("FD() not ok on v2")
	}
	var st, want unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(filepath.Join(f.root, "codecell", "ab12"), &want); err != nil {
		t.Fatal(err)
	}
	if st.Ino != want.Ino || st.Dev != want.Dev {
		t.Error("FD() is not the group's directory")
	}

	if err := g.Add(fakePid + 7); err != nil {
		t.Fatal(err)
	}
	wantWrites(t, f, []string{"codecell/ab12/cgroup.procs=1073741831"})

	if err := g.SetLimits(Limits{}); err != nil {
		t.Fatal(err)
	}
	wantWrites(t, f, []string{
		"codecell/ab12/memory.swap.max=0",
		"codecell/ab12/memory.max=max",
		"codecell/ab12/pids.max=max",
		"codecell/ab12/cpu.max=max 100000",
	})
	if got := g.Describe(); got != "cgroup v2 (no limits)" {
		t.Errorf("Describe() = %q", got)
	}

	os.WriteFile(filepath.Join(f.root, "codecell", "ab12", "memory.events"), []byte("low 0\nhigh 0\nmax 9\noom 3\noom_kill 2\n"), 0o644)
	if n := g.OOMKills(); n != 2 {
		t.Errorf("OOMKills() = %d, want 2", n)
	}

	if err := g.Destroy(); err != nil {
		t.Fatal(err)
	}
	wantWrites(t, f, []string{"codecell/ab12/cgroup.kill=1"})
	if exists(filepath.Join(f.root, "codecell", "ab12")) {
		t.Error("group directory left after Destroy")
	}
	if _, ok := g.FD(); ok {
		t.Error("FD() still ok after Destroy")
	}
}

// An unprivileged process that shares its cgroup with others cannot give
// controllers to children of it, and must not move anyone.
func TestV2FakeNotDelegated(t *testing.T) {
	h, f := fakeHost{euid: 1000, rootCtrls: "cpu memory pids", rootOn: "cpu memory pids", others: []int{fakePid + 1}, swap: true}.detect(t)
	if h.Version != 0 {
		t.Fatalf("version %d, want 0", h.Version)
	}
	if !strings.HasPrefix(h.Reason, "cgroup v2 (") || !strings.Contains(h.Reason, delegationHint) || !strings.Contains(h.Reason, "holds other processes") {
		t.Errorf("Reason %q", h.Reason)
	}
	wantWrites(t, f, []string{"user.slice/app.scope/cgroup.subtree_control=+memory"})
	if exists(filepath.Join(f.root, "user.slice", "app.scope", "codecell")) {
		t.Error("created a parent it cannot use")
	}
	if _, err := h.New("ab", Limits{}); err == nil {
		t.Error("New succeeded on an unusable host")
	}
}

// An unprivileged process alone in a delegated cgroup moves itself into a
// leaf and puts the sandboxes beside it.
func TestV2FakeDelegated(t *testing.T) {
	h, f := fakeHost{euid: 1000, rootCtrls: "cpu memory pids", rootOn: "cpu memory pids", swap: true}.detect(t)
	own := filepath.Join(f.root, "user.slice", "app.scope")
	if h.Version != 2 || h.v2Parent != filepath.Join(own, "codecell") {
		t.Fatalf("version %d, parent %s", h.Version, h.v2Parent)
	}
	wantWrites(t, f, []string{
		"user.slice/app.scope/cgroup.subtree_control=+memory", // EBUSY: this process is there
		"user.slice/app.scope/codecell-engine/cgroup.procs=1073741824",
		"user.slice/app.scope/cgroup.subtree_control=+memory",
		"user.slice/app.scope/cgroup.subtree_control=+pids",
		"user.slice/app.scope/cgroup.subtree_control=+cpu",
		"user.slice/app.scope/codecell/cgroup.subtree_control=+memory",
		"user.slice/app.scope/codecell/cgroup.subtree_control=+pids",
		"user.slice/app.scope/codecell/cgroup.subtree_control=+cpu",
	})
	if got := readPids(filepath.Join(own, "codecell-engine", "cgroup.procs")); !slices.Equal(got, []int{fakePid}) {
		t.Errorf("engine leaf holds %v", got)
	}
	g, err := h.New("cd34", Limits{Memory: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Destroy(); err != nil {
		t.Fatal(err)
	}
}

// A parent removed after Detect (by anyone, while empty) is made again,
// with its controllers.
func TestV2FakeParentRecreated(t *testing.T) {
	h, f := fakeHost{euid: 0, rootCtrls: "cpu memory pids", rootOn: "cpu memory pids", swap: true}.detect(t)
	if err := os.RemoveAll(h.v2Parent); err != nil {
		t.Fatal(err)
	}
	f.takeWrites()
	g, err := h.New("aa", Limits{Processes: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Destroy()
	wantWrites(t, f, []string{
		"codecell/cgroup.subtree_control=+memory",
		"codecell/cgroup.subtree_control=+pids",
		"codecell/cgroup.subtree_control=+cpu",
		"codecell/aa/memory.swap.max=0",
		"codecell/aa/memory.max=max",
		"codecell/aa/pids.max=4",
		"codecell/aa/cpu.max=max 100000",
	})
}

// Without swap accounting or the cpu controller, v2 still works, writes no
// swap limit, and says what is missing.
func TestV2FakeMissing(t *testing.T) {
	h, f := fakeHost{euid: 0, rootCtrls: "memory pids", rootOn: "memory pids"}.detect(t)
	if h.Version != 2 || !slices.Equal(h.Controllers, []string{"memory", "pids"}) {
		t.Fatalf("version %d, controllers %v", h.Version, h.Controllers)
	}
	if !strings.Contains(h.Reason, "no cpu controller") || !strings.Contains(h.Reason, "memory.swap.max") {
		t.Errorf("Reason %q", h.Reason)
	}
	f.takeWrites()
	g, err := h.New("ef", Limits{Memory: 1 << 20, Processes: 3, CPU: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Destroy()
	wantWrites(t, f, []string{"codecell/ef/memory.max=1048576", "codecell/ef/pids.max=3"})
	if got := g.Describe(); got != "cgroup v2 (memory, pids)" {
		t.Errorf("Describe() = %q", got)
	}
}

// A cgroup v2 without memory and pids (this package's development machine)
// and no v1 leaves nothing usable.
func TestV2FakeNoControllers(t *testing.T) {
	h, _ := fakeHost{euid: 0, rootCtrls: "cpu io"}.detect(t)
	if h.Version != 0 || !strings.Contains(h.Reason, "lacks the memory and pids controllers") || !strings.Contains(h.Reason, "cgroup v1: the memory and pids controllers are not mounted") {
		t.Errorf("version %d, reason %q", h.Version, h.Reason)
	}
}

func wantWrites(t *testing.T, f *fakeV2, want []string) {
	t.Helper()
	if got := f.takeWrites(); !slices.Equal(got, want) {
		t.Errorf("writes:\n  got  %q\n  want %q", got, want)
	}
}

func TestDetectNoCgroups(t *testing.T) {
	tmp := t.TempDir()
	mountinfo := filepath.Join(tmp, "mountinfo")
	os.WriteFile(mountinfo, []byte(
		"22 1 0:21 / /proc rw,relatime - proc proc rw\n"+
			"31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"), 0o644)
	selfCgroup := filepath.Join(tmp, "cgroup")
	os.WriteFile(selfCgroup, []byte("0::/\n"), 0o644)
	h := detect(&system{mountinfo: mountinfo, selfCgroup: selfCgroup, pid: fakePid,
		write: func(string, string) error { t.Error("write on a host without cgroups"); return nil },
		mkdir: func(string) error { t.Error("mkdir on a host without cgroups"); return nil },
		rmdir: func(string) error { return nil },
	})
	if h.Version != 0 || h.Reason != "no cgroup filesystem is mounted" || len(h.Controllers) != 0 {
		t.Errorf("version %d, controllers %v, reason %q", h.Version, h.Controllers, h.Reason)
	}

	h = detect(&system{mountinfo: filepath.Join(tmp, "missing"), selfCgroup: selfCgroup})
	if h.Version != 0 || !strings.Contains(h.Reason, "mount table") {
		t.Errorf("unreadable mountinfo: version %d, reason %q", h.Version, h.Reason)
	}
}

func TestParseMountinfo(t *testing.T) {
	ms := parseMountinfo("41 31 0:38 /sub /sys/fs/cgroup/a\\040b rw,relatime shared:9 master:2 - cgroup cgroup rw,cpu,cpuacct\nbroken line\n")
	if len(ms) != 1 {
		t.Fatalf("parsed %d mounts", len(ms))
	}
	m := ms[0]
	if m.root != "/sub" || m.point != "/sys/fs/cgroup/a b" || m.fstype != "cgroup" || !slices.Equal(m.super, []string{"rw", "cpu", "cpuacct"}) {
		t.Errorf("%+v", m)
	}
	s := parseSelfCgroup("4:memory:/a/b\n3:cpu,cpuacct:/\n1:name=systemd:/x\n0::/user.slice\n")
	if s.v1["memory"] != "/a/b" || s.v1["cpuacct"] != "/" || s.v2 != "/user.slice" || !s.hasV2 {
		t.Errorf("%+v", s)
	}
}

// Sweep removes old empty groups, and leaves young ones and ones that hold a
// process.
func TestSweep(t *testing.T) {
	// Parents of the test's own: Sweep also kills the groups of dead
	// owners, and the shared parents may hold other processes' groups.
	h := privateHost(t, v1Host(t))
	old := time.Now().Add(-time.Hour)
	stale, err := h.New(fmt.Sprintf("%016x", rand.Uint64()), Limits{Processes: 8})
	if err != nil {
		t.Fatal(err)
	}
	young, err := h.New(fmt.Sprintf("%016x", rand.Uint64()), Limits{Processes: 8})
	if err != nil {
		t.Fatal(err)
	}
	busy, err := h.New(fmt.Sprintf("%016x", rand.Uint64()), Limits{Processes: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stale.Destroy(); young.Destroy(); busy.Destroy() })
	cmd := exec.Command("sleep", "99")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	if err := busy.Add(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	for _, g := range []*Group{stale, busy} {
		for _, p := range g.paths {
			if err := os.Chtimes(p, old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	h.Sweep(time.Minute)
	for _, p := range stale.paths {
		if exists(p) {
			t.Errorf("the stale empty group %s is still there", p)
		}
	}
	for _, p := range append(append([]string{}, young.paths...), busy.paths...) {
		if !exists(p) {
			t.Errorf("%s was removed: it is young or holds a process", p)
		}
	}
}
