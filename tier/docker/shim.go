//go:build linux

package docker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/codecell-dev/codecell"
)

// The container's first process (under the engine's init) is the codecell
// binary, re-executed as the "docker" init stage, the launcher:
//
//	codecell-init docker wait
//
// It connects to ctl.sock, which the host listens on in channelDir, and
// reads the job: one line of JSON with the command, its environment and how
// many descriptors it gets. It connects the sockets for those descriptors
// (3.sock, 4.sock, …), puts them at descriptors 3, 4, … and starts the
// program as its child. The launcher outlives the program: the workspace is
// a tmpfs the engine mounts for the running container alone, so the host
// copies it in before the job and reads it back after the program's end,
// both while the container runs. When the program ends, the launcher kills
// whatever it left running, writes its exit status on ctl.sock (one line of
// JSON) and waits for the host to close the socket, then exits with the
// program's status. A line "kill" from the host ends the program and every
// process it started at once.
func registerInit() {
	codecell.RegisterInitStage(Name, shim)
}

func shim() {
	if len(os.Args) != 3 || os.Args[2] != "wait" {
		fmt.Fprintf(os.Stderr, "codecell: usage: %s %s wait\n", codecell.InitArg0, Name)
		os.Exit(125)
	}
	if err := launch(); err != nil {
		fmt.Fprintf(os.Stderr, "codecell: starting the program in the container: %v\n", err)
		os.Exit(125)
	}
}

// launch runs one job and exits with its status.
func launch() error {
	// The program runs as this process's user: without this, it could
	// reach the control socket through /proc/PID/fd or ptrace, and speak
	// for the launcher.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("making the launcher undumpable: %w", err)
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: channelDir + "/ctl.sock"}); err != nil {
		return fmt.Errorf("connecting to the host: %w", err)
	}
	// The program's processes and the launcher's threads share the
	// container's pids limit: a thread the runtime wanted after the
	// program had taken the rest would end the launcher (Go aborts when it
	// cannot make one). The threads it may want are made now, while the
	// host copies the workspace in (the program's time has not begun),
	// and kept idle by the runtime.
	warmThreads(launcherThreads)
	// Read with plain system calls, byte runs until the newline: nothing
	// of the runtime's poller is opened at a descriptor the job needs.
	var line []byte
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Read(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			// The host let the container go without a job.
			os.Exit(0)
		}
		line = append(line, buf[:n]...)
		if bytes.IndexByte(line, '\n') >= 0 {
			break
		}
		if len(line) > 16<<20 {
			return errors.New("the job is over 16 MiB")
		}
	}
	line, rest, _ := bytes.Cut(line, []byte{'\n'})
	var msg jobMessage
	if err := json.Unmarshal(line, &msg); err != nil {
		return fmt.Errorf("reading the job: %w", err)
	}
	if len(msg.Argv) == 0 || msg.Files < 0 || msg.Files > 16 {
		return errors.New("a job without a command")
	}
	if err := makeLinks(msg.Links); err != nil {
		return err
	}
	if err := connectChannels(msg.Files); err != nil {
		return err
	}
	files := make([]uintptr, 3+msg.Files)
	for i := range files {
		files[i] = uintptr(i)
	}
	pid, err := syscall.ForkExec(msg.Argv[0], msg.Argv, &syscall.ProcAttr{Env: msg.Env, Files: files})
	if err != nil {
		return fmt.Errorf("%s: %w", msg.Argv[0], err)
	}
	// The program's descriptors are its own: a channel ends when the
	// program and its children close it, and its stdin is not held open
	// here.
	for i := 3; i < 3+msg.Files; i++ {
		unix.Close(i)
	}
	unix.Close(0)

	hostDone := make(chan struct{})
	go func() {
		defer close(hostDone)
		pending := rest
		for {
			for {
				cmd, after, ok := bytes.Cut(pending, []byte{'\n'})
				if !ok {
					break
				}
				if string(cmd) == "kill" {
					_ = unix.Kill(-1, unix.SIGKILL)
				}
				pending = after
			}
			if len(pending) > 1<<10 {
				pending = nil
			}
			n, err := unix.Read(fd, buf)
			if err == unix.EINTR {
				continue
			}
			if n <= 0 {
				// The host is done with the container, or gone: the
				// program does not outlive its say.
				_ = unix.Kill(-1, unix.SIGKILL)
				return
			}
			pending = append(pending, buf[:n]...)
		}
	}()

	var ws unix.WaitStatus
	for {
		if _, err := unix.Wait4(pid, &ws, 0, nil); err != unix.EINTR {
			break
		}
	}
	// What the program left running ends with it, before the host reads
	// the workspace back: kill(-1) reaches every process of the
	// container's but the engine's init and this one, until none is left
	// (the init reaps them).
	for try := 0; try < 1000; try++ {
		if unix.Kill(-1, unix.SIGKILL) == unix.ESRCH {
			break
		}
		time.Sleep(time.Millisecond)
	}
	st := exitMessage{Exit: ws.ExitStatus()}
	code := st.Exit
	if ws.Signaled() {
		st = exitMessage{Exit: -1, Signal: int(ws.Signal())}
		code = 128 + st.Signal
	}
	// What the read-back could not bring back is left out of it now,
	// with nothing of the program's running.
	st.Left = leave(workspaceDir, msg.ReadBack)
	// The kernel's count of out-of-memory kills, the peak and the limits
	// it held: the host cannot always learn them from the engine.
	if self, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		st.Cgroup = readCgroup("/sys/fs/cgroup", self)
	}
	b, _ := json.Marshal(st)
	b = append(b, '\n')
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			break
		}
		b = b[n:]
	}
	<-hostDone
	// The engine reports the container's status as the program's: a
	// signal's is 128 + its number, as the engine's init reports it.
	os.Exit(code)
	return nil
}

