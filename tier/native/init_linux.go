//go:build linux

package native

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/codecell-dev/codecell/internal/seccomp"
)

// initStage is the sandbox's init: the codecell binary re-executed by the
// host inside fresh namespaces, as pid 1 of the new pid namespace. It builds
// the filesystem, waits for its one job, confines itself and forks the
// program, reaps what dies, and when the program ends kills everything left
// in the namespace. It never returns.
func initStage() {
	fd, err := strconv.Atoi(os.Args[2])
	if err != nil {
		os.Exit(125)
	}
	unix.CloseOnExec(fd)
	c := newConn(os.NewFile(uintptr(fd), "control"))
	fail := func(err error) {
		_ = c.send(message{Error: err.Error()})
		os.Exit(125)
	}
	var s spawnSpec
	if _, err := c.recv(&s); err != nil {
		os.Exit(125)
	}
	// Not dumpable: no process in the sandbox may read init's memory or
	// /proc files, or ptrace it, even one that shares its uid (as in
	// rootless mode). The host, root or owner of the user namespace, still
	// reaches /proc/<init>/root.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		fail(err)
	}
	// A cgroup namespace of its own, made here rather than at clone: the
	// host puts init into its cgroup after the clone (cgroup v1 has no
	// CLONE_INTO_CGROUP) and before sending the spec, and a cgroup
	// namespace is rooted where its creator stands when it is made.
	if err := unix.Unshare(unix.CLONE_NEWCGROUP); err != nil {
		fail(fmt.Errorf("cgroup namespace: %w", err))
	}
	if err := buildRoot(&s); err != nil {
		fail(err)
	}
	// Confined before the job arrives: nothing below needs a mount or a
	// capability, and a pre-started sandbox waits ready to fork.
	applied, err := confine()
	if err != nil {
		fail(err)
	}
	if err := c.send(message{Ready: &readyInfo{Landlock: applied.landlock, Seccomp: applied.seccomp}}); err != nil {
		os.Exit(125)
	}
	var m message
	fds, err := c.recv(&m)
	if err != nil || m.Job == nil {
		os.Exit(0) // the host went away, or wants no job
	}
	if err := runJob(c, &s, m.Job, fds); err != nil {
		fail(err)
	}
	os.Exit(0)
}

func runJob(c *conn, s *spawnSpec, j *jobSpec, fds []int) error {
	if len(fds) < 3 || len(j.Argv) == 0 {
		return errors.New("a job needs a command and stdin, stdout and stderr")
	}
	// Limits set on init are inherited by the program it forks. RLIMIT_CORE
	// is 0 always: a core dump is a file the program did not ask to write.
	for _, r := range append(j.Rlimits, rlimit{Resource: unix.RLIMIT_CORE, Value: 0}) {
		lim := unix.Rlimit{Cur: r.Value, Max: r.Value}
		if err := unix.Setrlimit(r.Resource, &lim); err != nil {
			return fmt.Errorf("setrlimit %d: %w", r.Resource, err)
		}
	}

	attr := &syscall.SysProcAttr{
		// A session of its own: the program has no controlling terminal, so
		// even a terminal passed in could not be pushed keystrokes into
		// (TIOCSTI needs the caller's controlling terminal; seccomp refuses
		// it as well).
		Setsid:    true,
		Pdeathsig: syscall.SIGKILL,
	}
	if s.ProgramUID != initUID {
		// From root of the user namespace to an ordinary user: the kernel
		// clears every capability at this change, and the bounding set,
		// emptied above, keeps exec from granting any back.
		attr.Credential = &syscall.Credential{Uid: uint32(s.ProgramUID), Gid: uint32(s.ProgramUID), Groups: []uint32{}}
	}
	files := make([]uintptr, len(fds))
	for i, fd := range fds {
		files[i] = uintptr(fd)
	}
	pid, err := syscall.ForkExec(j.Argv[0], j.Argv, &syscall.ProcAttr{Dir: j.Dir, Env: j.Env, Files: files, Sys: attr})
	closeAll(fds)
	if err != nil {
		return fmt.Errorf("starting %s: %w", j.Argv[0], err)
	}
	if err := c.send(message{Started: pid}); err != nil {
		killAll()
		return nil
	}

	events := make(chan message, 4)
	go func() {
		for {
			var m message
			if _, err := c.recv(&m); err != nil {
				events <- message{Exit: true}
				return
			}
			events <- m
		}
	}()
	status := make(chan syscall.WaitStatus, 1)
	reaped := make(chan struct{})
	go reapAll(pid, status, reaped)

	exitAfter := false
	var ws syscall.WaitStatus
wait:
	for {
		select {
		case ws = <-status:
			break wait
		case m := <-events:
			if m.Kill || m.Exit {
				killAll()
			}
			exitAfter = exitAfter || m.Exit
		}
	}
	// The program is done: whatever it left running dies with it.
	killAll()
	select {
	case <-reaped:
	case <-time.After(5 * time.Second):
	}
	info := &exitInfo{ExitCode: ws.ExitStatus()}
	if ws.Signaled() {
		info.ExitCode, info.Signal = -1, int(ws.Signal())
	}
	if err := c.send(message{Exited: info}); err != nil || exitAfter {
		return nil
	}
	for m := range events {
		if m.Exit {
			break
		}
	}
	return nil
}

