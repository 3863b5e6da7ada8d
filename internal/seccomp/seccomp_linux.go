//go:build linux

package seccomp

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"
)

// arch is what the filter needs to know about one architecture.
type arch struct {
	name  string // GOARCH
	audit uint32 // AUDIT_ARCH_* the kernel reports for native syscalls
	x32   bool   // whether numbers with x32Bit set reach another ABI

	// numbers maps syscall names to numbers for every name in denied and
	// for the argument-filtered syscalls; absent lists the names of denied
	// that this architecture does not have.
	numbers map[string]uint32
	absent  []string
}

// x32Bit is __X32_SYSCALL_BIT (arch/x86/include/uapi/asm/unistd.h).
const x32Bit = 0x40000000

// Offsets into struct seccomp_data (include/uapi/linux/seccomp.h):
//
//	struct seccomp_data { int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]; };
const (
	offNr   = 0
	offArch = 4
	offArgs = 16
)

// argLow is the offset of the low 32 bits of syscall argument i. Classic
// BPF loads 32-bit words; both supported architectures are little-endian,
// so an argument's low word comes first.
func argLow(i int) uint32 { return offArgs + 8*uint32(i) }

// The filter's verdicts. SECCOMP_RET_KILL_PROCESS needs Linux 4.14; older
// kernels read it as SECCOMP_RET_KILL_THREAD, which still never runs the
// syscall.
const (
	retAllow  = unix.SECCOMP_RET_ALLOW
	retKill   = unix.SECCOMP_RET_KILL_PROCESS
	retEPERM  = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	retENOSYS = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
)

// maxInsns is BPF_MAXINSNS, the kernel's limit on one filter's length.
const maxInsns = 4096

// Filter returns the BPF program for the running architecture (GOARCH amd64
// and arm64; other architectures get an error that says so).
//
// The program, in order:
//  1. kills the process when the syscall comes through another ABI than
//     the native one (i386 int 0x80 or x32 on x86_64, AArch32 on arm64),
//     whose numbers mean other syscalls;
//  2. filters ioctl, clone and personality on their arguments, and answers
//     clone3 with ENOSYS;
//  3. returns EPERM for each syscall in Denied;
//  4. allows everything else.
func Filter() ([]unix.SockFilter, error) {
	if native == nil {
		return nil, fmt.Errorf("seccomp: no filter for GOARCH=%s (only amd64 and arm64 have one)", runtime.GOARCH)
	}
	return build(native)
}

// Denied lists the names of the syscalls the filter refuses whatever their
// arguments, sorted: all get EPERM except clone3, which gets ENOSYS. The
// syscalls refused only for some arguments (clone with namespace flags,
// ioctl TIOCSTI and TIOCLINUX, personality other than the plain Linux
// ones) are not listed. On an unsupported architecture Denied is empty.
func Denied() []string {
	if native == nil {
		return nil
	}
	var names []string
	for _, group := range denied {
		for _, name := range group {
			if _, ok := native.numbers[name]; ok {
				names = append(names, name)
			}
		}
	}
	names = append(names, sysClone3)
	slices.Sort(names)
	return names
}

