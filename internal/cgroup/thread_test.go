//go:build linux

package cgroup

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// cgroupOf returns where the task whose /proc directory is dir stands in
// each v1 hierarchy the host uses, as a directory under its mount.
func cgroupOf(t *testing.T, h *Host, dir string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "cgroup"))
	if err != nil {
		t.Fatal(err)
	}
	own := parseSelfCgroup(string(data))
	at := map[string]string{}
	for c, m := range h.v1Mounts {
		if d, err := ownDir(m, own.v1[c]); err == nil {
			at[c] = d
		}
	}
	return at
}

// A thread that enters a group starts a process there, takes nothing else
// of its process with it, and goes back where it was; while it is in, the
// group's processes do not include the host's, so that killing the group
// never reaches it.
func TestEnterThread(t *testing.T) {
	h := v1Host(t)
	g := newGroup(t, h, Limits{Memory: 64 << 20, Processes: 20})
	self := "/proc/" + strconv.Itoa(os.Getpid())

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	thread := self + "/task/" + strconv.Itoa(unix.Gettid())
	before := cgroupOf(t, h, thread)
	leave, err := g.EnterThread()
	if err != nil {
		t.Fatal(err)
	}
	in := cgroupOf(t, h, thread)
	procs, raw := g.procs(), readPids(filepath.Join(g.dirs["memory"], "cgroup.procs"))
	cmd := exec.Command("/bin/cat") // blocks on its stdin until the test closes it
	stdin, perr := cmd.StdinPipe()
	serr := cmd.Start()
	lerr := leave()
	if perr != nil || serr != nil || lerr != nil {
		t.Fatal(perr, serr, lerr)
	}
	defer func() {
		stdin.Close()
		cmd.Wait()
	}()
	for c, dir := range g.dirs {
		if in[c] != dir {
			t.Errorf("%s: the entered thread stood in %q, not the group's %q", c, in[c], dir)
		}
	}
	if len(procs) != 0 {
		t.Errorf("with only this process's thread in it, the group listed processes %v", procs)
	}
	if !slices.Contains(raw, os.Getpid()) {
		t.Errorf("the kernel's cgroup.procs, %v, did not list this process while its thread stood in the group", raw)
	}
	child := cgroupOf(t, h, "/proc/"+strconv.Itoa(cmd.Process.Pid))
	for c, dir := range g.dirs {
		if child[c] != dir {
			t.Errorf("%s: the started process was born in %q, not the group's %q", c, child[c], dir)
		}
	}
	after := cgroupOf(t, h, thread)
	main := cgroupOf(t, h, self)
	for c := range g.dirs {
		if after[c] != before[c] {
			t.Errorf("%s: the thread came back to %q, not %q", c, after[c], before[c])
		}
		if main[c] == g.dirs[c] {
			t.Errorf("%s: the process's main thread moved into the group", c)
		}
	}
	if got := g.procs(); !slices.Equal(got, []int{cmd.Process.Pid}) {
		t.Errorf("the group's processes are %v, want only the started one, %d", got, cmd.Process.Pid)
	}
}
