package docker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/moby/moby/client"

	"github.com/codecell-dev/codecell"
)

// Every container the tier makes is labelled with the process that made it
// (its pid, its start time and an instance id) and the host it ran on, so
// that one left behind by a codecell process that died can be told from
// one still in use, and removed.

// hostname is this machine's name, for the owner label: an engine reached
// over the network may serve codecell processes on other machines, whose
// pids mean nothing here.
var hostname = func() string {
	h, _ := os.Hostname()
	return h
}()

const labelHost = "codecell.owner.host"

// Swept is what Sweep removed.
type Swept struct {
	Containers int // containers removed
	Volumes    int // workspaces' volumes removed
	Dirs       int // temporary directories removed
	Errors     []string
}

// Sweep removes the containers codecell processes of this machine left
// behind when they died: those whose owner process is gone (or is another
// process with the same pid), their workspaces' volumes, and those
// processes' temporary directories.
func (t *Tier) Sweep(ctx context.Context) (Swept, error) {
	c, err := t.client()
	if err != nil {
		return Swept{}, err
	}
	return sweep(ctx, c)
}

func (t *Tier) sweepOnce(ctx context.Context, c *client.Client) {
	t.mu.Lock()
	done := t.swept
	t.swept = true
	t.mu.Unlock()
	if !done {
		_, _ = sweep(ctx, c)
	}
}

func sweep(ctx context.Context, c *client.Client) (Swept, error) {
	ctx, cancel := context.WithTimeout(ctx, cleanupTime)
	defer cancel()
	var s Swept
	list, err := c.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", labelMark+"=1")})
	if err != nil {
		return s, fmt.Errorf("listing codecell's containers: %w", err)
	}
	for _, ct := range list.Items {
		if ct.Labels[labelHost] != hostname || ownerAlive(ct.Labels) {
			continue
		}
		if _, err := c.ContainerRemove(ctx, ct.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
			s.Errors = append(s.Errors, err.Error())
			continue
		}
		s.Containers++
	}
	// The workspaces' volumes, once their containers are gone.
	vols, err := c.VolumeList(ctx, client.VolumeListOptions{Filters: client.Filters{}.Add("label", labelMark+"=1")})
	if err != nil {
		s.Errors = append(s.Errors, "listing codecell's volumes: "+err.Error())
	}
	for _, v := range vols.Items {
		if v.Labels[labelHost] != hostname || ownerAlive(v.Labels) {
			continue
		}
		if _, err := c.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{Force: true}); err != nil {
			s.Errors = append(s.Errors, err.Error())
			continue
		}
		s.Volumes++
	}
	s.Dirs = sweepDirs()
	return s, nil
}

// tempPrefix names this process's temporary directories (the sockets',
// the workspace read back), so that a sweep knows whose they are.
func tempPrefix() string {
	return fmt.Sprintf("codecell-docker-%d.%d-", os.Getpid(), processStart())
}

// sweepDirs removes the temporary directories of processes that are gone.
func sweepDirs() int {
	tmp := os.TempDir()
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), "codecell-docker-")
		if !ok || !e.IsDir() {
			continue
		}
		owner, _, ok := strings.Cut(rest, "-")
		pidS, startS, ok2 := strings.Cut(owner, ".")
		pid, err1 := strconv.Atoi(pidS)
		start, err2 := strconv.ParseInt(startS, 10, 64)
		if !ok || !ok2 || err1 != nil || err2 != nil || startTime(pid) == start {
			continue
		}
		if os.RemoveAll(filepath.Join(tmp, e.Name())) == nil {
			n++
		}
	}
	return n
}

// ownerAlive reports whether the process a container's labels name still
// runs: this one, or another whose pid and start time match.
func ownerAlive(labels map[string]string) bool {
	if labels[labelInstance] == instance {
		return true
	}
	pid, err := strconv.Atoi(labels[labelPID])
	if err != nil || pid <= 0 {
		return false
	}
	started, err := strconv.ParseInt(labels[labelStarted], 10, 64)
	if err != nil {
		return false
	}
	return startTime(pid) == started
}

// processStart is when this process started, in clock ticks after boot.
func processStart() int64 { return startTime(os.Getpid()) }

// startTime is when process pid started, in clock ticks after boot, or -1
// when there is no such process.
func startTime(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1
	}
	// The command name, in parentheses, may hold spaces: fields are
	// counted after its closing one.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return -1
	}
	fields := strings.Fields(s[i+1:])
	// starttime is field 22; fields[0] is field 3.
	if len(fields) < 20 {
		return -1
	}
	n, err := strconv.ParseInt(fields[19], 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// isolation is what a run in this tier's containers applies.
func (r *run) isolation() codecell.Isolation {
	lim := r.job.Limits
	mem := "not limited"
	if lim.Memory > 0 {
		mem = fmt.Sprintf("container memory limit %d MiB, no swap", lim.Memory>>20)
	}
	pids := "not limited"
	if lim.Processes > 0 {
		pids = fmt.Sprintf("container pids limit %d: the program's %d, and %d for the engine's init and codecell's launcher", lim.Processes+launcherTasks, lim.Processes, launcherTasks)
	}
	cpu := "no limit asked for"
	if lim.CPU > 0 {
		cpu = fmt.Sprintf("container CPU quota %.3g cores", lim.CPU)
	}
	ws := "not limited"
	volume := "workspace in a volume"
	if lim.Workspace > 0 {
		ws = fmt.Sprintf("tmpfs volume of %d MiB: writing past it fails with ENOSPC; its pages count toward the container's memory limit", lim.Workspace>>20)
		volume = "workspace in a tmpfs volume"
	}
	cg := r.t.cgroupVersion()
	started := "a container made for this run"
	if r.pooled {
		started = "a container started before this run (the ready pool), for this run alone"
	}
	// What the engine says of itself: a weaker setting is named, never
	// implied.
	seccomp := "none: the engine reports no seccomp support"
	if o, ok := r.t.securityOption("seccomp"); ok {
		seccomp = "the engine's profile (" + strings.TrimPrefix(o, "name=seccomp,") + ")"
	}
	user := fmt.Sprintf("uid %d, gid %d in the container, no capabilities; ", r.uid, r.gid)
	_, userns := r.t.securityOption("userns")
	_, rootless := r.t.securityOption("rootless")
	switch {
	case rootless:
		user += "a rootless engine: the container's uids map into the engine user's subordinate range"
	case userns:
		user += "the engine remaps uids with a user namespace"
	default:
		user += "no user namespace: the same uid on the host"
	}
	return codecell.Isolation{
		Level:      "container",
		Namespaces: []string{"mount", "pid", "network", "ipc", "uts"},
		Seccomp:    seccomp,
		NoNewPrivs: true,
		User:       user,
		Network:    "none (no interfaces but loopback)",
		Cgroup:     cg,
		Engine:     fmt.Sprintf("%s, image %s; read-only root, tmpfs /tmp (%d MiB), %s; %s", r.runtime, r.image, r.t.tmpSize()>>20, volume, started),
		Limits: codecell.LimitsApplied{
			Timeout:   "wall clock from the container's start; the container is killed",
			Memory:    mem,
			Processes: pids,
			CPU:       cpu,
			Workspace: ws,
			Output:    "capped by codecell",
		},
	}
}
