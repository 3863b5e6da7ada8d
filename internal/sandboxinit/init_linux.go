//go:build linux

package sandboxinit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/codecell-dev/codecell/internal/proc"
	"github.com/codecell-dev/codecell/internal/seccomp"
)

// The sandbox's init runs in two stages, one process (pid 1 of the sandbox's
// pid namespace) throughout.
//
// Stage one (initStage) is the codecell binary re-executed by the host in
// fresh namespaces. It builds the filesystem and confines itself — but
// capabilities, Landlock and namespaces belong to a thread, not a process,
// and a Go program runs on several threads it does not choose. So stage one
// does all of that on one locked thread and then re-executes the binary
// from it: execve keeps only the calling thread, so stage two (runStage),
// and every thread its runtime starts, carries exactly that confinement.
// Descriptors stage one inherited from the host, all marked close-on-exec
// first, end at that exec too.
//
// Stage two waits for the job, forks the program, reaps what dies, and when
// the program ends kills everything left in the namespace.

// init runs the init stage this process was started as, and never
// returns then; in any other process, it returns at once. A stage name
// that is not the native sandbox's is another tier's, which the program's
// call of codecell.Init runs.
func init() {
	if len(os.Args) < 2 || os.Args[0] != InitArg0 {
		return
	}
	switch os.Args[1] {
	case Stage:
		initStage()
	case RunStage:
		runStage()
	default:
		return
	}
	fmt.Fprintf(os.Stderr, "codecell: init stage %q returned\n", os.Args[1])
	os.Exit(125)
}

// oomFD, in stage two, writes init's own OOM score (see runJob); -1 when
// it could not be opened.
var oomFD = -1

func initStage() {
	runtime.LockOSThread() // never unlocked: this thread is the one that execs
	fd, err := strconv.Atoi(os.Args[2])
	if err != nil {
		os.Exit(125)
	}
	// Whatever the host process left open without close-on-exec (its own
	// files, its harness's pipes) must not reach the program: mark it all
	// close-on-exec now, and the exec into stage two closes it.
	if err := unix.CloseRange(uint(fd)+1, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		os.Exit(125)
	}
	for i := 3; i < fd; i++ {
		unix.CloseOnExec(i)
	}
	c := NewConn(os.NewFile(uintptr(fd), "control"))
	fail := func(err error) {
		_ = c.Send(Message{Error: err.Error()})
		os.Exit(125)
	}
	var s SpawnSpec
	if _, err := c.Recv(&s); err != nil {
		os.Exit(125)
	}
	// Not dumpable: no process in the sandbox may read init's memory or
	// /proc files, or ptrace it. (The exec below resets this; stage two
	// sets it again before anything else.)
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		fail(err)
	}
	if err := buildRoot(&s); err != nil {
		if s.Placing {
			// The host sends Placed meanwhile: read before saying why,
			// for an exit with it unread would reset the connection and
			// lose the answer.
			var m Message
			fds, _ := c.Recv(&m)
			CloseAll(fds)
		}
		var me *mountError
		if errors.As(err, &me) {
			why := me.err.Error()
			var pe *fs.PathError
			if errors.As(me.err, &pe) {
				why = pe.Err.Error() // the path is the mount's, or under it
			}
			_ = c.Send(Message{Error: why, Mount: me.dir})
			os.Exit(125)
		}
		refused := errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES)
		_ = c.Send(Message{Error: err.Error(), Refused: refused})
		os.Exit(125)
	}
	if s.Placing {
		// cgroup v1: the host moved init into its cgroup while the root
		// was built (mounts only: nothing of the program's has run).
		var m Message
		if fds, err := c.Recv(&m); err != nil || !m.Placed {
			CloseAll(fds)
			os.Exit(125)
		}
	}
	// A cgroup namespace of its own, made here rather than at clone: on
	// cgroup v1 the host puts init into its cgroup after the clone, and a
	// cgroup namespace is rooted where its creator stands when it is made.
	if err := unix.Unshare(unix.CLONE_NEWCGROUP); err != nil {
		fail(fmt.Errorf("cgroup namespace: %w", err))
	}
	if s.Template {
		becomeTemplate(c, fd, fail)
	}
	// init's own OOM score, opened before confine() closes /proc to
	// writes: stage two raises it around the fork of the program, which
	// inherits the raised score (see runJob).
	oomFile, err := unix.Open("/proc/self/oom_score_adj", unix.O_RDWR, 0)
	if err != nil {
		oomFile = -1
	}
	var listening []int
	var ports []int
	dns := -1
	var wildcards []string
	if s.Network != nil {
		// Before confine: binding the ports needs what init gives up there.
		if listening, dns, err = setUpNetwork(s.Network); err != nil {
			fail(err)
		}
		ports, wildcards = s.Network.Ports, s.Network.Wildcards
	}
	applied, err := confine(ports)
	if err != nil {
		fail(err)
	}
	if _, _, errno := unix.Syscall(unix.SYS_FCNTL, uintptr(fd), unix.F_SETFD, 0); errno != 0 {
		fail(fmt.Errorf("keeping the control socket across exec: %w", errno))
	}
	argv := []string{InitArg0, RunStage, strconv.Itoa(fd), applied.landlock, applied.seccomp, strconv.Itoa(s.ProgramUID), strconv.Itoa(oomFile), fdList(listening), strconv.Itoa(dns), strings.Join(wildcards, ",")}
	err = unix.Exec("/proc/self/exe", argv, append([]string{}, InitEnv...))
	fail(fmt.Errorf("re-executing init: %w", err))
}