// killAll kills every process of the namespace but init itself: kill(-1)
// from a pid namespace's init reaches exactly its namespace.
func killAll() {
	_ = unix.Kill(-1, unix.SIGKILL)
}

// reapAll waits for every child, including the orphans the kernel hands to
// pid 1, reports the program's own status, and closes reaped when no child
// is left.
func reapAll(program int, status chan<- syscall.WaitStatus, reaped chan<- struct{}) {
	defer close(reaped)
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return
		}
		if pid == program {
			status <- ws
		}
	}
}

type confinement struct {
	landlock string
	seccomp  string
}

// confine drops init's ability to hand privilege to anything it starts, and
// restricts what the program may reach. The order is the point: each step
// needs what the previous ones still allow. It runs after the last mount.
func confine() (confinement, error) {
	var applied confinement
	// 1. Empty the capability bounding set. The program's uid change clears
	// its capabilities; the bounding set keeps any exec (of a file with
	// capabilities, or as uid 0 in rootless mode) from granting them back.
	// Dropping needs CAP_SETPCAP, so it comes first.
	last := 63
	if b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			last = n
		}
	}
	for c := 0; c <= last; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
			return applied, fmt.Errorf("dropping capability %d: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && err != unix.EINVAL {
		return applied, fmt.Errorf("clearing ambient capabilities: %w", err)
	}
	// 2. no_new_privs: no exec can raise privileges again (setuid bits,
	// file capabilities). Landlock and unprivileged seccomp require it.
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return applied, fmt.Errorf("no_new_privs: %w", err)
	}
	// 3. Landlock, after the last mount: a Landlock domain forbids changing
	// the mount topology, which init no longer needs.
	if LandlockABI() > 0 {
		var err error
		applied.landlock, err = restrictLandlock(landlockRules{
			Writable: []string{workspaceDir, "/tmp", "/dev/shm"},
			Devices:  []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"},
		})
		if err != nil {
			return applied, err
		}
	}
	// 4. Seccomp last (runc puts it as close to execve as it can): the
	// filter refuses mount, setns, unshare and the rest, which the steps
	// above and the filesystem's construction needed. It covers every
	// thread of init (TSYNC), and init stays confined by it while it waits,
	// forks the program and reaps.
	if err := seccomp.Install(); err != nil {
		return applied, fmt.Errorf("seccomp: %w", err)
	}
	applied.seccomp = fmt.Sprintf("deny list of %d system calls, plus clone namespace flags, TIOCSTI, vsock", len(seccomp.Denied()))
	return applied, nil
}