// Install sets no_new_privs and loads Filter() for every thread of the
// calling process with seccomp(SECCOMP_SET_MODE_FILTER,
// SECCOMP_FILTER_FLAG_TSYNC). The filter stays for the life of the process
// and passes to every child and across execve; it cannot be removed.
//
// If the seccomp syscall is unavailable (Linux before 3.17), Install falls
// back to prctl(PR_SET_SECCOMP), which filters the calling thread only. A
// caller that may run on such a kernel must call Install from a goroutine
// locked to its thread with runtime.LockOSThread, and execve from that same
// goroutine, so that the program it starts is the one filtered. With TSYNC
// (every kernel since 3.17) no locking is needed.
//
// Call it as the last step before execve, as runc does ("as close to
// execve as possible"): every syscall the caller makes afterwards is
// filtered too, so mounting, pivot_root and dropping capabilities must come
// first. no_new_privs stays set even when Install then fails.
func Install() error {
	prog, err := Filter()
	if err != nil {
		return err
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}

	// no_new_privs is per thread and so is the thread that calls seccomp:
	// both calls must run on the same thread, or seccomp sees a thread
	// without no_new_privs and refuses (EACCES) unless the caller holds
	// CAP_SYS_ADMIN. TSYNC then copies no_new_privs to the other threads
	// along with the filter.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	// no_new_privs makes execve unable to grant privileges (setuid bits,
	// file capabilities), which is what lets an unprivileged process
	// install a filter: otherwise it could confuse a setuid program by
	// filtering it.
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("seccomp: setting no_new_privs: %w", err)
	}

	tid, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	switch {
	case errno == 0 && tid == 0:
		return nil
	case errno == 0:
		// TSYNC answers with the id of a thread it could not move to the
		// new filter; nothing was installed.
		return fmt.Errorf("seccomp: thread %d could not be synchronized to the filter", tid)
	case errno == unix.ENOSYS:
		// Before Linux 3.17: only this thread can be filtered. A raw
		// Syscall, not unix.Prctl, so that &fprog is kept valid for the
		// duration of the call.
		_, _, errno := unix.Syscall(unix.SYS_PRCTL, unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER,
			uintptr(unsafe.Pointer(&fprog)))
		runtime.KeepAlive(prog)
		if errno != 0 {
			return fmt.Errorf("seccomp: prctl(PR_SET_SECCOMP): %w", errno)
		}
		return nil
	case errno == unix.EINVAL:
		return fmt.Errorf("seccomp: the kernel refused the filter (is CONFIG_SECCOMP_FILTER set?): %w", errno)
	default:
		return fmt.Errorf("seccomp: installing the filter: %w", errno)
	}
}

// build generates the program for a. Every block returns on all of its
// paths, and a syscall that does not match a block jumps over it with A
// still holding the syscall number, so every jump stays within one small
// block: no offset comes near the 255 that classic BPF's 8-bit jump fields
// can hold, however long the list grows.
func build(a *arch) ([]unix.SockFilter, error) {
	num := func(name string) (uint32, bool, error) {
		if nr, ok := a.numbers[name]; ok {
			return nr, true, nil
		}
		if slices.Contains(a.absent, name) {
			return 0, false, nil
		}
		return 0, false, fmt.Errorf("seccomp: no syscall number for %q on %s", name, a.name)
	}

	var p []unix.SockFilter

	// A syscall made through a foreign ABI carries that ABI's numbers:
	// 2 is fork in the i386 table and open in the x86_64 one. A deny list
	// keyed on native numbers means nothing there, so the foreign ABIs go
	// before anything else, and kill rather than fail: no program codecell
	// runs uses them, and one that does is probing.
	p = append(p,
		stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, offArch),
		jump(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, a.audit, 1, 0),
		stmt(unix.BPF_RET|unix.BPF_K, retKill),
		stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, offNr),
	)
	if a.x32 {
		// -1 is not a syscall but "no syscall": the kernel answers ENOSYS,
		// and it is not x32 either (the kernel subtracts the bit and finds
		// no such x32 syscall). libseccomp lets it through too.
		p = append(p,
			jump(unix.BPF_JMP|unix.BPF_JSET|unix.BPF_K, x32Bit, 0, 2),
			jump(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, 0xffffffff, 1, 0),
			stmt(unix.BPF_RET|unix.BPF_K, retKill),
		)
	}

	// Argument filters. Each argument is 64 bits and BPF sees 32 at a time;
	// all four compare the low word only, on purpose: the kernel itself
	// truncates these arguments to 32 bits (ioctl's cmd, personality's
	// persona and socket's family are int or unsigned int; clone takes lower_32_bits of its flags), so
	// the high word cannot change what the call does. Requiring it to be
	// zero would instead let a caller slip past the rule by setting it:
	// CVE-2019-10063, flatpak's TIOCSTI filter, was exactly that.
	type rule struct {
		name string
		body []unix.SockFilter
	}
	rules := []rule{
		{sysIoctl, argIn(1, ttyInjection, retEPERM, retAllow)},
		{sysClone, argAnyBit(0, nsFlags, retEPERM, retAllow)},
		{sysPersonality, argIn(0, allowedPersonalities, retAllow, retEPERM)},
		{sysSocket, argIn(0, deniedFamilies, retEPERM, retAllow)},
		// clone3 passes its flags in a struct in memory, which seccomp
		// cannot read, so its namespace flags cannot be filtered. ENOSYS,
		// not EPERM: glibc (2.34+) tries clone3 first for new threads and
		// posix_spawn and falls back to clone, whose flags are registers
		// the rule above reads, only when clone3 answers ENOSYS. Docker's
		// and Podman's default profiles do the same.
		{sysClone3, []unix.SockFilter{stmt(unix.BPF_RET|unix.BPF_K, retENOSYS)}},
	}
	seen := make(map[string]bool)
	for _, r := range rules {
		nr, ok, err := num(r.name)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("seccomp: %s is needed on %s", r.name, a.name)
		}
		seen[r.name] = true
		if p, err = whenSyscall(p, nr, r.body); err != nil {
			return nil, err
		}
	}

	deny := []unix.SockFilter{stmt(unix.BPF_RET|unix.BPF_K, retEPERM)}
	for _, group := range denied {
		for _, name := range group {
			if seen[name] {
				return nil, fmt.Errorf("seccomp: %s is listed twice", name)
			}
			seen[name] = true
			nr, ok, err := num(name)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
			if p, err = whenSyscall(p, nr, deny); err != nil {
				return nil, err
			}
		}
	}
	p = append(p, stmt(unix.BPF_RET|unix.BPF_K, retAllow))

	if len(p) > maxInsns {
		return nil, fmt.Errorf("seccomp: the filter has %d instructions, more than the kernel's %d", len(p), maxInsns)
	}
	return p, nil
}