// becomeTemplate turns init into a fork server: it says the sandbox is
// built, waits while the host writes the server's files in, and executes
// the server in its place, unconfined — each run it forks confines itself
// (see tier/native's zygote.py).
func becomeTemplate(c *Conn, fd int, fail func(error)) {
	if err := c.Send(Message{Ready: &ReadyInfo{}}); err != nil {
		os.Exit(125)
	}
	var m Message
	if fds, err := c.Recv(&m); err != nil || m.Template == nil || len(m.Template.Argv) == 0 {
		CloseAll(fds)
		os.Exit(0)
	}
	// No exec from here on may grant a privilege the server does not hold.
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		fail(err)
	}
	if _, _, errno := unix.Syscall(unix.SYS_FCNTL, uintptr(fd), unix.F_SETFD, 0); errno != 0 {
		fail(fmt.Errorf("keeping the control socket across exec: %w", errno))
	}
	if err := unix.Chdir(m.Template.Dir); err != nil {
		fail(err)
	}
	err := unix.Exec(m.Template.Argv[0], m.Template.Argv, m.Template.Env)
	fail(fmt.Errorf("starting the fork server: %w", err))
}

// runStage is stage two: confined as a whole, it answers ready and runs one
// job.
func runStage() {
	runtime.LockOSThread() // the program's parent-death signal is tied to this thread
	if len(os.Args) < 6 {
		os.Exit(125)
	}
	fd, err := strconv.Atoi(os.Args[2])
	if err != nil {
		os.Exit(125)
	}
	unix.CloseOnExec(fd)
	c := NewConn(os.NewFile(uintptr(fd), "control"))
	fail := func(err error) {
		_ = c.Send(Message{Error: err.Error()})
		os.Exit(125)
	}
	// Before anything: the exec made init dumpable again.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		fail(err)
	}
	programUID, err := strconv.Atoi(os.Args[5])
	if err != nil {
		fail(err)
	}
	oomFD = -1
	if len(os.Args) > 6 {
		if n, err := strconv.Atoi(os.Args[6]); err == nil && n >= 0 {
			oomFD = n
			unix.CloseOnExec(n)
		}
	}
	if len(os.Args) > 9 {
		// A network's listening sockets and resolver: never the program's.
		listening := parseFDList(os.Args[7])
		for _, l := range listening {
			unix.CloseOnExec(l)
		}
		dns, err := strconv.Atoi(os.Args[8])
		if err != nil {
			dns = -1
		}
		if dns >= 0 {
			unix.CloseOnExec(dns)
		}
		var wildcards []string
		if os.Args[9] != "" {
			wildcards = strings.Split(os.Args[9], ",")
		}
		if len(listening) > 0 || dns >= 0 {
			serveConnections(c, listening, dns, wildcards)
		}
	}
	if err := c.Send(Message{Ready: &ReadyInfo{Landlock: os.Args[3], Seccomp: os.Args[4]}}); err != nil {
		os.Exit(125)
	}
	warm := 0 // the warm interpreter's pid, once started
	for {
		var m Message
		fds, err := c.Recv(&m)
		if err != nil || (m.Job == nil && m.Warm == nil) {
			os.Exit(0) // the host went away, or wants no job
		}
		if m.Warm != nil {
			CloseAll(fds)
			if warm != 0 {
				fail(errors.New("an interpreter was already started"))
			}
			pid, ends, err := startWarm(programUID, m.Warm)
			if err != nil {
				fail(err)
			}
			err = c.Send(Message{Warmed: pid}, ends...)
			CloseAll(ends)
			if err != nil {
				killAll()
				os.Exit(0)
			}
			warm = pid
			continue
		}
		if err := runJob(c, programUID, m.Job, fds, warm); err != nil {
			fail(err)
		}
		os.Exit(0)
	}
}

