//go:build linux

package sandboxinit

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// SystemDirs returns the host directories a sandbox sees, read-only, at
// the same paths. Those that are symbolic links on the host (/bin → usr/bin
// on merged-/usr systems) become the same links. Tier.ExtraMounts adds to
// them; the list itself is fixed, so that no caller widens every sandbox.
func SystemDirs() []string { return slices.Clone(systemDirs) }

var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// EtcEntries returns the entries of the host's /etc a sandbox sees: the
// loader's cache, TLS certificates, the alternatives that Debian's commands
// are links through, time zones, fonts and interpreters' configuration. No
// account, credential or network configuration of the host is among them;
// passwd, group, hosts and the rest are written fresh for the sandbox.
func EtcEntries() []string { return slices.Clone(etcEntries) }

var etcEntries = []string{
	"ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "ssl", "ca-certificates",
	"ca-certificates.conf", "pki", "crypto-policies", "localtime", "timezone", "fonts",
	"mime.types", "protocols", "services", "os-release", "debian_version", "matplotlibrc",
	"python3", "python3.11", "python3.12", "python3.13", "python3.14",
}

// maskedProc are files of /proc that leak the host's kernel state (memory,
// keys, timers, scheduler internals): /dev/null hides them, as Docker does.
var maskedProc = []string{
	"kcore", "keys", "key-users", "timer_list", "timer_stats", "sched_debug", "latency_stats",
	"kallsyms", "kpagecount", "kpageflags", "kpagecgroup", "config.gz", "sysrq-trigger",
}

// maskedProcDirs are hidden under an empty read-only tmpfs.
var maskedProcDirs = []string{"acpi", "scsi", "asound", "firmware", "driver", "tty"}

// readOnlyProc stay visible but cannot be written: kernel tunables and
// hardware state.
var readOnlyProc = []string{"sys", "irq", "bus", "fs"}

// ProcMasking is what buildProc hides and makes read-only of /proc: a run
// forked from a fork server, which mounts its own /proc, does the same.
func ProcMasking() ProcMasks {
	return ProcMasks{MaskedFiles: maskedProc, MaskedDirs: maskedProcDirs, ReadOnly: readOnlyProc}
}

var devices = []string{"null", "zero", "full", "random", "urandom"}

// buildRoot builds the sandbox's filesystem and moves init into it. It runs
// in init, in fresh user, mount, pid, net, ipc, uts and cgroup namespaces,
// as root of the user namespace. The order matters, and each step says why.
func buildRoot(s *SpawnSpec) error {
	// The new mount namespace starts as a copy of the host's, with shared
	// propagation: first make every mount private, so that nothing mounted
	// or unmounted below reaches the host.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making mounts private: %w", err)
	}
	root := s.RootDir
	if err := unix.Mount("tmpfs", root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=4m,mode=0755"); err != nil {
		return fmt.Errorf("mounting the new root: %w", err)
	}
	at := func(p string) string { return path.Join(root, p) }

	for _, d := range s.SystemDirs {
		if err := showHostPath(d, at(d)); err != nil {
			return err
		}
	}
	// A system directory this host lacks is skipped; a directory asked
	// for is not: a mount that shows nothing would fail later, and less
	// clearly. Reached as init's user, not codecell's: a directory that
	// user cannot reach (under a parent of mode 0700) fails here.
	for _, d := range s.ExtraMounts {
		info, err := os.Stat(d)
		if err == nil && !info.IsDir() {
			err = errors.New("not a directory")
		}
		if own := ownDir(d); err == nil && own != "" {
			err = fmt.Errorf("the sandbox has a %s of its own, which would hide it", own)
		}
		if err == nil {
			err = showHostPath(d, at(d))
		}
		if err != nil {
			return &mountError{dir: d, err: err}
		}
	}
	for _, b := range s.Binds {
		// Under /opt, which no system directory is: made in the new
		// root's tmpfs, never in a host directory.
		if err := os.MkdirAll(at(b.Dst), 0o755); err != nil {
			return err
		}
		if err := bindReadOnly(b.Src, at(b.Dst)); err != nil {
			return err
		}
	}
	if err := buildEtc(s, at("etc")); err != nil {
		return err
	}
	if err := buildDev(s, at("dev")); err != nil {
		return err
	}
	// /proc must be mounted while the host's /proc is still visible in
	// this namespace: the kernel lets a user namespace mount procfs only
	// when an unmasked procfs is already mounted (mnt_already_visible).
	if err := buildProc(at("proc")); err != nil {
		return err
	}
	for _, m := range TmpfsMounts(s.Workspace, s.Tmp, s.ProgramUID) {
		if err := os.MkdirAll(at(m.Target), 0o755); err != nil {
			return err
		}
		if err := unix.Mount(m.FSType, at(m.Target), m.FSType, m.Flags, m.Data); err != nil {
			return fmt.Errorf("mounting %s: %w", m.Target, err)
		}
	}

	// pivot_root(".", ".") stacks the old root under the new one, and the
	// detach removes it: from here on no host path is reachable, and no file
	// descriptor of init's points into the host (the control socket and
	// stdio are not paths). runc does the same.
	if err := unix.Chdir(root); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detaching the host's root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return err
	}
	// The root itself holds only directories, links and small files made
	// above: nothing in it is for the program to change.
	if err := unix.Mount("", "/", "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fmt.Errorf("making the root read-only: %w", err)
	}
	if err := unix.Sethostname([]byte(s.Hostname)); err != nil {
		return fmt.Errorf("sethostname: %w", err)
	}
	// The network namespace is empty: its own loopback, down. Up, it lets a
	// program talk to itself over 127.0.0.1; it reaches nothing else.
	return loopbackUp()
}

