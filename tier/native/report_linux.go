//go:build linux

package native

import (
	"os"
	"strings"

	"github.com/codecell-dev/codecell/internal/seccomp"
)

// Inspect reports what this host offers. It does not start a sandbox;
// codecell doctor does that too, with a real run.
func (t *Tier) Inspect() Report {
	err := t.Probe()
	r := Report{Root: os.Geteuid() == 0, Landlock: LandlockABI(), SeccompDenied: len(seccomp.Denied())}
	if err != nil {
		r.Namespaces = err.Error()
	}
	if _, err := seccomp.Filter(); err != nil {
		r.Seccomp = err.Error()
	} else if b, err := os.ReadFile("/proc/self/status"); err == nil && !strings.Contains(string(b), "\nSeccomp:") {
		r.Seccomp = "this kernel has no seccomp"
	}
	if t.cgroups != nil {
		r.Cgroup, r.CgroupControllers, r.CgroupReason = t.cgroups.Version, t.cgroups.Controllers, t.cgroups.Reason
	}
	r.CgroupMounts = cgroupMounts()
	return r
}

// cgroupMounts lists the cgroup filesystems mounted here, as "v1 memory at
// /sys/fs/cgroup/memory" or "v2 (controllers: memory pids) at /sys/fs/cgroup".
func cgroupMounts() []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 3 {
			continue
		}
		switch g[0] {
		case "cgroup2":
			ctl, _ := os.ReadFile(f[4] + "/cgroup.controllers")
			c := strings.TrimSpace(string(ctl))
			if c == "" {
				c = "none"
			}
			out = append(out, "v2 at "+f[4]+" (controllers: "+c+")")
		case "cgroup":
			var ctl []string
			for _, o := range strings.Split(g[2], ",") {
				if o != "rw" && o != "ro" && o != "relatime" && o != "clone_children" && (!strings.Contains(o, "=") || strings.HasPrefix(o, "name=")) {
					ctl = append(ctl, o)
				}
			}
			out = append(out, "v1 "+strings.Join(ctl, ",")+" at "+f[4])
		}
	}
	return out
}