// confineFork readies this thread to fork the program: the bounding set
// emptied but for what init holds, and the rlimits the program inherits.
func confineFork(rlimits []Rlimit) error {
	// The program inherits the bounding set of the thread that forks it:
	// this one, locked since the start. Emptied, no exec of the program's
	// can grant any capability, even in rootless mode, where it stays uid 0
	// of its user namespace. init keeps what it holds now.
	for c := 0; c < 64; c++ {
		if InitCaps&(1<<c) == 0 {
			continue
		}
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			return fmt.Errorf("dropping capability %d from the bounding set: %w", c, err)
		}
	}
	// Limits set on init are inherited by the program it forks. RLIMIT_CORE
	// is 0 always: a core dump is a file the program did not ask to write.
	for _, r := range append(rlimits, Rlimit{Resource: unix.RLIMIT_CORE, Value: 0}) {
		lim := unix.Rlimit{Cur: r.Value, Max: r.Value}
		if err := unix.Setrlimit(r.Resource, &lim); err != nil {
			return fmt.Errorf("setrlimit %d: %w", r.Resource, err)
		}
	}
	return nil
}

// forkProgram starts argv as the program: in a session of its own, as the
// sandbox's program user, with files as its descriptors 0, 1, 2, ….
func forkProgram(programUID int, argv, env []string, dir string, files []uintptr) (int, error) {
	attr := &syscall.SysProcAttr{
		// A session of its own: the program has no controlling terminal, so
		// even a terminal passed in could not be pushed keystrokes into
		// (TIOCSTI needs the caller's controlling terminal; seccomp refuses
		// it as well).
		Setsid:    true,
		Pdeathsig: syscall.SIGKILL,
	}
	if programUID != InitUID {
		// From root of the user namespace to an ordinary user: the kernel
		// clears every capability at this change, and the bounding set keeps
		// exec from granting any back.
		attr.Credential = &syscall.Credential{Uid: uint32(programUID), Gid: uint32(programUID), Groups: []uint32{}}
	}
	// The workspace and /tmp are tmpfs, whose pages count toward the
	// sandbox's memory: a program that fills them fills the cgroup, and the
	// kernel must then end the program, not init, which has the Result to
	// report. The program inherits the highest score there is, raised here
	// around the fork; init goes back to its own, which needs no privilege.
	own := []byte("0")
	if oomFD >= 0 {
		var b [16]byte
		if n, err := unix.Pread(oomFD, b[:], 0); err == nil && n > 0 {
			own = []byte(strings.TrimSpace(string(b[:n])))
		}
		_, _ = unix.Pwrite(oomFD, []byte("1000"), 0)
	}
	pid, err := syscall.ForkExec(argv[0], argv, &syscall.ProcAttr{Dir: dir, Env: env, Files: files, Sys: attr})
	if oomFD >= 0 {
		_, _ = unix.Pwrite(oomFD, own, 0)
	}
	if err != nil {
		return 0, fmt.Errorf("starting %s: %w", argv[0], err)
	}
	return pid, nil
}

// startWarm starts an interpreter ahead of its job (see WarmSpec) and
// returns its pid and the host's ends of its descriptors: stdin, stdout,
// stderr, the job pipe, then the Extra sockets.
func startWarm(programUID int, w *WarmSpec) (int, []int, error) {
	if len(w.Argv) == 0 || w.Extra < 0 || w.Extra > 8 {
		return 0, nil, errors.New("a warm interpreter needs a command, and at most 8 extra descriptors")
	}
	if err := confineFork(w.Rlimits); err != nil {
		return 0, nil, err
	}
	var child, host []int
	cleanup := func() { CloseAll(child); CloseAll(host) }
	pipe := func(childReads bool) error {
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			return err
		}
		if childReads {
			child, host = append(child, p[0]), append(host, p[1])
		} else {
			child, host = append(child, p[1]), append(host, p[0])
		}
		return nil
	}
	for _, reads := range []bool{true, false, false} {
		if err := pipe(reads); err != nil {
			cleanup()
			return 0, nil, err
		}
	}
	for i := 0; i < w.Extra; i++ {
		p, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			cleanup()
			return 0, nil, err
		}
		child, host = append(child, p[0]), append(host, p[1])
	}
	if err := pipe(true); err != nil { // the job, last
		cleanup()
		return 0, nil, err
	}
	files := make([]uintptr, len(child))
	for i, fd := range child {
		files[i] = uintptr(fd)
	}
	pid, err := forkProgram(programUID, w.Argv, w.Env, w.Dir, files)
	CloseAll(child)
	if err != nil {
		CloseAll(host)
		return 0, nil, err
	}
	// The host's ends in the order the protocol says: the job pipe before
	// the sockets.
	n := len(host)
	ends := append(append(append([]int{}, host[:3]...), host[n-1]), host[3:n-1]...)
	return pid, ends, nil
}