// showHostPath makes a host path visible at dst: a symbolic link becomes the
// same link, a directory a read-only bind mount.
func showHostPath(src, dst string) error {
	info, err := os.Lstat(src)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := os.MkdirAll(path.Dir(dst), 0o755); err != nil {
		return err
	}
	if info.Mode()&os.ModeSymlink != 0 {
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		return os.Symlink(target, dst)
	}
	if info.IsDir() {
		if err := os.Mkdir(dst, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
	} else if err := os.WriteFile(dst, nil, 0o644); err != nil {
		return err
	}
	return bindReadOnly(src, dst)
}

// ownDirs are the directories the sandbox makes for itself, over which
// a host directory shown there would be hidden.
var ownDirs = []string{"/tmp", WorkspaceDir, "/run", "/dev", "/proc", "/etc"}

// ownDir returns the directory of ownDirs that dir is, or is under, or "".
func ownDir(dir string) string {
	dir = path.Clean(dir)
	for _, o := range ownDirs {
		if dir == o || strings.HasPrefix(dir, o+"/") {
			return o
		}
	}
	return ""
}

// mountError is a directory of SpawnSpec.ExtraMounts the sandbox cannot
// show.
type mountError struct {
	dir string
	err error
}

func (e *mountError) Error() string { return fmt.Sprintf("showing %s: %v", e.dir, e.err) }
func (e *mountError) Unwrap() error { return e.err }

// bindReadOnly bind-mounts src on dst (not recursively: a mount below src
// stays hidden rather than appear writable) and makes it read-only, nosuid
// and nodev. In a user namespace the flags the host's mount carries (noexec,
// atime settings) are locked: the remount must repeat them, or fail.
func bindReadOnly(src, dst string) error {
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("binding %s: %w", src, err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dst, &st); err != nil {
		return err
	}
	flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV)
	for _, f := range []struct{ st, ms int64 }{
		{unix.ST_NOEXEC, unix.MS_NOEXEC},
		{unix.ST_NOATIME, unix.MS_NOATIME},
		{unix.ST_NODIRATIME, unix.MS_NODIRATIME},
		{unix.ST_RELATIME, unix.MS_RELATIME},
	} {
		if st.Flags&f.st != 0 {
			flags |= uintptr(f.ms)
		}
	}
	if err := unix.Mount("", dst, "", flags, ""); err != nil {
		return fmt.Errorf("making %s read-only: %w", src, err)
	}
	return nil
}

