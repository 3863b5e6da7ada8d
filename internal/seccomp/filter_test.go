//go:build linux && (amd64 || arm64)

package seccomp

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// These tests run the program in a small classic-BPF interpreter, against a
// model of the intended policy written here from the brief's numbers rather
// than from the generator's inputs, for every syscall number and many
// argument values. The tests in seccomp_test.go run it in the kernel.

// seccompData mirrors struct seccomp_data.
type seccompData struct {
	nr   int32
	arch uint32
	args [6]uint64
}

func (d seccompData) bytes() []byte {
	b := make([]byte, 64)
	binary.LittleEndian.PutUint32(b[0:], uint32(d.nr))
	binary.LittleEndian.PutUint32(b[4:], d.arch)
	for i, a := range d.args {
		binary.LittleEndian.PutUint64(b[16+8*i:], a)
	}
	return b
}

// interpret runs prog the way the kernel's seccomp would, for the subset of
// classic BPF the generator emits, and fails on anything else.
func interpret(prog []unix.SockFilter, d seccompData) (uint32, error) {
	data := d.bytes()
	var a uint32
	for pc := 0; pc < len(prog); pc++ {
		in := prog[pc]
		switch in.Code {
		case unix.BPF_LD | unix.BPF_W | unix.BPF_ABS:
			if in.K%4 != 0 || in.K+4 > uint32(len(data)) {
				return 0, fmt.Errorf("pc %d: load at %d", pc, in.K)
			}
			a = binary.LittleEndian.Uint32(data[in.K:])
		case unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K:
			if a == in.K {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		case unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K:
			if a&in.K != 0 {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		case unix.BPF_RET | unix.BPF_K:
			return in.K, nil
		default:
			return 0, fmt.Errorf("pc %d: unexpected opcode %#x", pc, in.Code)
		}
	}
	return 0, fmt.Errorf("ran off the end of the program")
}

// mustDeny is the brief's list: syscalls refused whatever the arguments,
// where the architecture has them.
var mustDeny = []string{
	"io_uring_setup", "io_uring_enter", "io_uring_register", "userfaultfd", "bpf",
	"perf_event_open", "add_key", "request_key", "keyctl", "ptrace", "process_vm_readv",
	"process_vm_writev", "kcmp", "pidfd_getfd", "mount", "umount2", "pivot_root", "chroot",
	"move_mount", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
	"setns", "unshare", "kexec_load", "kexec_file_load", "init_module", "finit_module",
	"delete_module", "reboot", "swapon", "swapoff", "acct", "quotactl", "quotactl_fd",
	"syslog", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "vhangup",
	"iopl", "ioperm", "lookup_dcookie", "name_to_handle_at", "open_by_handle_at",
	"nfsservctl", "uselib", "ustat", "sysfs", "_sysctl", "get_kernel_syms", "query_module",
	"create_module", "fanotify_init", "mbind", "set_mempolicy", "move_pages", "migrate_pages",
}

// mustAllow are syscalls the sandboxed code needs, or that only restrict it.
var mustAllow = []string{
	"read", "write", "openat", "close", "mmap", "execve", "exit_group", "wait4", "fork",
	"vfork", "socket", "connect", "getpid", "futex", "rt_sigaction", "prctl", "seccomp",
	"landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self", "memfd_create",
	"pidfd_open", "rseq", "arch_prctl", "modify_ldt",
}

func TestDenied(t *testing.T) {
	names := Denied()
	if !slices.IsSorted(names) {
		t.Errorf("Denied() is not sorted: %v", names)
	}
	if len(slices.Compact(slices.Clone(names))) != len(names) {
		t.Errorf("Denied() has duplicates: %v", names)
	}
	for _, name := range mustDeny {
		if slices.Contains(native.absent, name) {
			continue
		}
		if !slices.Contains(names, name) {
			t.Errorf("Denied() lacks %s", name)
		}
	}
	for _, name := range append(slices.Clone(mustAllow), "clone", "ioctl", "personality", "socket") {
		if slices.Contains(names, name) {
			t.Errorf("Denied() lists %s", name)
		}
	}
	if !slices.Contains(names, "clone3") {
		t.Error("Denied() lacks clone3")
	}
	t.Logf("%s: %d syscalls denied outright", native.name, len(names))
}

func TestFilterShape(t *testing.T) {
	prog, err := Filter()
	if err != nil {
		t.Fatal(err)
	}
	if len(prog) > maxInsns {
		t.Fatalf("%d instructions, over the kernel's limit of %d", len(prog), maxInsns)
	}
	for pc, in := range prog {
		if in.Code&0x07 == unix.BPF_JMP {
			for _, off := range []uint8{in.Jt, in.Jf} {
				if pc+1+int(off) >= len(prog) {
					t.Errorf("pc %d: jump past the end", pc)
				}
			}
		}
	}
	if last := prog[len(prog)-1]; last.Code != unix.BPF_RET|unix.BPF_K || last.K != unix.SECCOMP_RET_ALLOW {
		t.Errorf("the program does not end in ret ALLOW: %+v", last)
	}
	t.Logf("%s: %d instructions", native.name, len(prog))
}

// model is the intended verdict, written independently of the generator.
func model(d seccompData, names map[uint32]string, deny []string) uint32 {
	const (
		allow = unix.SECCOMP_RET_ALLOW
		kill  = unix.SECCOMP_RET_KILL_PROCESS
		eperm = unix.SECCOMP_RET_ERRNO | 1
		enosy = unix.SECCOMP_RET_ERRNO | 38
	)
	if d.arch != native.audit {
		return kill
	}
	nr := uint32(d.nr)
	if native.name == "amd64" && nr&0x40000000 != 0 && nr != 0xffffffff {
		return kill
	}
	lo := func(i int) uint32 { return uint32(d.args[i]) }
	switch name := names[nr]; name {
	case "ioctl":
		if lo(1) == 0x5412 || lo(1) == 0x541c {
			return eperm
		}
		return allow
	case "clone":
		if lo(0)&0x7e020000 != 0 {
			return eperm
		}
		return allow
	case "personality":
		if slices.Contains([]uint32{0, 8, 0x20000, 0x20008, 0xffffffff}, lo(0)) {
			return allow
		}
		return eperm
	case "socket":
		if lo(0) == 40 { // AF_VSOCK
			return eperm
		}
		return allow
	case "clone3":
		return enosy
	case "":
		return allow
	default:
		if slices.Contains(deny, name) {
			return eperm
		}
		return allow
	}
}

func TestFilterVerdicts(t *testing.T) {
	prog, err := Filter()
	if err != nil {
		t.Fatal(err)
	}
	names := make(map[uint32]string)
	for name, nr := range native.numbers {
		names[nr] = name
	}
	deny := Denied()

	interesting := []uint64{
		0, 17, 0x80, 0xff, 0x5412, 0x541c, 0x1_0000_5412, 0xffff_ffff_0000_541c, 8, 0x20000,
		0x20008, 0xffffffff, 0x0040000, 0x0400000, 0x1_0000_0000, 0xffff_ffff_ffff_ffff,
		unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND | unix.CLONE_THREAD,
		unix.CLONE_VFORK | unix.CLONE_VM | 17, unix.CLONE_NEWTIME | 17,
		unix.CLONE_NEWNS, unix.CLONE_NEWUTS, unix.CLONE_NEWIPC, unix.CLONE_NEWUSER,
		unix.CLONE_NEWPID, unix.CLONE_NEWNET, unix.CLONE_NEWCGROUP,
		0xffff_ffff_0000_0011, uint64(unix.CLONE_NEWUSER) << 32,
	}
	rng := rand.New(rand.NewPCG(1, 2))
	check := func(d seccompData) {
		t.Helper()
		got, err := interpret(prog, d)
		if err != nil {
			t.Fatalf("nr %d: %v", d.nr, err)
		}
		if want := model(d, names, deny); got != want {
			t.Errorf("nr %d (%s) arch %#x args %#x: got %#x, want %#x", d.nr, names[uint32(d.nr)], d.arch, d.args, got, want)
		}
	}

	nrs := []int32{-1, 0x40000000, 0x40000000 | 39, 0x40000000 | 512, 0x7fffffff, -2}
	for nr := int32(0); nr < 1024; nr++ {
		nrs = append(nrs, nr)
	}
	for _, nr := range nrs {
		for _, v := range interesting {
			for _, i := range []int{0, 1} {
				d := seccompData{nr: nr, arch: native.audit}
				d.args[i] = v
				check(d)
			}
		}
		for range 8 {
			d := seccompData{nr: nr, arch: native.audit}
			for i := range d.args {
				d.args[i] = rng.Uint64()
			}
			check(d)
		}
		// Foreign ABIs die whatever the number.
		for _, arch := range []uint32{unix.AUDIT_ARCH_I386, unix.AUDIT_ARCH_ARM, unix.AUDIT_ARCH_X86_64, unix.AUDIT_ARCH_AARCH64, 0} {
			check(seccompData{nr: nr, arch: arch})
		}
	}

	// Spot checks of the model itself, so that a wrong model cannot hide a
	// wrong program.
	verdict := func(name string, args ...uint64) uint32 {
		nr, ok := native.numbers[name]
		if name == "getpid" {
			nr, ok = unix.SYS_GETPID, true // in no rule, so not in the table
		}
		if !ok {
			t.Fatalf("no number for %s", name)
		}
		d := seccompData{nr: int32(nr), arch: native.audit}
		copy(d.args[:], args)
		got, err := interpret(prog, d)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	for _, c := range []struct {
		name string
		args []uint64
		want uint32
	}{
		{"clone", []uint64{17}, unix.SECCOMP_RET_ALLOW},                            // fork
		{"clone", []uint64{unix.CLONE_NEWTIME | 17}, unix.SECCOMP_RET_ALLOW},       // exit signal 0x91, not a namespace
		{"clone", []uint64{unix.CLONE_NEWUSER | 17}, unix.SECCOMP_RET_ERRNO | 1},   // new user namespace
		{"clone", []uint64{1<<32 | unix.CLONE_NEWNET}, unix.SECCOMP_RET_ERRNO | 1}, // high word changes nothing
		{"ioctl", []uint64{0, 0x5412}, unix.SECCOMP_RET_ERRNO | 1},
		{"ioctl", []uint64{0, 0xdead_beef_0000_5412}, unix.SECCOMP_RET_ERRNO | 1}, // CVE-2019-10063
		{"ioctl", []uint64{0, 0x5401}, unix.SECCOMP_RET_ALLOW},                    // TCGETS
		{"personality", []uint64{0xffffffff}, unix.SECCOMP_RET_ALLOW},
		{"personality", []uint64{0x0040000}, unix.SECCOMP_RET_ERRNO | 1}, // ADDR_NO_RANDOMIZE
		{"personality", []uint64{0x0400000}, unix.SECCOMP_RET_ERRNO | 1}, // READ_IMPLIES_EXEC
		{"clone3", nil, unix.SECCOMP_RET_ERRNO | 38},
		{"socket", []uint64{unix.AF_VSOCK, unix.SOCK_STREAM}, unix.SECCOMP_RET_ERRNO | 1},
		{"socket", []uint64{1<<32 | unix.AF_VSOCK, unix.SOCK_STREAM}, unix.SECCOMP_RET_ERRNO | 1},
		{"socket", []uint64{unix.AF_UNIX, unix.SOCK_STREAM}, unix.SECCOMP_RET_ALLOW},
		{"keyctl", nil, unix.SECCOMP_RET_ERRNO | 1},
		{"getpid", nil, unix.SECCOMP_RET_ALLOW},
	} {
		if got := verdict(c.name, c.args...); got != c.want {
			t.Errorf("%s%#x: got %#x, want %#x", c.name, c.args, got, c.want)
		}
	}
}
