//go:build linux && (amd64 || arm64)

package seccomp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The tests below run the real filter in the kernel. The test binary
// re-executes itself (as os/exec's tests do); TestMain catches the marker
// in the environment and becomes a child that optionally calls Install, then
// makes syscalls and reports what they returned on stdout as JSON. Every
// probe is run twice, in a child without the filter (the control) and in a
// child with it, so that an EPERM is shown to come from the filter and not
// from the kernel's own checks. The probes are chosen so that, unfiltered,
// the kernel refuses them for another reason (a bad fd, a missing path, an
// invalid flag combination) before they change anything.

const (
	childEnv  = "CODECELL_SECCOMP_TEST_CHILD"  // child mode: probe, x32 or exec
	filterEnv = "CODECELL_SECCOMP_TEST_FILTER" // "1": call Install first
	helperEnv = "CODECELL_SECCOMP_TEST_HELPER" // program the exec mode runs
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(child(mode))
	}
	os.Exit(m.Run())
}

// expect is what a probe must get from the filter.
type expect int

const (
	refused expect = iota // EPERM, where the control got something else
	nosys                 // ENOSYS, where the control got something else
	passed                // the same errno as the control
)

type probe struct {
	name string
	want expect
	call func() (uintptr, unix.Errno)
}

// missing is a path that does not exist, for calls that would act on a
// path if the filter let them through.
const missing = "/nonexistent/codecell-seccomp-test"

// atFdcwd is AT_FDCWD (-100) as a syscall argument.
const atFdcwd = ^uintptr(99) // two's complement -100

// pinned keeps the strings str hands out as bare addresses reachable, so
// that the collector cannot free them before the probes use them.
var pinned []*byte

func str(s string) uintptr {
	p, err := unix.BytePtrFromString(s)
	if err != nil {
		panic(err)
	}
	pinned = append(pinned, p)
	return uintptr(unsafe.Pointer(p))
}

func sys(nr uintptr, args ...uintptr) func() (uintptr, unix.Errno) {
	return func() (uintptr, unix.Errno) {
		var a [6]uintptr
		copy(a[:], args)
		r, _, e := unix.Syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5])
		return r, e
	}
}

// rawClone calls clone(flags) with flags that the kernel rejects with
// EINVAL (CLONE_THREAD without CLONE_SIGHAND) before it creates anything,
// unless the filter answers first. Should a kernel accept them after all,
// the new process exits at once rather than run a copy of the test.
func rawClone(flags uint64) func() (uintptr, unix.Errno) {
	return func() (uintptr, unix.Errno) {
		r, _, e := unix.RawSyscall6(unix.SYS_CLONE, uintptr(flags|unix.CLONE_THREAD), 0, 0, 0, 0, 0)
		if e == 0 && r == 0 {
			unix.RawSyscall(unix.SYS_EXIT_GROUP, 0, 0, 0)
		}
		return r, e
	}
}

// personality sets a persona and, if that worked, puts the old one back.
func personality(p uint64) func() (uintptr, unix.Errno) {
	return func() (uintptr, unix.Errno) {
		old, _, e := unix.RawSyscall(unix.SYS_PERSONALITY, uintptr(p), 0, 0)
		if e == 0 {
			unix.RawSyscall(unix.SYS_PERSONALITY, old, 0, 0)
		}
		return old, e
	}
}

// devNullIoctl calls ioctl on /dev/null, which has no ioctls: unfiltered,
// the kernel answers ENOTTY for any request, so EPERM can only come from
// the filter, which decides before the fd is looked at.
func devNullIoctl(req uint64) func() (uintptr, unix.Errno) {
	return func() (uintptr, unix.Errno) {
		fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			panic(err)
		}
		defer unix.Close(fd)
		r, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(req), 0)
		return r, e
	}
}

