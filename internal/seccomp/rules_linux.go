//go:build linux

package seccomp

import "golang.org/x/sys/unix"

// denied lists the syscalls refused with EPERM whatever their arguments,
// grouped by the attack each group closes. Names are the kernel's; a name
// that does not exist on an architecture is listed in that architecture's
// absent set (arch_*.go) and skipped there, so a misspelt name is an error
// rather than a silent hole.
//
// The list holds every syscall Docker's default profile (moby
// profiles/seccomp/default_linux.go) refuses to a container that has no
// extra capabilities, as of the syscall tables in golang.org/x/sys (through
// open_tree_attr, 467), plus the ones codecell refuses although Docker
// allows them: ptrace, process_vm_readv, process_vm_writev,
// name_to_handle_at, adjtimex and clock_adjtime.
//
// Deliberately allowed: seccomp and the landlock_* calls, which only
// restrict the caller further. socket is filtered only by family (see
// deniedFamilies): the empty network namespace is what cuts the network.
var denied = [][]string{
	// io_uring performs reads, writes, sends and (on newer kernels) opens
	// from a kernel worker, out of seccomp's sight: a filter over syscalls
	// cannot see what a submission queue asks for. It has also been one of
	// the richest sources of local privilege escalation since 2020
	// (CVE-2021-41073, CVE-2022-29582, CVE-2023-2598, CVE-2024-0582);
	// Google turned it off for ChromeOS, Android apps and its production
	// servers, and Docker denies it since 25.0.
	{"io_uring_setup", "io_uring_enter", "io_uring_register"},

	// The eBPF verifier and the perf subsystem are large, complex and
	// reachable from syscalls; their bugs have repeatedly given arbitrary
	// kernel read/write (bpf: CVE-2017-16995, CVE-2021-3490, CVE-2023-2163;
	// perf: CVE-2013-2094, CVE-2022-1729). perf also exposes timing side
	// channels across the whole machine.
	{"bpf", "perf_event_open"},

	// userfaultfd lets a process pause the kernel in the middle of a copy
	// from user memory, turning narrow kernel races into reliable exploits;
	// it is a standard step in public exploit chains.
	{"userfaultfd"},

	// Kernel keyrings are not namespaced: keys are shared by every process
	// of a uid on the host, so sandboxes mapped to one uid would share
	// them, and the keyring code has had its own escalations
	// (CVE-2016-0728, a refcount overflow in keyctl).
	{"add_key", "request_key", "keyctl"},

	// Access to another process: reading or writing its memory (ptrace,
	// process_vm_*), steering its memory management (process_madvise),
	// comparing or stealing its open files (kcmp, pidfd_getfd). Inside the
	// sandbox's pid namespace the sandbox's own init is such a process.
	// ptrace also rewrote syscalls after seccomp had checked them on
	// kernels before 4.8, and PTRACE_TRACEME's credential handling gave
	// root (CVE-2019-13272).
	{"ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "kcmp", "pidfd_getfd"},

	// The filesystem view built by init (pivot_root into read-only binds,
	// the workspace at /workspace) is the sandbox's boundary: the code must
	// not rearrange it. The new mount API (fsopen, fsconfig, …) also put
	// heap overflows in reach of anyone holding CAP_SYS_ADMIN in a user
	// namespace (CVE-2022-0185).
	{
		"mount", "umount2", "pivot_root", "chroot",
		"move_mount", "open_tree", "open_tree_attr",
		"fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
	},

	// New namespaces make the caller root of a user namespace, which
	// unlocks large parts of the kernel written for real root: netfilter,
	// filesystem mounting, cgroup files (CVE-2022-0492, CVE-2023-32233,
	// CVE-2022-0185 again). setns would move into a namespace reachable
	// through an inherited fd. clone's and clone3's namespace flags are
	// handled separately (see cloneRule). sethostname and setdomainname are
	// harmless in the sandbox's own UTS namespace, but nothing in it needs
	// them and Docker denies them.
	{"unshare", "setns", "sethostname", "setdomainname"},

	// Host-global state that no namespace covers: the running kernel and
	// its modules, the machine's power, swap, process accounting, disk
	// quotas, and the system clock (only the monotonic and boot clocks are
	// namespaced, by time namespaces). adjtimex and clock_adjtime also only
	// read the clock when called without CAP_SYS_TIME, and Docker allows
	// them for that; refusing them costs ntp_gettime and nothing else.
	{
		"kexec_load", "kexec_file_load",
		"init_module", "finit_module", "delete_module",
		"reboot", "swapon", "swapoff", "acct", "quotactl", "quotactl_fd",
		"settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
	},

	// syslog reads the kernel log, which leaks kernel addresses and so
	// defeats KASLR, and other tenants' messages.
	{"syslog"},

	// iopl and ioperm grant raw access to I/O ports, that is to hardware
	// (x86 only). vhangup hangs up the controlling terminal for every
	// process using it.
	{"iopl", "ioperm", "vhangup"},

	// open_by_handle_at opens any inode of a mounted filesystem from a
	// handle, ignoring the caller's mount and chroot view: the 2014
	// "shocker" Docker breakout. name_to_handle_at only produces handles;
	// Docker allows it, codecell refuses it because handles are the half
	// of the pair nothing in the sandbox needs.
	{"name_to_handle_at", "open_by_handle_at"},

	// NUMA placement: set_mempolicy, mbind and friends change how the
	// kernel allocates memory, migrate_pages and move_pages act on other
	// processes' pages. Docker allows them only with CAP_SYS_NICE.
	{
		"mbind", "set_mempolicy", "get_mempolicy", "set_mempolicy_home_node",
		"migrate_pages", "move_pages",
	},

	// Kernel internals Docker allows only with CAP_SYS_ADMIN: whole-
	// filesystem event monitoring, oprofile's dcookies, and the LSM
	// attribute interface.
	{
		"fanotify_init", "lookup_dcookie",
		"lsm_get_self_attr", "lsm_set_self_attr", "lsm_list_modules",
	},

	// Obsolete interfaces, removed or never implemented in current kernels
	// (they answer ENOSYS there), refused so that an older kernel that still
	// has them is not exposed: uselib had a race to root (CVE-2004-1235),
	// _sysctl was the binary sysctl interface, the rest are the
	// pre-2.6 module calls and reserved slots.
	{
		"uselib", "ustat", "sysfs", "_sysctl", "nfsservctl",
		"create_module", "get_kernel_syms", "query_module",
		"afs_syscall", "getpmsg", "putpmsg", "security", "tuxcall", "vserver",
	},
}

// Syscalls refused only for some arguments, or with another errno. They
// come first in the program because the kernel cannot cache a verdict that
// depends on arguments (ioctl is among the most frequent syscalls); every
// other syscall's verdict is constant and, since Linux 5.11, cached per
// syscall number without running the filter at all.
const (
	sysIoctl       = "ioctl"
	sysClone       = "clone"
	sysPersonality = "personality"
	sysClone3      = "clone3"
	sysSocket      = "socket"
)

// deniedFamilies are the socket families that cross the sandbox's empty
// network namespace. vsock, the virtual machine's channel to its
// hypervisor, is not namespaced (before Linux 7.0, and off by default
// after): in a VM whose host listens on vsock ports, such as Firecracker's
// agents, a socket(AF_VSOCK) from inside any network namespace reaches
// them. Docker refuses it too.
var deniedFamilies = []uint32{unix.AF_VSOCK}

// nsFlags are the clone flags that create a namespace, as in Docker's clone
// rule (0x7e020000). CLONE_NEWTIME (0x80) is not among them: in clone() the
// low byte of the flags is the exit signal (CSIGNAL), which the kernel
// separates before it looks at the flags, so 0x80 there means signal 128 and
// never a time namespace. Only clone3 and unshare can ask for CLONE_NEWTIME,
// and both are refused whole. Testing 0x80 here would also get fork wrong
// for any exit signal with that bit.
const nsFlags = unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
	unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWCGROUP

// ttyInjection are the terminal ioctls that push input into a terminal. A
// sandboxed process that shares a terminal with its parent's shell can type
// commands into that shell, which runs them after the sandbox exits, outside
// it: TIOCSTI is CVE-2017-5226 (bubblewrap) and CVE-2016-7545 (SELinux
// sandbox); TIOCLINUX's selection subcommands paste the same way on a
// virtual console (restricted to CAP_SYS_ADMIN only since Linux 6.7).
var ttyInjection = []uint32{unix.TIOCSTI, unix.TIOCLINUX}

// Personalities, from include/uapi/linux/personality.h.
const (
	perLinux       = 0x0000
	perLinux32     = 0x0008
	uname26        = 0x0020000
	personalityGet = 0xffffffff // query: change nothing, return the current one
)

// allowedPersonalities mirrors Docker's personality rule: the plain Linux
// personalities and the query. Every other value sets a flag that weakens
// the process: ADDR_NO_RANDOMIZE turns off ASLR for the next exec,
// READ_IMPLIES_EXEC makes readable memory executable, MMAP_PAGE_ZERO maps
// address 0 and so turns kernel NULL dereferences into code execution
// (CVE-2009-1895 used personality to do it through a setuid exec).
var allowedPersonalities = []uint32{
	perLinux, perLinux32, uname26, uname26 | perLinux32, personalityGet,
}
