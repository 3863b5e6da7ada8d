package native

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// probeStart starts a process in every namespace a sandbox gets, as a
// sandbox's start does, and reports what stopped it. The sysctls probe
// reads say what is disabled on the usual hosts; only a real start says
// whether this one allows it (a container's own limits, a security module,
// user.max_user_namespaces exhausted), so that the tier auto picks and the
// tier a run starts in agree.
func probeStart(uidBase int) error {
	// Any program that exits at once will do: what is tested is the start.
	var cmd *exec.Cmd
	for _, p := range []string{"/bin/true", "/usr/bin/true"} {
		if _, err := os.Stat(p); err == nil {
			cmd = exec.Command(p)
			break
		}
	}
	if cmd == nil {
		return nil // nothing to start: the first sandbox's start will tell
	}
	// The users a sandbox's are, mapped as a sandbox maps them: as root,
	// host uids of their own, which a host that is itself a user
	// namespace (a rootless container) may not have.
	id, err := newIdentity(uidBase)
	if err != nil {
		return err
	}
	defer id.release()
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWNET |
			syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS | syscall.CLONE_NEWCGROUP,
		UidMappings:                id.UIDMap(),
		GidMappings:                id.UIDMap(),
		GidMappingsEnableSetgroups: !id.Rootless,
		Credential:                 &syscall.Credential{Uid: initUID, Gid: initUID, Groups: []uint32{}, NoSetGroups: id.Rootless},
		Pdeathsig:                  syscall.SIGKILL,
	}
	err = cmd.Start()
	if err == nil {
		_ = cmd.Wait()
		return nil
	}
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return fmt.Errorf("starting a process in new namespaces failed: %v", err)
	}
	switch errno {
	case syscall.ENOSPC:
		return errors.New("this host allows no more user namespaces (creating one failed with ENOSPC: user.max_user_namespaces is 0 or used up)")
	case syscall.EPERM, syscall.EACCES:
		if !id.Rootless && !fullUIDMap() {
			return fmt.Errorf("codecell runs as root of a user namespace (a rootless container, say) whose uids do not include the host uids %d and %d that a sandbox's users are given (%v): run codecell as an ordinary user there, or give that namespace a wider uid range", id.HostInit, id.HostProgram, errno)
		}
		return fmt.Errorf("this host does not let codecell create namespaces (%v: a container without the privilege, seccomp, or a security module such as AppArmor refuses it)", errno)
	case syscall.EINVAL:
		return errors.New("this kernel lacks a namespace the sandbox needs (creating them failed with EINVAL)")
	}
	return fmt.Errorf("starting a process in new namespaces failed: %v", errno)
}

// fullUIDMap reports whether this process's user namespace maps every uid
// (the initial namespace, or one made as wide).
func fullUIDMap() bool {
	b, err := os.ReadFile("/proc/self/uid_map")
	if err != nil {
		return true
	}
	f := strings.Fields(string(b))
	return len(f) == 3 && f[0] == "0" && f[1] == "0" && f[2] == "4294967295"
}