func probes() []probe {
	ppid := uintptr(os.Getppid())
	pid := uintptr(os.Getpid())
	ps := []probe{
		{"ptrace(PTRACE_PEEKDATA, parent)", refused, sys(unix.SYS_PTRACE, unix.PTRACE_PEEKDATA, ppid, 0, 0)},
		{"process_vm_readv(parent, no iovecs)", refused, sys(unix.SYS_PROCESS_VM_READV, ppid, 0, 0, 0, 0, 0)},
		{"kcmp(self, self)", refused, sys(unix.SYS_KCMP, pid, pid, 0, 0, 0)},
		{"pidfd_getfd(-1)", refused, sys(unix.SYS_PIDFD_GETFD, ^uintptr(0), 0, 0)},
		{"keyctl(no such op)", refused, sys(unix.SYS_KEYCTL, 9999, 0, 0, 0, 0)},
		{"add_key(NULL type)", refused, sys(unix.SYS_ADD_KEY, 0, 0, 0, 0, 0)},
		{"request_key(NULL type)", refused, sys(unix.SYS_REQUEST_KEY, 0, 0, 0, 0)},
		{"bpf(no such cmd)", refused, sys(unix.SYS_BPF, 9999, 0, 0)},
		{"perf_event_open(NULL attr)", refused, sys(unix.SYS_PERF_EVENT_OPEN, 0, 0, ^uintptr(0), ^uintptr(0), 0)},
		{"userfaultfd(invalid flags)", refused, sys(unix.SYS_USERFAULTFD, 2 /* not a UFFD_* flag */)},
		{"io_uring_setup(0, NULL)", refused, sys(unix.SYS_IO_URING_SETUP, 0, 0)},
		{"unshare(CLONE_NEWUSER)", refused, sys(unix.SYS_UNSHARE, unix.CLONE_NEWUSER)},
		{"setns(-1)", refused, sys(unix.SYS_SETNS, ^uintptr(0), 0)},
		{"mount(missing)", refused, sys(unix.SYS_MOUNT, str(missing), str(missing), str("codecell-no-such-fs"), 0, 0)},
		{"umount2(missing)", refused, sys(unix.SYS_UMOUNT2, str(missing), 0)},
		{"pivot_root(missing)", refused, sys(unix.SYS_PIVOT_ROOT, str(missing), str(missing))},
		{"chroot(missing)", refused, sys(unix.SYS_CHROOT, str(missing))},
		{"fsopen(no such fs)", refused, sys(unix.SYS_FSOPEN, str("codecell-no-such-fs"), 0)},
		{"open_tree(missing)", refused, sys(unix.SYS_OPEN_TREE, atFdcwd, str(missing), 0)},
		{"name_to_handle_at(missing)", refused, sys(unix.SYS_NAME_TO_HANDLE_AT, atFdcwd, str(missing), 0, 0, 0)},
		{"open_by_handle_at(-1, NULL)", refused, sys(unix.SYS_OPEN_BY_HANDLE_AT, ^uintptr(0), 0, 0)},
		{"syslog(SIZE_BUFFER)", refused, sys(unix.SYS_SYSLOG, 10, 0, 0)},

		{"personality(ADDR_NO_RANDOMIZE)", refused, personality(0x0040000)},
		{"personality(READ_IMPLIES_EXEC)", refused, personality(0x0400000)},
		{"personality(READ_IMPLIES_EXEC, high word set)", refused, personality(1<<32 | 0x0400000)},
		{"personality(query)", passed, personality(0xffffffff)},
		{"personality(PER_LINUX)", passed, personality(0)},

		{"clone(CLONE_NEWNS)", refused, rawClone(unix.CLONE_NEWNS)},
		{"clone(CLONE_NEWUTS)", refused, rawClone(unix.CLONE_NEWUTS)},
		{"clone(CLONE_NEWIPC)", refused, rawClone(unix.CLONE_NEWIPC)},
		{"clone(CLONE_NEWUSER)", refused, rawClone(unix.CLONE_NEWUSER)},
		{"clone(CLONE_NEWPID)", refused, rawClone(unix.CLONE_NEWPID)},
		{"clone(CLONE_NEWNET)", refused, rawClone(unix.CLONE_NEWNET)},
		{"clone(CLONE_NEWCGROUP)", refused, rawClone(unix.CLONE_NEWCGROUP)},
		{"clone(CLONE_NEWUSER, high word set)", refused, rawClone(0xffffffff<<32 | unix.CLONE_NEWUSER)},
		{"clone(no namespace)", passed, rawClone(0)},
		{"clone(exit signal 0xff)", passed, rawClone(0xff)},
		{"clone3(NULL, 0)", nosys, sys(unix.SYS_CLONE3, 0, 0)},

		{"ioctl(TIOCSTI)", refused, devNullIoctl(unix.TIOCSTI)},
		{"ioctl(TIOCLINUX)", refused, devNullIoctl(unix.TIOCLINUX)},
		{"ioctl(TIOCSTI, high word set)", refused, devNullIoctl(0xdeadbeef<<32 | unix.TIOCSTI)},
		{"ioctl(TCGETS)", passed, devNullIoctl(unix.TCGETS)},

		{"getpid", passed, sys(unix.SYS_GETPID)},
		// Without the filter this VM answers with a vsock socket; with it,
		// EPERM before the family is looked at. Nothing is connected.
		{"socket(AF_VSOCK)", refused, func() (uintptr, unix.Errno) {
			fd, _, e := unix.Syscall(unix.SYS_SOCKET, unix.AF_VSOCK, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if e == 0 {
				unix.Close(int(fd))
			}
			return fd, e
		}},
		{"socket(AF_INET, SOCK_STREAM)", passed, func() (uintptr, unix.Errno) {
			fd, _, e := unix.Syscall(unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if e == 0 {
				unix.Close(int(fd))
			}
			return fd, e
		}},
		{"seccomp(GET_ACTION_AVAIL, ALLOW)", passed, func() (uintptr, unix.Errno) {
			action := uint32(unix.SECCOMP_RET_ALLOW)
			r, _, e := unix.Syscall(unix.SYS_SECCOMP, 2 /* SECCOMP_GET_ACTION_AVAIL */, 0, uintptr(unsafe.Pointer(&action)))
			return r, e
		}},
		{"landlock_create_ruleset(VERSION)", passed, sys(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, 1 /* LANDLOCK_CREATE_RULESET_VERSION */)},
	}
	// x86-only and obsolete syscalls, where the architecture has them.
	if nr, ok := native.numbers["iopl"]; ok {
		ps = append(ps, probe{"iopl(0)", refused, sys(uintptr(nr), 0)})
	}
	if nr, ok := native.numbers["ustat"]; ok {
		ps = append(ps, probe{"ustat(0, NULL)", refused, sys(uintptr(nr), 0, 0)})
	}
	return ps
}

// report is what a probe child prints.
type report struct {
	Install string            // Install's error
	Errno   map[string]string // probe name → errno name, "" for success
	Checks  map[string]string // check name → "" or what went wrong

	Seccomp       []string // the Seccomp field of every thread that existed at the end
	NoNewPrivs    []string // the NoNewPrivs field of the same threads
	NewThreads    int      // distinct threads the goroutines below ran on
	NewThreadsSec []string // the Seccomp field each of those saw for itself
}

func child(mode string) int {
	filter := os.Getenv(filterEnv) == "1"
	if mode == "x32" || mode == "exec" {
		// No core file for the expected SIGSYS, whatever core_pattern says.
		unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{})
		unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	}
	var rep report
	if filter {
		if err := Install(); err != nil {
			rep.Install = err.Error()
			if mode != "probe" {
				fmt.Fprintln(os.Stderr, "Install:", err)
				return 3
			}
		}
	}
	switch mode {
	case "x32":
		// getpid through the x32 ABI. Unfiltered it returns the pid, or
		// ENOSYS when the kernel has x32 turned off; filtered it must not
		// return at all.
		r, _, e := unix.RawSyscall(unix.SYS_GETPID|x32Bit, 0, 0, 0)
		fmt.Printf("x32 getpid returned %d, errno %d\n", int(r), e)
		return 0
	case "exec":
		err := syscall.Exec(os.Getenv(helperEnv), []string{"int80"}, os.Environ())
		fmt.Fprintln(os.Stderr, "exec:", err)
		return 3
	case "probe":
	default:
		fmt.Fprintln(os.Stderr, "unknown child mode", mode)
		return 2
	}

	rep.Errno = make(map[string]string)
	for _, p := range probes() {
		_, e := p.call()
		rep.Errno[p.name] = ""
		if e != 0 {
			rep.Errno[p.name] = unix.ErrnoName(e)
		}
	}
	rep.Checks = checks(&rep)
	rep.Seccomp, rep.NoNewPrivs = threadStatus()
	if err := json.NewEncoder(os.Stdout).Encode(rep); err != nil {
		return 2
	}
	return 0
}

// checks exercises what sandboxed programs do all the time.
func checks(rep *report) map[string]string {
	res := make(map[string]string)
	result := func(name string, err error) {
		res[name] = ""
		if err != nil {
			res[name] = err.Error()
		}
	}

	// fork and exec, then wait: clone without namespace flags (vfork-style,
	// as Go's ForkExec does it), execve, wait4.
	result("forkexec /bin/true", func() error {
		pid, err := syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{Env: []string{}})
		if err != nil {
			return err
		}
		var ws syscall.WaitStatus
		if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil {
			return err
		}
		if !ws.Exited() || ws.ExitStatus() != 0 {
			return fmt.Errorf("/bin/true ended with %v", ws)
		}
		return nil
	}())

	// New threads: goroutines locked to their threads all at once force the
	// runtime to clone new ones. Each reads its own status to show the
	// filter reached it.
	result("threads", func() error {
		const n = 8
		var (
			mu    sync.Mutex
			tids  = make(map[int]bool)
			ready sync.WaitGroup
			done  sync.WaitGroup
			hold  = make(chan struct{})
		)
		ready.Add(n)
		done.Add(n)
		for range n {
			go func() {
				defer done.Done()
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				sum := 0
				for i := range 100000 {
					sum += i
				}
				sec := statusField("/proc/thread-self/status", "Seccomp")
				mu.Lock()
				tids[unix.Gettid()] = true
				rep.NewThreadsSec = append(rep.NewThreadsSec, sec)
				mu.Unlock()
				ready.Done()
				<-hold
				_ = sum
			}()
		}
		ready.Wait()
		close(hold)
		done.Wait()
		rep.NewThreads = len(tids)
		if len(tids) != n {
			return fmt.Errorf("%d goroutines locked to threads ran on %d threads", n, len(tids))
		}
		return nil
	}())

	result("create, write, read back, remove a file", func() error {
		f, err := os.CreateTemp("", "codecell-seccomp-*")
		if err != nil {
			return err
		}
		defer os.Remove(f.Name())
		defer f.Close()
		if _, err := f.WriteString("hello"); err != nil {
			return err
		}
		b, err := os.ReadFile(f.Name())
		if err != nil {
			return err
		}
		if string(b) != "hello" {
			return fmt.Errorf("read back %q", b)
		}
		return nil
	}())
	return res
}

