//go:build linux

package local

import (
	"bufio"
	"encoding/json"
	"os"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/codecell-dev/codecell/internal/proc"
)

// supervise is the init stage of the local tier: it starts the program as
// its child, and when the program ends, or the host says "kill", or the host
// goes away, it kills every process the program started before it reports
// and exits. As the child subreaper it inherits every orphan of the tree,
// including those that left the process group or the session, so none can
// escape it.
func supervise() {
	fd, err := strconv.Atoi(os.Args[2])
	if err != nil {
		os.Exit(125)
	}
	// Descriptors the host process held without close-on-exec (its own
	// files, its parent's pipes) came along; only the ones passed on purpose,
	// below the control socket, are the program's.
	if err := unix.CloseRange(uint(fd), ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		os.Exit(125)
	}
	control := os.NewFile(uintptr(fd), "control")
	in := bufio.NewReader(control)
	send := func(r report) {
		b, _ := json.Marshal(r)
		_, _ = control.Write(append(b, '\n'))
	}
	fail := func(msg string) {
		send(report{ExitCode: -1, Error: msg})
		os.Exit(125)
	}

	var s spec
	line, err := in.ReadBytes('\n')
	if err != nil || json.Unmarshal(line, &s) != nil {
		fail("no program to run")
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fail("becoming the subreaper: " + err.Error())
	}
	files := make([]uintptr, s.Files)
	for i := range files {
		files[i] = uintptr(i)
	}
	pid, err := syscall.ForkExec(s.Argv[0], s.Argv, &syscall.ProcAttr{
		Dir:   s.Dir,
		Env:   s.Env,
		Files: files,
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		fail("starting " + s.Argv[0] + ": " + err.Error())
	}
	// The interpreter is still starting when these land: it runs nothing of
	// the program's before them.
	setLimit(pid, unix.RLIMIT_DATA, s.Memory)
	setLimit(pid, unix.RLIMIT_FSIZE, s.MaxFile)
	setLimit(pid, unix.RLIMIT_CORE, 0)

	exited := make(chan syscall.WaitStatus, 1)
	go proc.ReapAll(pid, exited, make(chan struct{}))
	kill := make(chan struct{})
	go func() {
		// "kill", or the end of the connection: the host is done with us.
		_, _ = in.ReadBytes('\n')
		close(kill)
	}()

	var r report
	select {
	case ws := <-exited:
		r = statusReport(ws)
	case <-kill:
		r = report{ExitCode: -1, Signal: int(syscall.SIGKILL)}
	}
	proc.KillDescendants(os.Getpid(), 10*time.Second)
	send(r)
	os.Exit(0)
}

func statusReport(ws syscall.WaitStatus) report {
	if ws.Signaled() {
		return report{ExitCode: -1, Signal: int(ws.Signal())}
	}
	return report{ExitCode: ws.ExitStatus()}
}

func setLimit(pid, resource int, value int64) {
	if value < 0 {
		return
	}
	lim := unix.Rlimit{Cur: uint64(value), Max: uint64(value)}
	_ = unix.Prlimit(pid, resource, &lim, nil)
}
