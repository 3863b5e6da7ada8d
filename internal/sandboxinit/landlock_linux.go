//go:build linux

package sandboxinit

import (
	"errors"
	"fmt"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// LandlockABI returns the kernel's Landlock ABI version, or 0 when Landlock
// is not available (not built in, or not enabled at boot).
func LandlockABI() int {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0
	}
	return int(v)
}

// Filesystem access rights, by the ABI that introduced them.
const (
	fsRead = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR
	fsABI1 = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_READ_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_FILE |
		unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_DIR | unix.LANDLOCK_ACCESS_FS_MAKE_REG |
		unix.LANDLOCK_ACCESS_FS_MAKE_SOCK | unix.LANDLOCK_ACCESS_FS_MAKE_FIFO | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_SYM
	// Rights that apply to files, the only ones a rule on a file may hold.
	fsFile = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_READ_FILE |
		unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	makeDevices = unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK
)

var errLandlockUnavailable = errors.New("landlock is not available in this kernel")

func fsHandled(abi int) uint64 {
	h := uint64(fsABI1)
	if abi >= 2 {
		h |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	if abi >= 3 {
		h |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	if abi >= 5 {
		h |= unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	}
	return h
}

// LandlockRules is what the sandbox's processes may touch: read and execute
// everywhere in their (already minimal) view, write only in their writable
// directories and to the device files.
type LandlockRules struct {
	Writable   []string // directories: everything but making device nodes
	Devices    []string // device files: read, write, ioctl
	Executable []string // files outside the view that may still be executed
	// ConnectPorts are the TCP ports the sandbox may connect to (a
	// network's; see network_linux.go), where Landlock handles TCP.
	ConnectPorts []int
}

// LandlockPlan is a Landlock ruleset worked out but not applied: what the
// kernel's ABI handles, and the rules that grant access back. The sandbox's
// init applies it itself (applyLandlock); a forked run's process gets it
// whole and applies it with the same system calls (tier/native's zygote.py).
type LandlockPlan struct {
	ABI int `json:"abi"`
	// Handled is the ruleset's attribute: the filesystem rights, the
	// network rights and the scopes it handles.
	Handled [3]uint64 `json:"handled"`
	// Size is how much of Handled the ABI knows, in bytes.
	Size int `json:"size"`
	// FileMask is what a rule on a file (not a directory) may hold.
	FileMask uint64 `json:"file_mask"`
	// Rules are paths and the rights granted beneath them.
	Rules [][2]any `json:"rules"`
	// Applied says what the ruleset does, for Result.isolation.
	Applied string `json:"-"`
}

// PlanLandlock works out the ruleset for r. It handles every right the
// kernel's ABI knows and grants only the rules, so what is not granted is
// denied: on ABI 4 and later, every TCP bind and connect; on ABI 6 and
// later, signals to processes and connects to abstract unix sockets outside
// the sandbox.
func PlanLandlock(r LandlockRules) (LandlockPlan, error) {
	abi := LandlockABI()
	if abi == 0 {
		return LandlockPlan{}, errLandlockUnavailable
	}
	p := LandlockPlan{ABI: abi, FileMask: fsFile, Size: 8}
	p.Handled[0] = fsHandled(abi)
	applied := []string{"filesystem"}
	if abi >= 4 {
		p.Handled[1] = unix.LANDLOCK_ACCESS_NET_BIND_TCP | unix.LANDLOCK_ACCESS_NET_CONNECT_TCP
		p.Size += 8
		applied = append(applied, "no tcp")
	}
	if abi >= 6 {
		p.Handled[2] = unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | unix.LANDLOCK_SCOPE_SIGNAL
		p.Size += 8
		applied = append(applied, "scoped signals and abstract sockets")
	}
	rule := func(path string, access uint64) { p.Rules = append(p.Rules, [2]any{path, access & p.Handled[0]}) }
	rule("/", fsRead)
	for _, d := range r.Writable {
		rule(d, p.Handled[0]&^makeDevices)
	}
	for _, d := range r.Devices {
		rule(d, unix.LANDLOCK_ACCESS_FS_READ_FILE|unix.LANDLOCK_ACCESS_FS_WRITE_FILE|
			unix.LANDLOCK_ACCESS_FS_TRUNCATE|unix.LANDLOCK_ACCESS_FS_IOCTL_DEV)
	}
	for _, f := range r.Executable {
		rule(f, unix.LANDLOCK_ACCESS_FS_EXECUTE|unix.LANDLOCK_ACCESS_FS_READ_FILE)
	}
	p.Applied = fmt.Sprintf("abi %d: %s", abi, strings.Join(applied, ", "))
	return p, nil
}

// restrictLandlock confines the calling process and all it will start to
// r (see PlanLandlock). It requires no_new_privs (or CAP_SYS_ADMIN). It
// returns what it applied, for Result.isolation.
func restrictLandlock(r LandlockRules) (string, error) {
	p, err := PlanLandlock(r)
	if err != nil {
		return "", err
	}
	attr := unix.LandlockRulesetAttr{Access_fs: p.Handled[0], Access_net: p.Handled[1], Scoped: p.Handled[2]}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), uintptr(p.Size), 0)
	if errno != 0 {
		return "", fmt.Errorf("landlock_create_ruleset: %w", errno)
	}
	ruleset := int(fd)
	defer unix.Close(ruleset)

	add := func(path string, access uint64) error {
		f, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("landlock rule for %s: %w", path, err)
		}
		defer unix.Close(f)
		var st unix.Stat_t
		if err := unix.Fstat(f, &st); err != nil {
			return err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			access &= p.FileMask
		}
		rule := unix.LandlockPathBeneathAttr{Allowed_access: access, Parent_fd: int32(f)}
		_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), unix.LANDLOCK_RULE_PATH_BENEATH,
			uintptr(unsafe.Pointer(&rule)), 0, 0, 0)
		if errno != 0 {
			return fmt.Errorf("landlock rule for %s: %w", path, errno)
		}
		return nil
	}
	for _, rule := range p.Rules {
		if err := add(rule[0].(string), rule[1].(uint64)); err != nil {
			return "", err
		}
	}
	if p.Handled[1] != 0 {
		if err := allowConnect(ruleset, r.ConnectPorts); err != nil {
			return "", err
		}
	}
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(ruleset), 0, 0); errno != 0 {
		return "", fmt.Errorf("landlock_restrict_self: %w", errno)
	}
	return p.Applied, nil
}
