//go:build linux

package native_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/cgroup"
	"github.com/codecell-dev/codecell/internal/instdir"
	"github.com/codecell-dev/codecell/internal/proc"
	"github.com/codecell-dev/codecell/internal/testenv"
	"github.com/codecell-dev/codecell/tier/native"
)

// helperEnv makes the re-executed test binary a codecell process that runs
// a native sandbox and is then killed by the test; its value is the token
// that the sandbox's processes carry as argv[0]. baseEnv is where it claims
// its instance directory, which holds the Engine's temporary directories,
// as a server would.
const (
	helperEnv = "CODECELL_NATIVE_RECOVER_HELPER"
	baseEnv   = "CODECELL_NATIVE_RECOVER_BASE"
)

func TestMain(m *testing.M) {
	// The sandbox's init is a re-execution of this test binary.
	codecell.Init()
	if token := os.Getenv(helperEnv); token != "" {
		os.Exit(recoverHelper(token))
	}
	os.Exit(testenv.Run(m))
}

// recoverHelper runs two `sleep 30`s in a native sandbox, prints its
// instance directory ("dir PATH"), the sandbox's pids ("pid N") and the ids
// of its cgroups ("group ID"), then "ready", and waits to be killed (or for
// stdin to close).
func recoverHelper(token string) int {
	dir, _, err := instdir.Claim(os.Getenv(baseEnv), "helper-")
	if dir == nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Printf("dir %s\n", dir.Path)
	go func() {
		x := &codecell.Exec{
			Tier:     native.Name,
			Language: "bash",
			Code:     `(exec -a "$TOKEN" sleep 30) & exec -a "$TOKEN" sleep 30`,
			Env:      map[string]string{"TOKEN": token},
			Limits:   codecell.Limits{Timeout: 40 * time.Second},
		}
		res, err := (&codecell.Engine{TempDir: dir.Path}).Run(context.Background(), x)
		if err != nil {
			fmt.Fprintln(os.Stderr, "Run:", err)
		} else {
			fmt.Fprintf(os.Stderr, "Run ended: %s %s\n", res.Status, res.Stderr)
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	var pids []int
	for len(pids) < 2 {
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "found %d of the sandbox's 2 processes\n", len(pids))
			return 2
		}
		time.Sleep(20 * time.Millisecond)
		pids = tokenProcs(token)
	}
	var groups []string
	for _, pid := range pids {
		fmt.Printf("pid %d\n", pid)
		data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		for line := range strings.Lines(string(data)) {
			// "4:memory:/…/codecell/<id>", as seen from the host's cgroup
			// namespace.
			f := strings.SplitN(strings.TrimSpace(line), ":", 3)
			if len(f) == 3 && filepath.Base(filepath.Dir(f[2])) == "codecell" && !slices.Contains(groups, filepath.Base(f[2])) {
				groups = append(groups, filepath.Base(f[2]))
			}
		}
	}
	for _, g := range groups {
		fmt.Printf("group %s\n", g)
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// tokenProcs lists the live processes whose argv[0] is token.
func tokenProcs(token string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || !strings.HasPrefix(string(cmdline), token+"\x00") {
			continue
		}
		if p, ok := proc.Stat(pid); !ok || p.Dead() {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

func requireNative(t *testing.T) {
	t.Helper()
	if err := native.Default.Probe(); err != nil {
		if os.Getenv("CODECELL_REQUIRE_NATIVE") == "1" {
			t.Fatalf("the native sandbox is required (CODECELL_REQUIRE_NATIVE=1) and this host cannot give it: %v", err)
		}
		t.Skipf("this host cannot give the native sandbox: %v", err)
	}
}

// ownedBy lists the groups under the host's parents whose id names pid as
// its owner (cgroup.OwnedID's "<ns>-<pid>-<start>-<random>", in hex).
func ownedBy(h *cgroup.Host, pid int) []string {
	var dirs []string
	for _, p := range h.Parents() {
		entries, _ := os.ReadDir(p)
		for _, e := range entries {
			if f := strings.Split(e.Name(), "-"); e.IsDir() && len(f) == 4 && f[1] == strconv.FormatInt(int64(pid), 16) {
				dirs = append(dirs, filepath.Join(p, e.Name()))
			}
		}
	}
	return dirs
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// A codecell process killed with SIGKILL while its sandbox runs: the
// sandbox's processes die with it (Pdeathsig on init, which takes its pid
// namespace down), Recover then removes the cgroups it left, and the next
// instdir.Claim its temporary directories.
func TestRecoverAfterSIGKILL(t *testing.T) {
	requireNative(t)
	var b [8]byte
	rand.Read(b[:])
	token := "codecell-recover-" + hex.EncodeToString(b[:])
	// Whatever happens, nothing tagged outlives the test.
	t.Cleanup(func() {
		for _, pid := range tokenProcs(token) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})

	base := filepath.Join(t.TempDir(), "instances")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+token, baseEnv+"="+base)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	helper := cmd.Process.Pid
	waited := make(chan struct{})
	go func() { cmd.Wait(); close(waited) }()
	t.Cleanup(func() { cmd.Process.Kill(); stdin.Close(); <-waited })

	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var pids []int
	var ids []string
	var helperDir string
	timeout := time.After(60 * time.Second)
read:
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				<-waited
				t.Fatalf("the helper ended before its sandbox ran; stderr:\n%s", stderr.String())
			}
			if line == "ready" {
				break read
			}
			if p, ok := strings.CutPrefix(line, "pid "); ok {
				pid, _ := strconv.Atoi(p)
				pids = append(pids, pid)
			}
			if id, ok := strings.CutPrefix(line, "group "); ok {
				ids = append(ids, id)
			}
			if d, ok := strings.CutPrefix(line, "dir "); ok {
				helperDir = d
			}
		case <-timeout:
			t.Fatalf("the helper's sandbox did not start; stderr:\n%s", stderr.String())
		}
	}

	h := cgroup.Detect()
	var dirs []string
	for _, id := range ids {
		for _, p := range h.Parents() {
			if dir := filepath.Join(p, id); exists(dir) {
				dirs = append(dirs, dir)
			}
		}
	}
	t.Logf("sandbox processes %v; cgroup version %d, directories %v", pids, h.Version, dirs)
	if h.Version != 0 && len(dirs) == 0 {
		t.Fatalf("the sandbox's cgroups %v are under none of %v", ids, h.Parents())
	}
	for _, dir := range dirs {
		if f := strings.Split(filepath.Base(dir), "-"); len(f) != 4 || f[1] != strconv.FormatInt(int64(helper), 16) {
			t.Errorf("the sandbox's group %s does not name the helper (pid %d) as its owner", dir, helper)
		}
	}
	all := ownedBy(h, helper) // the pool's sandboxes' too

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-waited
	deadline := time.Now().Add(5 * time.Second)
	for len(tokenProcs(token)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the sandbox's processes %v outlived their codecell process by 5 s", tokenProcs(token))
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Another codecell process's sweep may remove some first.
	left := slices.DeleteFunc(slices.Clone(all), func(d string) bool { return !exists(d) })

	r, err := native.Recover()
	if err != nil {
		t.Fatalf("Recover: %v", err)
	}
	t.Logf("Recover: %+v; the helper's groups %d, still there before it %d", r, len(all), len(left))
	groups := map[string]bool{}
	for _, d := range left {
		groups[filepath.Base(d)] = true
	}
	if r.Groups < len(groups) {
		t.Errorf("Recover reports %d groups removed; the helper left %d", r.Groups, len(groups))
	}
	for _, dir := range all {
		if exists(dir) {
			t.Errorf("%s is still there after Recover", dir)
		}
	}

	// The Engine's runner and workspace directories, which the helper's
	// death left, go with its instance directory.
	tmps, _ := filepath.Glob(filepath.Join(helperDir, "codecell-*"))
	t.Logf("the helper's instance directory holds %d codecell-* directories", len(tmps))
	dir, removed, err := instdir.Claim(base, "helper-")
	if err != nil {
		t.Fatal(err)
	}
	dir.Release()
	if !slices.Equal(removed, []string{helperDir}) || exists(helperDir) {
		t.Errorf("Claim removed %q; the helper's %s exists: %v", removed, helperDir, exists(helperDir))
	}

	// So does the directory of the helper's own (instdir.Process, with its
	// interpreters' files), at the next codecell process's claim there.
	var own []string
	for _, b := range instdir.Bases() {
		m, _ := filepath.Glob(filepath.Join(b, fmt.Sprintf("proc-%d-*", helper)))
		own = append(own, m...)
	}
	t.Logf("the helper's own directories: %v", own)
	next, _, err := instdir.ClaimFirst(instdir.Bases(), "proc-")
	if next == nil {
		t.Fatal(err)
	}
	next.Release()
	for _, d := range own {
		if exists(d) {
			t.Errorf("the helper's own directory %s is still there after the next claim", d)
		}
	}
}
