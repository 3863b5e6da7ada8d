package native

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// probeStart starts a process in every namespace a sandbox gets, as a
// sandbox's start does, and reports what stopped it. The sysctls probe
// reads say what is disabled on the usual hosts; only a real start says
// whether this one allows it (a container's own limits, a security module,
// user.max_user_namespaces exhausted), so that the tier auto picks and the
// tier a run starts in agree.
func probeStart() error {
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
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWNET |
			syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS | syscall.CLONE_NEWCGROUP,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}},
		Pdeathsig:   syscall.SIGKILL,
	}
	err := cmd.Start()
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
		return fmt.Errorf("this host does not let codecell create namespaces (%v: a container without the privilege, seccomp, or a security module such as AppArmor refuses it)", errno)
	case syscall.EINVAL:
		return errors.New("this kernel lacks a namespace the sandbox needs (creating them failed with EINVAL)")
	}
	return fmt.Errorf("starting a process in new namespaces failed: %v", errno)
}
