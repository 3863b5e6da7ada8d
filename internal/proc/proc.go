//go:build linux

// Package proc reads the process table from /proc: who descends from whom,
// and how to end a whole tree of processes.
//
// The sandbox's init uses it (internal/sandboxinit): it imports only what
// Go initialises early (package path, not path/filepath).
package proc

import (
	"bytes"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Process is one row of the process table.
type Process struct {
	PID, PPID int
	State     byte // R, S, D, Z, T, …
	// Start is when the process started, in clock ticks after boot: it
	// tells a process from a later one that got its pid.
	Start uint64
}

// Dead reports whether the process has exited, reaped or not.
func (p Process) Dead() bool { return p.State == 'Z' || p.State == 'X' }

// List reads every process the caller can see.
func List() []Process {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	out := make([]Process, 0, len(names))
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		if p, ok := Stat(pid); ok {
			out = append(out, p)
		}
	}
	return out
}

// Stat reads one process's row.
func Stat(pid int) (Process, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Process{}, false
	}
	// The command name sits in parentheses and may itself hold spaces and
	// parentheses: the fields that follow start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+4 >= len(b) {
		return Process{}, false
	}
	// Fields 3 (state), 4 (ppid) and 22 (start time), counted from 1.
	fields := bytes.Fields(b[i+1:])
	if len(fields) < 20 {
		return Process{}, false
	}
	ppid, err := strconv.Atoi(string(fields[1]))
	if err != nil {
		return Process{}, false
	}
	start, err := strconv.ParseUint(string(fields[19]), 10, 64)
	if err != nil {
		return Process{}, false
	}
	return Process{PID: pid, PPID: ppid, State: fields[0][0], Start: start}, true
}

// Descendants returns the processes below root, living or zombie.
func Descendants(root int) []Process {
	all := List()
	children := map[int][]Process{}
	for _, p := range all {
		children[p.PPID] = append(children[p.PPID], p)
	}
	var out []Process
	queue := []int{root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, c := range children[pid] {
			out = append(out, c)
			queue = append(queue, c.PID)
		}
	}
	return out
}

// KillDescendants sends SIGKILL to every process below root until none but
// zombies is left, or the time is up. It reports whether the tree is gone.
// The caller must be root's subreaper (or root itself) for orphans to stay
// in view while their parents die.
func KillDescendants(root int, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for {
		alive := 0
		for _, p := range Descendants(root) {
			if p.Dead() {
				continue
			}
			alive++
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
		}
		if alive == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
}

// ReapAll waits for every child of the calling process, including the
// orphans a subreaper or a pid namespace's init inherits, sends the status
// of program on status, and closes reaped when no child is left.
func ReapAll(program int, status chan<- syscall.WaitStatus, reaped chan<- struct{}) {
	defer close(reaped)
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return // ECHILD: no child left
		}
		if pid == program {
			status <- ws
		}
	}
}

// Cmdline is the command line of process pid, its arguments joined by
// spaces; "" for a process that is gone.
func Cmdline(pid int) string {
	b, _ := os.ReadFile(path.Join("/proc", strconv.Itoa(pid), "cmdline"))
	return strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " ")
}