// connectChannels connects the n sockets of channelDir and puts them at
// descriptors 3, 4, ….
func connectChannels(n int) error {
	// Each socket is connected first, at whatever descriptor it gets, and
	// moved above every target before any target is filled: a socket
	// opened at 4 must not be overwritten by the one for 4.
	high := make([]int, n)
	for i := range n {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		path := fmt.Sprintf("%s/%d.sock", channelDir, 3+i)
		if err := unix.Connect(fd, &unix.SockaddrUnix{Name: path}); err != nil {
			return fmt.Errorf("connecting %s: %w", path, err)
		}
		if high[i], err = unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 100); err != nil {
			return err
		}
		unix.Close(fd)
	}
	for i, fd := range high {
		// Without O_CLOEXEC: the program inherits these.
		if err := unix.Dup3(fd, 3+i, 0); err != nil {
			return err
		}
		unix.Close(fd)
	}
	return nil
}

// makeLinks makes the workspace's links that the engine would not unpack
// (see ownTar), before the program starts: the program sees its workspace
// whole, and the host, reading it back, finds them as they were. A link
// that cannot be made ends the run here: read back without it, the host
// would take it for deleted.
func makeLinks(links []linkSpec) error {
	for _, l := range links {
		if !filepath.IsLocal(l.Name) || strings.ContainsRune(l.Target, 0) {
			return fmt.Errorf("the workspace's link %q is not one to make", l.Name)
		}
		if err := os.Symlink(l.Target, filepath.Join(workspaceDir, l.Name)); err != nil {
			return fmt.Errorf("making the workspace's link %s: %w", l.Name, err)
		}
	}
	return nil
}

// launcherThreads is how many threads the launcher holds before it starts
// the program: its main thread blocked in wait4, one reading the host's
// socket, the runtime's monitor, and four idle for the runtime's other
// work (it held five, and at times wanted a sixth once the program had
// taken the rest). With the engine's init, launcherTasks.
const launcherThreads = launcherTasks - 1

// warmThreads makes the runtime start threads until this process has n:
// each goroutine blocked in a read holds one, and once released the
// runtime keeps the thread idle for later work.
func warmThreads(n int) {
	// With processors to spare, the runtime starts a thread for each new
	// goroutine at once; with one, only when its monitor sees the
	// processor held in a system call, which can take a second.
	prev := runtime.GOMAXPROCS(n)
	defer runtime.GOMAXPROCS(prev)
	var release []int
	defer func() {
		for _, w := range release {
			_, _ = unix.Write(w, []byte{0})
			unix.Close(w)
		}
	}()
	for tries := 0; threads() < n && tries < 2*n; tries++ {
		var p [2]int
		if unix.Pipe2(p[:], unix.O_CLOEXEC) != nil {
			return
		}
		release = append(release, p[1])
		before := threads()
		go func(fd int) {
			var b [1]byte
			_, _ = unix.Read(fd, b[:])
			unix.Close(fd)
		}(p[0])
		// The reader blocks holding its thread; the runtime starts
		// another for the rest.
		for i := 0; i < 1000 && threads() <= before; i++ {
			time.Sleep(100 * time.Microsecond)
		}
	}
}

// threads is how many threads this process has.
func threads() int {
	entries, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return 1 << 20
	}
	return len(entries)
}