// threadStatus returns the Seccomp and NoNewPrivs fields of every thread of
// the process.
func threadStatus() (seccomp, nnp []string) {
	tasks, _ := filepath.Glob("/proc/self/task/*/status")
	for _, t := range tasks {
		seccomp = append(seccomp, statusField(t, "Seccomp"))
		nnp = append(nnp, statusField(t, "NoNewPrivs"))
	}
	return seccomp, nnp
}

func statusField(path, field string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "error: " + err.Error()
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "missing"
}

// runChild runs the test binary in the given mode and returns its stdout
// and how it ended.
func runChild(t *testing.T, mode string, filter bool, env ...string) ([]byte, error) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, self)
	cmd.Dir = t.TempDir() // where a core file would land, were one written
	cmd.Env = append(os.Environ(), childEnv+"="+mode, filterEnv+"=0")
	if filter {
		cmd.Env = append(cmd.Env, filterEnv+"=1")
	}
	cmd.Env = append(cmd.Env, env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if stderr.Len() > 0 {
		t.Logf("%s child (filter %v) stderr:\n%s", mode, filter, stderr.Bytes())
	}
	return out, err
}

func probeChild(t *testing.T, filter bool) report {
	t.Helper()
	out, err := runChild(t, "probe", filter)
	if err != nil {
		t.Fatalf("probe child (filter %v): %v", filter, err)
	}
	var rep report
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("probe child (filter %v) printed %q: %v", filter, out, err)
	}
	return rep
}