func runJob(c *Conn, programUID int, j *JobSpec, fds []int, warm int) error {
	var pid int
	switch {
	case j.Warm:
		CloseAll(fds)
		if warm == 0 {
			return errors.New("no interpreter was started for this job")
		}
		var ws unix.WaitStatus
		if got, err := unix.Wait4(warm, &ws, unix.WNOHANG, nil); err != nil || got == warm {
			return errors.New("the interpreter started for this job has ended")
		}
		pid = warm
	default:
		if warm != 0 {
			// Not the job it was started for: nothing else may run beside
			// the program.
			_ = unix.Kill(warm, unix.SIGKILL)
			var ws unix.WaitStatus
			_, _ = unix.Wait4(warm, &ws, 0, nil)
		}
		if len(fds) < 3 || len(j.Argv) == 0 {
			CloseAll(fds)
			return errors.New("a job needs a command and stdin, stdout and stderr")
		}
		if err := confineFork(j.Rlimits); err != nil {
			CloseAll(fds)
			return err
		}
		files := make([]uintptr, len(fds))
		for i, fd := range fds {
			files[i] = uintptr(fd)
		}
		var err error
		pid, err = forkProgram(programUID, j.Argv, j.Env, j.Dir, files)
		CloseAll(fds)
		if err != nil {
			return err
		}
	}
	if err := c.Send(Message{Started: pid}); err != nil {
		killAll()
		return nil
	}

	events := make(chan Message, 4)
	go func() {
		for {
			var m Message
			if _, err := c.Recv(&m); err != nil {
				events <- Message{Exit: true}
				return
			}
			events <- m
		}
	}()
	status := make(chan syscall.WaitStatus, 1)
	reaped := make(chan struct{})
	go proc.ReapAll(pid, status, reaped)

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
			if m.Interrupt {
				_ = unix.Kill(pid, unix.SIGINT)
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
	info := &ExitInfo{ExitCode: ws.ExitStatus()}
	if ws.Signaled() {
		info.ExitCode, info.Signal = -1, int(ws.Signal())
	}
	if err := c.Send(Message{Exited: info}); err != nil || exitAfter {
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

// InitCaps are the capabilities stage two holds, over its own user
// namespace only.
const InitCaps = 1<<unix.CAP_KILL | 1<<unix.CAP_SETUID | 1<<unix.CAP_SETGID | 1<<unix.CAP_SETPCAP

type confinement struct {
	landlock string
	seccomp  string
}

// confine drops init's ability to hand privilege to anything it starts, and
// restricts what the program may reach. The order is the point: each step
// needs what the previous ones still allow. It runs after the last mount.
func confine(connectPorts []int) (confinement, error) {
	var applied confinement
	// 1. Empty the capability bounding set but for what stage two needs:
	// root of the user namespace, it gets only what the bounding set allows
	// at its exec, and it starts the program as another uid (CAP_SETUID,
	// CAP_SETGID), kills its processes (CAP_KILL), and empties the bounding
	// set of the thread it forks the program from (CAP_SETPCAP; see
	// runJob). Dropping needs CAP_SETPCAP, so it comes first.
	for c := 0; c <= CapLast(); c++ {
		if InitCaps&(1<<c) != 0 {
			continue
		}
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
	// the mount topology, which init no longer needs. The init binary, now
	// outside the sandbox's view, may still be executed: stage two is it.
	if LandlockABI() > 0 {
		var err error
		applied.landlock, err = restrictLandlock(LandlockRules{
			Writable:     []string{WorkspaceDir, "/tmp", "/dev/shm"},
			Devices:      []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"},
			Executable:   []string{"/proc/self/exe"},
			ConnectPorts: connectPorts,
		})
		if err != nil {
			return applied, err
		}
	}
	// 4. Seccomp last (runc puts it as close to execve as it can): the
	// filter refuses mount, setns, unshare and the rest, which the steps
	// above and the filesystem's construction needed. Filters survive
	// execve: stage two and the program are confined by it.
	if err := seccomp.Install(); err != nil {
		return applied, fmt.Errorf("seccomp: %w", err)
	}
	applied.seccomp = SeccompApplied()
	return applied, nil
}

// CapLast is the highest capability this kernel knows.
func CapLast() int {
	if b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			return n
		}
	}
	return 63
}

// SeccompApplied says what the seccomp filter does, for Result.isolation.
func SeccompApplied() string {
	return fmt.Sprintf("deny list of %d system calls, plus clone namespace flags, TIOCSTI, vsock", len(seccomp.Denied()))
}
