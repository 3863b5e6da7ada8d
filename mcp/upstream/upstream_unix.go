//go:build unix

package upstream

import (
	"os/exec"
	"syscall"
)

// setProcessGroup puts a stdio server in a process group of its own, so
// that killProcessGroup reaches whatever it starts (npx starts node, a
// shell script starts its program), and a Ctrl-C meant for codecell is not
// delivered to it behind codecell's back.
func setProcessGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	dieWithParent(cmd.SysProcAttr)
}

// killProcessGroup sends SIGKILL to the server's process group. The group's
// id is the server's pid, which the kernel does not hand out again while
// any process of the group lives; once none does, this finds nothing.
func killProcessGroup(cmd *exec.Cmd) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	killGroup(cmd.Process.Pid)
}

// killGroup sends SIGKILL to the process group pid leads.
func killGroup(pid int) { _ = syscall.Kill(-pid, syscall.SIGKILL) }