func TestInstall(t *testing.T) {
	control := probeChild(t, false)
	filtered := probeChild(t, true)
	if filtered.Install != "" {
		t.Fatalf("Install: %s", filtered.Install)
	}

	proven := 0
	for _, p := range probes() {
		c, f := control.Errno[p.name], filtered.Errno[p.name]
		show := func(e string) string {
			if e == "" {
				return "success"
			}
			return e
		}
		switch p.want {
		case refused, nosys:
			want := "EPERM"
			if p.want == nosys {
				want = "ENOSYS"
			}
			if f != want {
				t.Errorf("%s: got %s with the filter, want %s", p.name, show(f), want)
				continue
			}
			if c == want {
				// The kernel refuses it on its own here (no privilege, a
				// sysctl): this probe cannot tell the filter's answer apart.
				t.Logf("%s: %s even without the filter; not evidence of the filter", p.name, want)
				continue
			}
			proven++
			t.Logf("%s: %s without the filter, %s with it", p.name, show(c), f)
		case passed:
			if f != c {
				t.Errorf("%s: got %s with the filter, %s without; want the same", p.name, show(f), show(c))
			}
		}
	}
	if proven == 0 {
		t.Error("no denied probe got another answer without the filter: nothing shows the filter at work")
	}

	for name, msg := range filtered.Checks {
		if msg != "" {
			t.Errorf("with the filter, %s: %s", name, msg)
		}
		if control.Checks[name] != "" {
			t.Errorf("without the filter, %s: %s", name, control.Checks[name])
		}
	}
	if len(filtered.Checks) == 0 {
		t.Error("the child ran no checks")
	}

	// TSYNC: every thread, including those the runtime started before
	// Install, has the filter (mode 2) and no_new_privs; so do threads
	// created afterwards.
	for i, s := range filtered.Seccomp {
		if s != "2" || filtered.NoNewPrivs[i] != "1" {
			t.Errorf("a thread has Seccomp %s, NoNewPrivs %s; want 2 and 1", s, filtered.NoNewPrivs[i])
		}
	}
	for _, s := range filtered.NewThreadsSec {
		if s != "2" {
			t.Errorf("a thread created after Install has Seccomp %s, want 2", s)
		}
	}
	for _, s := range control.Seccomp {
		if s != "0" {
			t.Errorf("the control child has a thread with Seccomp %s, want 0", s)
		}
	}
	if len(filtered.Seccomp) < 2 {
		t.Errorf("the child had %d threads; the TSYNC check needs several", len(filtered.Seccomp))
	}
	t.Logf("%d threads filtered, %d created after Install", len(filtered.Seccomp), filtered.NewThreads)
}

