//go:build linux

package native

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

// landlockRules is what the sandbox's processes may touch: read and execute
// everywhere in their (already minimal) view, write only in their writable
// directories and to the device files.
type landlockRules struct {
	Writable   []string // directories: everything but making device nodes
	Devices    []string // device files: read, write, ioctl
	Executable []string // files outside the view that may still be executed
}

// restrictLandlock confines the calling process and all it will start. It
// handles every right the kernel's ABI knows and grants only the rules
// above, so what is not granted is denied: on ABI 4 and later, every TCP
// bind and connect; on ABI 6 and later, signals to processes and connects to
// abstract unix sockets outside the sandbox. It requires no_new_privs (or
// CAP_SYS_ADMIN). It returns what it applied, for Result.isolation.
func restrictLandlock(r landlockRules) (string, error) {
	abi := LandlockABI()
	if abi == 0 {
		return "", errLandlockUnavailable
	}
	attr := unix.LandlockRulesetAttr{Access_fs: fsHandled(abi)}
	size := unsafe.Sizeof(attr.Access_fs)
	applied := []string{"filesystem"}
	if abi >= 4 {
		attr.Access_net = unix.LANDLOCK_ACCESS_NET_BIND_TCP | unix.LANDLOCK_ACCESS_NET_CONNECT_TCP
		size += unsafe.Sizeof(attr.Access_net)
		applied = append(applied, "no tcp")
	}
	if abi >= 6 {
		attr.Scoped = unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | unix.LANDLOCK_SCOPE_SIGNAL
		size += unsafe.Sizeof(attr.Scoped)
		applied = append(applied, "scoped signals and abstract sockets")
	}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), size, 0)
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
			access &= fsFile
		}
		rule := unix.LandlockPathBeneathAttr{Allowed_access: access & attr.Access_fs, Parent_fd: int32(f)}
		_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), unix.LANDLOCK_RULE_PATH_BENEATH,
			uintptr(unsafe.Pointer(&rule)), 0, 0, 0)
		if errno != 0 {
			return fmt.Errorf("landlock rule for %s: %w", path, errno)
		}
		return nil
	}
	if err := add("/", fsRead); err != nil {
		return "", err
	}
	for _, d := range r.Writable {
		if err := add(d, attr.Access_fs&^makeDevices); err != nil {
			return "", err
		}
	}
	for _, d := range r.Devices {
		if err := add(d, unix.LANDLOCK_ACCESS_FS_READ_FILE|unix.LANDLOCK_ACCESS_FS_WRITE_FILE|
			unix.LANDLOCK_ACCESS_FS_TRUNCATE|unix.LANDLOCK_ACCESS_FS_IOCTL_DEV); err != nil {
			return "", err
		}
	}
	for _, f := range r.Executable {
		if err := add(f, unix.LANDLOCK_ACCESS_FS_EXECUTE|unix.LANDLOCK_ACCESS_FS_READ_FILE); err != nil {
			return "", err
		}
	}
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(ruleset), 0, 0); errno != 0 {
		return "", fmt.Errorf("landlock_restrict_self: %w", errno)
	}
	return fmt.Sprintf("abi %d: %s", abi, strings.Join(applied, ", ")), nil
}
