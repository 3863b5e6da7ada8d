//go:build linux

package docker_test

import (
	"strings"
	"testing"

	"github.com/codecell-dev/codecell"
)

// TestMemoryLimitIsTheKernels: a program past its memory limit is one the
// kernel killed, by the kernel's count in the container's cgroup, which
// the launcher reads (Podman on cgroup v1 does not report the kill); a
// program that sends itself SIGKILL under the same limit is not taken for
// one. The isolation names the limits the kernel held.
func TestMemoryLimitIsTheKernels(t *testing.T) {
	tier := newTier(t)
	tier.Pool = -1
	const limit = 64 << 20
	hog := "chunks = []\nfor i in range(512):\n    chunks.append(bytearray(1 << 20))\nprint('survived')\n"
	res := run(t, tier, codecell.Exec{Language: "python", Code: hog, Limits: codecell.Limits{Memory: limit, Timeout: 30e9}})
	t.Logf("hog: status %s, exit %d, error %+v, warnings %q, isolation %+v", res.Status, res.ExitCode, res.Error, res.Warnings, res.Isolation.Limits)
	if res.Status != codecell.StatusMemoryLimit || res.ExitCode != 137 || strings.Contains(res.Stdout, "survived") {
		t.Errorf("a program past its memory limit: got %s, exit %d, stdout %q, warnings %q", res.Status, res.ExitCode, res.Stdout, res.Warnings)
	}
	if joined := strings.Join(res.Warnings, "\n"); strings.Contains(joined, "taken for") || strings.Contains(joined, "not known") {
		t.Errorf("the kill was guessed, not counted: %q", res.Warnings)
	}
	if l := res.Isolation.Limits.Memory; !strings.Contains(l, "64 MiB, no swap") || !strings.Contains(l, "as the kernel holds it") {
		t.Errorf("isolation.limits.memory = %q", l)
	}
	if res.Isolation.Cgroup != "v1" && res.Isolation.Cgroup != "v2" {
		t.Errorf("isolation.cgroup = %q", res.Isolation.Cgroup)
	}

	self := "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n"
	res = run(t, tier, codecell.Exec{Language: "python", Code: self, Limits: codecell.Limits{Memory: limit, Processes: 16}})
	if res.Status != codecell.StatusFailure || res.Error == nil || res.Error.Code != codecell.CodeKilledBySignal || res.ExitCode != 137 {
		t.Errorf("a program that sent itself SIGKILL: got %s, exit %d, error %+v, warnings %q", res.Status, res.ExitCode, res.Error, res.Warnings)
	}
	if p := res.Isolation.Limits.Processes; !strings.Contains(p, "as the kernel holds it") {
		t.Errorf("isolation.limits.processes = %q", p)
	}
}