// wantSIGSYS fails unless err says the child was killed by SIGSYS.
func wantSIGSYS(t *testing.T, what string, out []byte, err error) {
	t.Helper()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("%s: got %v (output %q), want death by SIGSYS", what, err, out)
	}
	ws := ee.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGSYS {
		t.Fatalf("%s: ended with %v (output %q), want death by SIGSYS", what, ws, out)
	}
}

func TestX32Killed(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("x32 is an x86_64 ABI")
	}
	// Control: the same child without the filter returns from the call.
	out, err := runChild(t, "x32", false)
	if err != nil {
		t.Fatalf("x32 child without the filter: %v", err)
	}
	t.Logf("without the filter: %s", bytes.TrimSpace(out))

	out, err = runChild(t, "x32", true)
	wantSIGSYS(t, "x32 getpid under the filter", out, err)
}

func TestI386Killed(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		// On arm64 the foreign ABI is AArch32, which most arm64 CPUs and
		// kernels no longer run; the architecture check is the same code
		// and TestFilterVerdicts covers it.
		t.Skip("int $0x80 is x86")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build the int $0x80 helper:", err)
	}
	helper := filepath.Join(t.TempDir(), "int80")
	build := exec.Command(gobin, "build", "-o", helper, ".")
	build.Dir = filepath.Join("testdata", "int80")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the helper: %v\n%s", err, out)
	}

	// Control: unfiltered, int $0x80 getpid returns the helper's pid. A
	// kernel without IA32 emulation faults instead, and then there is no
	// i386 path to close.
	cmd := exec.Command(helper)
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("int $0x80 fails even without the filter (%v): no IA32 emulation in this kernel", err)
	}
	if got, want := strings.TrimSpace(string(out)), fmt.Sprint(cmd.Process.Pid); got != want {
		t.Fatalf("unfiltered int $0x80 getpid printed %q, want %q", got, want)
	}

	out, err = runChild(t, "exec", true, helperEnv+"="+helper)
	wantSIGSYS(t, "int $0x80 getpid under the filter", out, err)
}