// buildEtc writes the sandbox's /etc: the chosen host entries, read-only,
// and account and network files of its own.
func buildEtc(s *SpawnSpec, etc string) error {
	if err := os.MkdirAll(etc, 0o755); err != nil {
		return err
	}
	for _, name := range s.EtcEntries {
		src := path.Join("/etc", name)
		info, err := os.Lstat(src)
		if err != nil {
			continue
		}
		// Small regular files are copied: cheaper than a mount each, and the
		// root turns read-only anyway. Directories are bound.
		if info.Mode().IsRegular() && info.Size() <= 1<<20 {
			if err := copyFile(src, path.Join(etc, name)); err != nil {
				return err
			}
			continue
		}
		if err := showHostPath(src, path.Join(etc, name)); err != nil {
			return err
		}
	}
	uid := strconv.Itoa(s.ProgramUID)
	files := map[string]string{
		"passwd": "root:x:0:0:root:/root:/bin/sh\n" +
			"sandbox:x:" + uid + ":" + uid + ":codecell sandbox:" + WorkspaceDir + ":/bin/sh\n" +
			"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
		"group":         "root:x:0:\nsandbox:x:" + uid + ":\nnogroup:x:65534:\n",
		"hosts":         hostsFile(s.Hostname, s.Network),
		"hostname":      s.Hostname + "\n",
		"nsswitch.conf": nsswitch(s.Network),
		"resolv.conf":   resolvConf(s.Network),
	}
	if s.Network != nil && s.Network.CA != "" {
		files[strings.TrimPrefix(CABundlePath, "/etc/")] = caBundle(s.Network.CA)
		files[strings.TrimPrefix(CAPath, "/etc/")] = s.Network.CA
	}
	if s.ProgramUID == 0 {
		files["passwd"] = "root:x:0:0:codecell sandbox:" + WorkspaceDir + ":/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
		files["group"] = "root:x:0:\nnogroup:x:65534:\n"
	}
	for name, data := range files {
		if err := os.WriteFile(path.Join(etc, name), []byte(data), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// TmpfsMounts are a sandbox's writable filesystems but /dev/shm: /tmp, the
// workspace and the runner's directory, each a tmpfs of its own.
func TmpfsMounts(workspaceSize, tmpSize int64, programUID int) []MountSpec {
	tmpfs := func(dir string, size int64, mode string, owner int, maxInodes int64) MountSpec {
		data := "size=" + strconv.FormatInt(size, 10) + ",mode=" + mode +
			",nr_inodes=" + strconv.FormatInt(TmpfsInodes(size, maxInodes), 10)
		if owner >= 0 {
			data += ",uid=" + strconv.Itoa(owner) + ",gid=" + strconv.Itoa(owner)
		}
		return MountSpec{Target: dir, FSType: "tmpfs", Flags: unix.MS_NOSUID | unix.MS_NODEV, Data: data}
	}
	return []MountSpec{
		tmpfs("/tmp", tmpSize, "1777", -1, 0),
		// The workspace holds no more entries than a listing of it takes.
		tmpfs(WorkspaceDir, workspaceSize, "0755", programUID, MaxWorkspaceEntries+1),
		// The runner's files arrive here from the host when a job comes,
		// owned by init's uid: the program, another uid, cannot change them,
		// and Landlock gives it no write access here either.
		tmpfs(RunnerDir, 16<<20, "0755", -1, 0),
	}
}

// ShmMount is a sandbox's /dev/shm.
func ShmMount(size int64) MountSpec {
	return MountSpec{Target: "/dev/shm", FSType: "tmpfs", Flags: unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC,
		Data: "size=" + strconv.FormatInt(size, 10) + ",mode=1777"}
}

// buildDev makes a minimal /dev: the harmless character devices, bound from
// the host's (a user namespace cannot mknod), and a tmpfs /dev/shm.
func buildDev(s *SpawnSpec, dev string) error {
	if err := os.MkdirAll(dev, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", dev, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "size=64k,mode=0755"); err != nil {
		return fmt.Errorf("mounting /dev: %w", err)
	}
	for _, d := range devices {
		src := "/dev/" + d
		var st unix.Stat_t
		if err := unix.Stat(src, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR {
			return fmt.Errorf("the host's %s is not a character device", src)
		}
		dst := path.Join(dev, d)
		if err := os.WriteFile(dst, nil, 0o666); err != nil {
			return err
		}
		if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("binding %s: %w", src, err)
		}
	}
	for name, target := range map[string]string{
		"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2",
	} {
		if err := os.Symlink(target, path.Join(dev, name)); err != nil {
			return err
		}
	}
	shm := path.Join(dev, "shm")
	if err := os.Mkdir(shm, 0o755); err != nil {
		return err
	}
	m := ShmMount(s.Shm)
	if err := unix.Mount(m.FSType, shm, m.FSType, m.Flags, m.Data); err != nil {
		return fmt.Errorf("mounting /dev/shm: %w", err)
	}
	return unix.Mount("", dev, "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NOEXEC, "size=64k,mode=0755")
}

// buildProc mounts the sandbox's own procfs (it shows the sandbox's pid
// namespace only) and hides what it would leak of the host's kernel.
func buildProc(proc string) error {
	if err := os.MkdirAll(proc, 0o555); err != nil {
		return err
	}
	if err := unix.Mount("proc", proc, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mounting /proc: %w", err)
	}
	for _, name := range maskedProc {
		p := path.Join(proc, name)
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		if err := unix.Mount("/dev/null", p, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("masking /proc/%s: %w", name, err)
		}
	}
	for _, name := range maskedProcDirs {
		p := path.Join(proc, name)
		if info, err := os.Lstat(p); err != nil || !info.IsDir() {
			continue
		}
		if err := unix.Mount("tmpfs", p, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k,mode=0555"); err != nil {
			return fmt.Errorf("masking /proc/%s: %w", name, err)
		}
	}
	for _, name := range readOnlyProc {
		p := path.Join(proc, name)
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		if err := bindReadOnly(p, p); err != nil {
			return err
		}
	}
	return nil
}

// loopbackUp brings the namespace's loopback interface up.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP | unix.IFF_RUNNING)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback up: %w", err)
	}
	return nil
}