// whenSyscall appends a block to p that runs body when A, the syscall
// number, equals nr, and otherwise jumps over body with A intact. body must
// end in a return on every path, since it may change A.
func whenSyscall(p []unix.SockFilter, nr uint32, body []unix.SockFilter) ([]unix.SockFilter, error) {
	if len(body) == 0 || len(body) > 255 || body[len(body)-1].Code != unix.BPF_RET|unix.BPF_K {
		return nil, errors.New("seccomp: malformed rule body")
	}
	p = append(p, jump(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, nr, 0, uint8(len(body))))
	return append(p, body...), nil
}

// argIn returns a rule body: in when the low word of argument arg equals
// one of values, out otherwise.
//
//	ld  args[arg].lo
//	jeq values[0] → in      (one per value)
//	ret out
//	in: ret in
func argIn(arg int, values []uint32, in, out uint32) []unix.SockFilter {
	n := len(values)
	b := []unix.SockFilter{stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, argLow(arg))}
	for i, v := range values {
		// From jump i (at 1+i) to "ret in" (at 2+n): n-i forward.
		b = append(b, jump(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, v, uint8(n-i), 0))
	}
	return append(b, stmt(unix.BPF_RET|unix.BPF_K, out), stmt(unix.BPF_RET|unix.BPF_K, in))
}

// argAnyBit returns a rule body: set when the low word of argument arg has
// any bit of mask, clear otherwise.
func argAnyBit(arg int, mask, set, clear uint32) []unix.SockFilter {
	return []unix.SockFilter{
		stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, argLow(arg)),
		jump(unix.BPF_JMP|unix.BPF_JSET|unix.BPF_K, mask, 0, 1),
		stmt(unix.BPF_RET|unix.BPF_K, set),
		stmt(unix.BPF_RET|unix.BPF_K, clear),
	}
}

func stmt(code uint16, k uint32) unix.SockFilter {
	return unix.SockFilter{Code: code, K: k}
}

func jump(code uint16, k uint32, jt, jf uint8) unix.SockFilter {
	return unix.SockFilter{Code: code, Jt: jt, Jf: jf, K: k}
}
