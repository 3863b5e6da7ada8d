//go:build !unix

package upstream

import "os/exec"

// Without process groups, only the server process itself is stopped (by
// the SDK); processes it started may outlive it.
func setProcessGroup(*exec.Cmd) {}

func killProcessGroup(cmd *exec.Cmd) {
	if cmd != nil && cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}
