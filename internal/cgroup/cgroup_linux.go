//go:build linux

package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

const (
	parentName = "codecell"        // the directory every sandbox's cgroup is made in
	engineName = "codecell-engine" // v2: the leaf this process moves itself into, see moveSelf
	cpuPeriod  = 100000            // µs; the kernel's default CFS period

	killTimeout  = 5 * time.Second
	rmdirTimeout = 2 * time.Second
	pollInterval = 5 * time.Millisecond
)

// limited are the controllers that carry limits, in the order they are
// reported; v1Controllers adds the freezer, which Kill uses on v1.
var (
	limited       = []string{"memory", "pids", "cpu"}
	v1Controllers = []string{"memory", "pids", "cpu", "freezer"}
)

// delegationHint is the Reason for an unprivileged process on cgroup v2 that
// cannot enable controllers where it sits.
const delegationHint = "cgroup v2 is not delegated to this user: run under systemd-run --user --scope -p Delegate=yes, or as root"

// Detect inspects the host once (callers cache it). It never fails: an
// unusable host gives Version 0 and a Reason.
//
// Detect prepares as well as looks, since whether the kernel lets this
// process enable controllers is known only by trying: it creates the
// "codecell" parent cgroup(s) and, on v2, enables memory, pids and cpu in
// the cgroup.subtree_control files above them. When an unprivileged process
// on v2 is the only process in its cgroup (a delegated systemd scope started
// for it), it moves itself into a "codecell-engine" leaf beside that parent
// first, as systemd's delegation rules require; see moveSelf.
func Detect() *Host { return detect(hostSystem()) }

func hostSystem() *system {
	return &system{
		mountinfo:  "/proc/self/mountinfo",
		selfCgroup: "/proc/self/cgroup",
		euid:       os.Geteuid(),
		pid:        os.Getpid(),
		write:      writeFile,
		mkdir:      func(path string) error { return os.Mkdir(path, 0o755) },
		rmdir: func(path string) error {
			if err := unix.Rmdir(path); err != nil {
				return &fs.PathError{Op: "rmdir", Path: path, Err: err}
			}
			return nil
		},
	}
}

// writeFile writes one value to a control file in one write(2), as the
// kernel parses each write on its own. The file must exist: a missing
// control file means the kernel lacks the feature, and creating a regular
// file in its place would hide that.
func writeFile(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func detect(sys *system) *Host {
	h := &Host{sys: sys}
	lay, err := locate(sys)
	if err != nil {
		h.Reason = err.Error()
		return h
	}
	var why []string
	if lay.v2Mount != "" {
		note, err := h.useV2(lay)
		if err == nil {
			h.Reason = note
			return h
		}
		why = append(why, err.Error())
	}
	note, err := h.useV1(lay)
	if err == nil {
		h.Reason = note
		return h
	}
	why = append(why, err.Error())
	why = append(why, lay.notes...)
	h.Reason = strings.Join(why, "; ")
	return h
}

// layout is where the cgroup hierarchies are and where this process sits in
// them; it is read from /proc and changes nothing.
type layout struct {
	v2Mount string            // mount point of the cgroup2 hierarchy; "" when none
	v2Own   string            // directory of this process's cgroup in it
	v1      map[string]string // v1 controller -> directory of this process's cgroup in its hierarchy
	v1Mount map[string]mount  // v1 controller -> the mount of its hierarchy
	notes   []string          // why a mounted hierarchy could not be used
}

func locate(sys *system) (*layout, error) {
	mi, err := os.ReadFile(sys.mountinfo)
	if err != nil {
		return nil, fmt.Errorf("cgroup: cannot read the mount table: %w", err)
	}
	sc, err := os.ReadFile(sys.selfCgroup)
	if err != nil {
		return nil, fmt.Errorf("cgroup: cannot read this process's cgroups: %w", err)
	}
	own := parseSelfCgroup(string(sc))
	lay := &layout{v1: map[string]string{}, v1Mount: map[string]mount{}}
	mounted := false
	for _, m := range parseMountinfo(string(mi)) {
		switch m.fstype {
		case "cgroup2":
			mounted = true
			if lay.v2Mount != "" {
				continue
			}
			if !own.hasV2 {
				lay.notes = append(lay.notes, "cgroup v2 is mounted but this process has no v2 cgroup")
				continue
			}
			dir, err := ownDir(m, own.v2)
			if err != nil {
				lay.notes = append(lay.notes, err.Error())
				continue
			}
			lay.v2Mount, lay.v2Own = m.point, dir
		case "cgroup":
			mounted = true
			for _, c := range m.super {
				p, ok := own.v1[c]
				if !ok || !slices.Contains(v1Controllers, c) || lay.v1[c] != "" {
					continue
				}
				dir, err := ownDir(m, p)
				if err != nil {
					lay.notes = append(lay.notes, err.Error())
					continue
				}
				lay.v1[c], lay.v1Mount[c] = dir, m
			}
		}
	}
	if !mounted {
		return nil, errors.New("no cgroup filesystem is mounted")
	}
	return lay, nil
}

// ownDir is where the cgroup at path own (as /proc/self/cgroup names it)
// appears under mount m, which may show only a subtree of the hierarchy.
func ownDir(m mount, own string) (string, error) {
	outside := fmt.Errorf("this process's cgroup %q is not visible under %s", own, m.point)
	// ".." appears when the process sits outside its cgroup namespace's root.
	if !strings.HasPrefix(own, "/") || slices.Contains(strings.Split(own, "/"), "..") {
		return "", outside
	}
	rel := own
	if m.root != "/" {
		if own != m.root && !strings.HasPrefix(own, m.root+"/") {
			return "", outside
		}
		rel = strings.TrimPrefix(own, m.root)
	}
	dir := filepath.Join(m.point, rel)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return "", outside
	}
	return dir, nil
}

// parseMountinfo reads /proc/self/mountinfo (proc(5)):
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
func parseMountinfo(data string) []mount {
	var ms []mount
	for line := range strings.Lines(data) {
		f := strings.Fields(line)
		sep := slices.Index(f, "-")
		if sep < 6 || len(f) < sep+4 {
			continue
		}
		ms = append(ms, mount{
			root:   unescapeMount(f[3]),
			point:  unescapeMount(f[4]),
			fstype: f[sep+1],
			super:  strings.Split(f[sep+3], ","),
		})
	}
	return ms
}

// unescapeMount undoes the kernel's octal escapes (\040 for a space, …).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

type selfCgroups struct {
	v1    map[string]string // controller -> path
	v2    string
	hasV2 bool
}

// parseSelfCgroup reads /proc/self/cgroup: "hierarchy-ID:controllers:path",
// where v2 is the line "0::path".
func parseSelfCgroup(data string) selfCgroups {
	s := selfCgroups{v1: map[string]string{}}
	for line := range strings.Lines(data) {
		f := strings.SplitN(strings.TrimRight(line, "\n"), ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[0] == "0" && f[1] == "" {
			s.v2, s.hasV2 = f[2], true
			continue
		}
		for _, c := range strings.Split(f[1], ",") {
			s.v1[c] = f[2]
		}
	}
	return s
}

// useV2 sets h up for cgroup v2, or says why it cannot. As root it puts the
// sandboxes at the top of the hierarchy (<mount>/codecell), outside whatever
// cgroup this process was started in; otherwise, and when that fails, under
// this process's own cgroup.
func (h *Host) useV2(lay *layout) (note string, err error) {
	bases := []string{lay.v2Own}
	if h.sys.euid == 0 && lay.v2Own != lay.v2Mount {
		bases = []string{lay.v2Mount, lay.v2Own}
	}
	var why []string
	for _, base := range bases {
		ctrls, err := h.prepareV2(base)
		if err != nil {
			why = append(why, err.Error())
			continue
		}
		parent := filepath.Join(base, parentName)
		h.Version, h.Controllers, h.v2Parent = 2, ctrls, parent
		h.swap = exists(filepath.Join(parent, "memory.swap.max"))
		return h.missing(), nil
	}
	return "", fmt.Errorf("cgroup v2 (%s): %s", lay.v2Mount, strings.Join(why, "; "))
}

// prepareV2 makes base/codecell a cgroup whose children get the memory, pids
// and (when it can) cpu controllers, and returns the controllers enabled.
func (h *Host) prepareV2(base string) ([]string, error) {
	avail := readTokens(filepath.Join(base, "cgroup.controllers"))
	if !slices.Contains(avail, "memory") || !slices.Contains(avail, "pids") {
		return nil, fmt.Errorf("%s lacks the memory and pids controllers (it has %q)", base, strings.Join(avail, " "))
	}
	var want []string
	for _, c := range limited {
		if slices.Contains(avail, c) {
			want = append(want, c)
		}
	}
	// cgroup v2's "no internal processes" rule: a cgroup other than the root
	// that holds processes cannot enable controllers for its children
	// (EBUSY).
	_, err := h.enable(base, want)
	if errors.Is(err, unix.EBUSY) {
		if merr := h.moveSelf(base); merr != nil {
			return nil, h.v2Refusal(base, merr)
		}
		_, err = h.enable(base, want)
	}
	if err != nil {
		return nil, h.v2Refusal(base, err)
	}
	parent := filepath.Join(base, parentName)
	if err := h.mkdirExist(parent); err != nil {
		return nil, h.v2Refusal(base, err)
	}
	if err := writable(parent); err != nil {
		return nil, h.v2Refusal(base, err)
	}
	ctrls, err := h.enable(parent, want)
	if err != nil {
		return nil, h.v2Refusal(parent, err)
	}
	return ctrls, nil
}

func (h *Host) v2Refusal(dir string, err error) error {
	if h.sys.euid != 0 {
		return fmt.Errorf("%s (%s: %v)", delegationHint, dir, err)
	}
	if errors.Is(err, unix.EBUSY) {
		return fmt.Errorf("cannot enable controllers in %s: it holds processes, and cgroup v2 enables controllers only in cgroups without processes of their own (%v)", dir, err)
	}
	return fmt.Errorf("cannot prepare %s: %v", dir, err)
}

// enable turns on the wanted controllers in dir/cgroup.subtree_control and
// returns those that are on. One write per controller: the kernel applies a
// multi-controller write all or nothing, and cpu may be refused (for
// instance while real-time threads sit in a child) where memory and pids are
// not. Only a failure for memory or pids is an error.
func (h *Host) enable(dir string, want []string) ([]string, error) {
	file := filepath.Join(dir, "cgroup.subtree_control")
	on := readTokens(file)
	var enabled []string
	for _, c := range want {
		if !slices.Contains(on, c) {
			if err := h.sys.write(file, "+"+c); err != nil {
				if c == "cpu" {
					continue
				}
				return nil, err
			}
		}
		enabled = append(enabled, c)
	}
	return enabled, nil
}

// moveSelf moves this process out of base into base/codecell-engine, so
// that base holds no processes and can enable controllers for the
// sandboxes. It does so only when this process is alone in base — the
// situation systemd-run --user --scope -p Delegate=yes creates, and the
// one systemd's delegation documentation asks the delegatee to resolve this
// way — and never moves any other process.
func (h *Host) moveSelf(base string) error {
	procs := readPids(filepath.Join(base, "cgroup.procs"))
	if len(procs) != 1 || procs[0] != h.sys.pid {
		return fmt.Errorf("it holds other processes than this one (%d in all)", len(procs))
	}
	leaf := filepath.Join(base, engineName)
	if err := h.mkdirExist(leaf); err != nil {
		return err
	}
	// Writing a process id to cgroup.procs moves all of its threads.
	return h.sys.write(filepath.Join(leaf, "cgroup.procs"), strconv.Itoa(h.sys.pid))
}

// useV1 sets h up for cgroup v1: a "codecell" directory beside this
// process's cgroup in each hierarchy in use, so that sandboxes count toward
// whatever limits the host put on this process.
func (h *Host) useV1(lay *layout) (note string, err error) {
	var unmounted []string
	for _, c := range []string{"memory", "pids"} {
		if lay.v1[c] == "" {
			unmounted = append(unmounted, c)
		}
	}
	if len(unmounted) > 0 {
		if len(unmounted) == 2 {
			return "", errors.New("cgroup v1: the memory and pids controllers are not mounted")
		}
		return "", fmt.Errorf("cgroup v1: the %s controller is not mounted", unmounted[0])
	}
	// A file each controller needs, proving it is there and has the feature.
	needs := map[string]string{
		"memory":  "memory.limit_in_bytes",
		"pids":    "pids.max",
		"cpu":     "cpu.cfs_quota_us", // CONFIG_CFS_BANDWIDTH
		"freezer": "freezer.state",
	}
	parents := map[string]string{}
	for _, c := range v1Controllers {
		dir := lay.v1[c]
		if dir == "" {
			continue
		}
		parent := filepath.Join(dir, parentName)
		err := h.mkdirExist(parent)
		if err == nil {
			err = writable(parent)
		}
		if err == nil && !exists(filepath.Join(parent, needs[c])) {
			err = fmt.Errorf("%s has no %s", parent, needs[c])
		}
		if err != nil {
			if c == "memory" || c == "pids" {
				return "", fmt.Errorf("cgroup v1: cannot use the %s controller: %v", c, err)
			}
			continue // cpu and freezer are optional
		}
		parents[c] = parent
	}
	h.Version, h.v1Parents, h.v1Mounts = 1, parents, lay.v1Mount
	h.Controllers = nil
	for _, c := range limited {
		if parents[c] != "" {
			h.Controllers = append(h.Controllers, c)
		}
	}
	h.swap = exists(filepath.Join(parents["memory"], "memory.memsw.limit_in_bytes"))
	return h.missing(), nil
}

// missing says what a usable host lacks.
func (h *Host) missing() string {
	var m []string
	if !slices.Contains(h.Controllers, "cpu") {
		m = append(m, "no cpu controller: CPU limits are not enforced")
	}
	switch {
	case h.swap:
	case h.Version == 2:
		m = append(m, "no memory.swap.max: swap use is not capped")
	default:
		m = append(m, "no swap accounting (memory.memsw.*; boot with swapaccount=1): swap is avoided with memory.swappiness=0 but not capped")
	}
	return strings.Join(m, "; ")
}

// New creates a cgroup for one sandbox named id (a short lowercase hex
// string; OwnedID gives one that Recover can trace to its owner), under the
// "codecell" parent, and applies the limits. It returns an error when it
// cannot; callers fall back to rlimits.
//
// On v1 the group has a directory in every hierarchy in use: memory, pids,
// and cpu and freezer when mounted (cpu even without a CPU limit, so that
// SetLimits can add one to a running sandbox). A CPU limit on a host
// without the cpu controller is not applied; Describe lists only the limits
// that are.
func (h *Host) New(id string, lim Limits) (*Group, error) {
	if h.Version == 0 {
		return nil, fmt.Errorf("cgroup: not usable on this host: %s", h.Reason)
	}
	if !validID(id) {
		return nil, fmt.Errorf("cgroup: invalid group id %q (want lowercase hex, as OwnedID gives)", id)
	}
	if err := lim.check(); err != nil {
		return nil, err
	}
	g := &Group{host: h, fd: -1, dirs: map[string]string{}}
	if h.Version == 2 {
		dir := filepath.Join(h.v2Parent, id)
		if err := h.mkdirGroup(dir); err != nil {
			return nil, err
		}
		g.paths = []string{dir}
		for _, c := range h.Controllers {
			g.dirs[c] = dir
		}
	} else {
		for _, c := range v1Controllers {
			parent := h.v1Parents[c]
			if parent == "" {
				continue
			}
			dir := filepath.Join(parent, id)
			if !slices.Contains(g.paths, dir) { // controllers may share a hierarchy
				if err := h.mkdirGroup(dir); err != nil {
					g.removeDirs()
					return nil, err
				}
				g.paths = append(g.paths, dir)
			}
			g.dirs[c] = dir
		}
		// oom_kill_disable is inherited from the parent: a sandbox at its
		// limit with the OOM killer off would hang instead of dying.
		if err := h.sys.write(filepath.Join(g.dirs["memory"], "memory.oom_control"), "0"); err != nil {
			g.removeDirs()
			return nil, fmt.Errorf("cgroup: enable the OOM killer: %w", err)
		}
	}
	if err := g.setLimits(lim, true); err != nil {
		g.Destroy()
		return nil, err
	}
	if h.Version == 2 {
		fd, err := unix.Open(g.paths[0], unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			g.Destroy()
			return nil, fmt.Errorf("cgroup: open %s: %w", g.paths[0], err)
		}
		g.fd = fd
	}
	return g, nil
}

// mkdirGroup creates a group's directory. The "codecell" parent is shared
// and outlives no one in particular: if another process removed it while it
// was empty, it is made again (on v2 with its controllers) rather than fail.
func (h *Host) mkdirGroup(dir string) error {
	err := h.sys.mkdir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		parent := filepath.Dir(dir)
		if err = h.mkdirExist(parent); err == nil && h.Version == 2 {
			_, err = h.enable(parent, h.Controllers)
		}
		if err == nil {
			err = h.sys.mkdir(dir)
		}
	}
	if err != nil {
		return fmt.Errorf("cgroup: %w", err)
	}
	return nil
}

// Paths are the group's directories, one per hierarchy it is in.
func (g *Group) Paths() []string { return append([]string(nil), g.paths...) }

// FD returns an open directory fd for clone's CLONE_INTO_CGROUP
// (syscall.SysProcAttr.UseCgroupFD/CgroupFD) on v2, and ok=false on v1 (no
// such thing). The fd stays open until Destroy.
func (g *Group) FD() (fd int, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.fd, g.fd >= 0
}

// Add moves a process into the group (all v1 hierarchies in use, or the v2
// cgroup). The caller calls it right after starting a process that is
// blocked waiting for the caller, so nothing runs outside the group.
func (g *Group) Add(pid int) error {
	if pid <= 0 {
		return fmt.Errorf("cgroup: invalid pid %d", pid)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.destroyed {
		return errDestroyed
	}
	for _, dir := range g.paths {
		if err := g.host.sys.write(filepath.Join(dir, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
			return fmt.Errorf("cgroup: add process %d: %w", pid, err)
		}
	}
	return nil
}

// EnterThread moves the calling thread, and only it, into the group on
// cgroup v1, so that a process the thread then starts is born in the group,
// as CLONE_INTO_CGROUP does on v2 (see FD). Moving a started process there
// instead (Add) waits for an RCU grace period, about 10 ms; a thread that
// moves itself does not, for the kernel takes the lock that waits only to
// move another task or a whole process.
//
// The caller keeps its goroutine on the thread (runtime.LockOSThread) from
// before EnterThread until leave has returned, and calls leave as soon as
// the process is started: it moves the thread back into the cgroups it
// came from, whose files EnterThread opened first, so that a thread that
// could enter can leave. If leave fails all the same, the thread still
// stands in the group and must not run anything else.
func (g *Group) EnterThread() (leave func() error, err error) {
	if g.host.Version != 1 {
		return nil, errors.New("cgroup: a thread enters a group only on cgroup v1; v2 starts processes in it (FD)")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.destroyed {
		return nil, errDestroyed
	}
	data, err := os.ReadFile("/proc/thread-self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("cgroup: this thread's cgroups: %w", err)
	}
	// Where the thread stands now, in the hierarchy of each of the group's
	// directories: where it goes back to.
	own := parseSelfCgroup(string(data))
	from := make([]string, len(g.paths))
	for i, dir := range g.paths {
		for c, d := range g.dirs {
			m, okm := g.host.v1Mounts[c]
			p, okp := own.v1[c]
			if d == dir && okm && okp {
				if from[i], err = ownDir(m, p); err != nil {
					return nil, fmt.Errorf("cgroup: entering %s: %w", dir, err)
				}
				break
			}
		}
		if from[i] == "" {
			return nil, fmt.Errorf("cgroup: entering %s: this thread has no cgroup in its hierarchy", dir)
		}
	}
	home, err := openTasks(from)
	if err != nil {
		return nil, err
	}
	into, err := openTasks(g.paths)
	if err != nil {
		closeFiles(home)
		return nil, err
	}
	if n, err := moveSelf(into); err != nil {
		if _, berr := moveSelf(home[:n]); berr != nil {
			err = errors.Join(err, berr)
		}
		closeFiles(append(home, into...))
		return nil, err
	}
	return func() error {
		defer closeFiles(append(home, into...))
		_, err := moveSelf(home)
		return err
	}, nil
}

// moveSelf moves the calling thread into the cgroup of each tasks file in
// turn, by writing "0", the writing thread itself (cgroups(7)); it returns
// how many moves were made.
func moveSelf(tasks []*os.File) (int, error) {
	for i, f := range tasks {
		if _, err := f.WriteString("0"); err != nil {
			return i, fmt.Errorf("cgroup: moving this thread into %s: %w", filepath.Dir(f.Name()), err)
		}
	}
	return len(tasks), nil
}

// OpenTasks opens the v1 "tasks" file of each of the group's directories
// for writing, for a thread that moves itself into the group by writing
// "0" there, as EnterThread does, in a process that cannot open them: the
// native tier's fork server, whose forks are born in their cgroups that
// way. The kernel checks the opener's credentials, not the writer's.
func (g *Group) OpenTasks() ([]*os.File, error) {
	if g.host.Version != 1 {
		return nil, errors.New("cgroup: tasks files are v1's")
	}
	return openTasks(g.paths)
}

// openTasks opens the "tasks" file of each of dirs for writing, or none.
func openTasks(dirs []string) ([]*os.File, error) {
	var files []*os.File
	for _, dir := range dirs {
		f, err := os.OpenFile(filepath.Join(dir, "tasks"), os.O_WRONLY, 0)
		if err != nil {
			closeFiles(files)
			return nil, fmt.Errorf("cgroup: %w", err)
		}
		files = append(files, f)
	}
	return files, nil
}

func closeFiles(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// SetLimits changes the limits of an existing group (used when a
// pre-started sandbox gets its job). After an error, some of the new limits
// may be in force; Describe tells which.
func (g *Group) SetLimits(lim Limits) error { return g.setLimits(lim, false) }

// setLimits is SetLimits; fresh says the group was just made (New), with
// the kernel's defaults in its files.
func (g *Group) setLimits(lim Limits, fresh bool) error {
	if err := lim.check(); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.destroyed {
		return errDestroyed
	}
	w := g.host.sys.write
	v2 := g.host.Version == 2
	if dir := g.dirs["memory"]; dir != "" {
		var err error
		if v2 {
			err = g.setMemoryV2(dir, lim.Memory)
		} else {
			err = g.setMemoryV1(dir, lim.Memory)
		}
		if err != nil {
			return fmt.Errorf("cgroup: memory limit: %w", err)
		}
		g.applied.Memory = lim.Memory
	}
	if dir := g.dirs["pids"]; dir != "" {
		max := "max"
		if lim.Processes > 0 {
			max = strconv.Itoa(lim.Processes)
		}
		if err := w(filepath.Join(dir, "pids.max"), max); err != nil {
			return fmt.Errorf("cgroup: process limit: %w", err)
		}
		g.applied.Processes = lim.Processes
	}
	if dir := g.dirs["cpu"]; dir != "" {
		var err error
		if v2 {
			max := "max"
			if lim.CPU > 0 {
				max = strconv.FormatInt(cpuQuota(lim.CPU), 10)
			}
			err = w(filepath.Join(dir, "cpu.max"), fmt.Sprintf("%s %d", max, cpuPeriod))
		} else {
			err = g.setCPUV1(dir, lim.CPU, fresh)
		}
		if err != nil {
			return fmt.Errorf("cgroup: CPU limit: %w", err)
		}
		g.applied.CPU = lim.CPU
	}
	return nil
}

func (g *Group) setMemoryV2(dir string, bytes int64) error {
	max := "max"
	if bytes > 0 {
		max = strconv.FormatInt(bytes, 10)
	}
	// Swap first, so that no moment exists in which the memory limit holds
	// and swap could extend it. Swap stays at 0 even without a memory limit:
	// a sandbox never swaps.
	if g.host.swap {
		if err := g.host.sys.write(filepath.Join(dir, "memory.swap.max"), "0"); err != nil {
			return err
		}
	}
	return g.host.sys.write(filepath.Join(dir, "memory.max"), max)
}

func (g *Group) setMemoryV1(dir string, bytes int64) error {
	w := g.host.sys.write
	want, wantN := "-1", int64(math.MaxInt64)
	if bytes > 0 {
		want, wantN = strconv.FormatInt(bytes, 10), bytes
	}
	limit := filepath.Join(dir, "memory.limit_in_bytes")
	if !g.host.swap {
		if err := w(limit, want); err != nil {
			return err
		}
		// Without swap accounting the limit bounds RAM only, and a process
		// could grow into swap beyond it; swappiness 0 stops this cgroup's
		// own reclaim from swapping anonymous memory out.
		return w(filepath.Join(dir, "memory.swappiness"), "0")
	}
	// memory.memsw.limit_in_bytes (RAM+swap) equal to the RAM limit leaves
	// no room for swap. The kernel keeps memsw >= limit at every step and
	// refuses a write that would break it (EINVAL), so lowering sets limit
	// first and raising sets memsw first. A fresh group starts with both
	// unlimited, so its first limit is a lowering.
	memsw := filepath.Join(dir, "memory.memsw.limit_in_bytes")
	cur, err := readInt(limit)
	if err != nil {
		return err
	}
	first, second := limit, memsw
	if wantN > cur {
		first, second = memsw, limit
	}
	if err := w(first, want); err != nil {
		return err
	}
	return w(second, want)
}

func (g *Group) setCPUV1(dir string, cores float64, fresh bool) error {
	if fresh && cores == 0 {
		return nil // a new group has no quota, over the default period
	}
	period := filepath.Join(dir, "cpu.cfs_period_us")
	if p, err := readInt(period); err != nil || p != cpuPeriod {
		if err := g.host.sys.write(period, strconv.Itoa(cpuPeriod)); err != nil {
			return err
		}
	}
	quota := "-1"
	if cores > 0 {
		quota = strconv.FormatInt(cpuQuota(cores), 10)
	}
	return g.host.sys.write(filepath.Join(dir, "cpu.cfs_quota_us"), quota)
}

// cpuQuota is the CFS quota for cores per cpuPeriod, at least the kernel's
// minimum of 1 ms.
func cpuQuota(cores float64) int64 {
	return max(int64(math.Round(cores*cpuPeriod)), 1000)
}

// OOMKills returns how many processes the kernel's OOM killer killed in this
// group (v2 memory.events oom_kill; v1 memory.oom_control's oom_kill line,
// kernel >= 4.13). It returns 0 when the kernel does not say.
func (g *Group) OOMKills() int {
	file := g.memoryFile("memory.oom_control", "memory.events")
	if file == "" {
		return 0
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), " "); ok && k == "oom_kill" {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}

// MemoryUsage is the memory the kernel charges to the group now, in bytes
// (memory.current on v2, memory.usage_in_bytes on v1); 0 when the group has
// no memory controller.
func (g *Group) MemoryUsage() int64 {
	// A pool reads its sandboxes' usage each time it would grow: through a
	// descriptor kept open, read again from its start, rather than a path
	// opened each time (one system call instead of three).
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.destroyed {
		return 0
	}
	if g.usage == nil {
		file := g.memoryFile("memory.usage_in_bytes", "memory.current")
		if file == "" {
			return 0
		}
		f, err := os.Open(file)
		if err != nil {
			return 0
		}
		g.usage = f
	}
	var buf [32]byte
	n, err := g.usage.ReadAt(buf[:], 0)
	if n == 0 && err != nil {
		return 0
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(buf[:n])), 10, 64)
	if err != nil {
		return 0
	}
	return v
}

// MemoryPeak is the most memory the kernel charged to the group at once,
// in bytes (memory.peak on v2, from Linux 5.19; memory.max_usage_in_bytes
// on v1); 0 when the group has no memory controller or the kernel does not
// say.
func (g *Group) MemoryPeak() int64 {
	file := g.memoryFile("memory.max_usage_in_bytes", "memory.peak")
	if file == "" {
		return 0
	}
	n, err := readInt(file)
	if err != nil {
		return 0
	}
	return n
}

// memoryFile is the path of the memory controller's file named v1 or v2,
// as the host's version has it; "" when the group has no memory controller.
func (g *Group) memoryFile(v1, v2 string) string {
	dir := g.dirs["memory"]
	if dir == "" {
		return ""
	}
	if g.host.Version == 2 {
		return filepath.Join(dir, v2)
	}
	return filepath.Join(dir, v1)
}

// Kill kills every process in the group and returns once the group is empty,
// or with an error after 5 s. On v2 with cgroup.kill (Linux 5.14) the kernel
// does it in one write. Otherwise Kill freezes the group (v2 cgroup.freeze,
// or the v1 freezer when mounted) so that nothing in it can fork or exit,
// sends SIGKILL to every process listed in cgroup.procs, thaws it (a task
// frozen by the v1 freezer dies only once thawed), and repeats while
// processes remain.
func (g *Group) Kill() error {
	_, err := g.kill()
	return err
}

// kill is Kill, counting the distinct processes it found in the group.
func (g *Group) kill() (int, error) {
	var seen []int
	count := func(pids []int) {
		for _, p := range pids {
			if !slices.Contains(seen, p) {
				seen = append(seen, p)
			}
		}
	}
	deadline := time.Now().Add(killTimeout)
	if g.host.Version == 2 {
		killFile := filepath.Join(g.paths[0], "cgroup.kill")
		if exists(killFile) {
			for {
				count(g.procs())
				err := g.host.sys.write(killFile, "1")
				if errors.Is(err, fs.ErrNotExist) {
					return len(seen), nil // the group is gone
				}
				if err != nil {
					return len(seen), fmt.Errorf("cgroup: kill: %w", err)
				}
				if g.waitEmpty(earlier(deadline, time.Now().Add(time.Second))) {
					return len(seen), nil
				}
				if time.Now().After(deadline) {
					return len(seen), g.stillRunning()
				}
			}
		}
	}
	if len(g.procs()) == 0 {
		return 0, nil // nothing to freeze: a run whose processes have all ended
	}
	freeze, thaw := g.freezer()
	for {
		if freeze != nil {
			freeze()
		}
		pids := g.procs()
		if len(pids) > 0 {
			count(pids)
			g.signal(pids)
		}
		if thaw != nil {
			thaw()
		}
		if len(pids) == 0 || g.waitEmpty(earlier(deadline, time.Now().Add(100*time.Millisecond))) {
			return len(seen), nil
		}
		if time.Now().After(deadline) {
			return len(seen), g.stillRunning()
		}
	}
}

func (g *Group) stillRunning() error {
	return fmt.Errorf("cgroup: %d processes still in %s after %v", len(g.procs()), g.paths[0], killTimeout)
}

// freezer returns the group's freeze and thaw operations, or nils when the
// host has no freezer for it. freeze waits up to half a second for the
// kernel to report the group frozen, and goes on regardless.
func (g *Group) freezer() (freeze, thaw func()) {
	w := g.host.sys.write
	var file, frozen, thawed, stateFile, frozenState string
	if g.host.Version == 2 {
		dir := g.paths[0]
		file, frozen, thawed = filepath.Join(dir, "cgroup.freeze"), "1", "0"
		stateFile, frozenState = filepath.Join(dir, "cgroup.events"), "frozen 1"
	} else if dir := g.dirs["freezer"]; dir != "" {
		file, frozen, thawed = filepath.Join(dir, "freezer.state"), "FROZEN", "THAWED"
		stateFile, frozenState = file, "FROZEN"
	}
	if file == "" || !exists(file) {
		return nil, nil
	}
	freeze = func() {
		if w(file, frozen) != nil {
			return
		}
		until := time.Now().Add(500 * time.Millisecond)
		for time.Now().Before(until) {
			data, err := os.ReadFile(stateFile)
			if err != nil || slices.Contains(strings.Split(string(data), "\n"), frozenState) {
				return
			}
			time.Sleep(pollInterval)
		}
	}
	thaw = func() { w(file, thawed) }
	return freeze, thaw
}

// signal sends SIGKILL to the processes pids, read from cgroup.procs. A
// listed process may have exited, and its number been reused by a process
// outside the group, before it is signalled; so each is first pinned with
// pidfd_open, then cgroup.procs is read again, and only a pidfd whose number
// is still listed is signalled. If the pinned process were dead by then, the
// signal would fail with ESRCH rather than reach the number's new owner.
func (g *Group) signal(pids []int) {
	type pinned struct{ pid, fd int }
	var ps []pinned
	for _, pid := range pids {
		fd, err := unix.PidfdOpen(pid, 0)
		switch {
		case err == nil:
			ps = append(ps, pinned{pid, fd})
		case errors.Is(err, unix.ENOSYS):
			// Before Linux 5.3 there are no pidfds: signal the number read
			// an instant ago. With a freezer the group is frozen, so its
			// processes cannot have exited meanwhile.
			unix.Kill(pid, unix.SIGKILL)
		}
		// ESRCH: already gone.
	}
	if len(ps) == 0 {
		return
	}
	still := g.procs()
	for _, p := range ps {
		if slices.Contains(still, p.pid) {
			unix.PidfdSendSignal(p.fd, unix.SIGKILL, nil, 0)
		}
		unix.Close(p.fd)
	}
}

// procs lists the processes in the group. The kernel leaves out processes
// that have exited and wait to be reaped. This process is never among
// them: it is listed while one of its threads stands in the group to start
// a process there (EnterThread), and is not the group's.
//
// One hierarchy is read, the first: a process enters the group in all of
// them at once (Add, EnterThread, a clone into it), its children are born
// where it is, and nothing in a sandbox can move a process between
// cgroups (no cgroup filesystem it could write to).
func (g *Group) procs() []int {
	var all []int
	for _, pid := range readPids(filepath.Join(g.paths[0], "cgroup.procs")) {
		// cgroup.procs may list a process more than once (cgroups(7)).
		if pid != g.host.sys.pid && !slices.Contains(all, pid) {
			all = append(all, pid)
		}
	}
	return all
}

// waitEmpty polls until the group holds no processes or until passes.
func (g *Group) waitEmpty(until time.Time) bool {
	for {
		if len(g.procs()) == 0 {
			return true
		}
		if time.Now().After(until) {
			return false
		}
		time.Sleep(pollInterval)
	}
}

// Destroy kills what is left and removes the group's directories. It
// retries rmdir for a moment on EBUSY, as killed processes take a moment to
// leave. Destroying twice is harmless.
func (g *Group) Destroy() error {
	g.mu.Lock()
	if g.destroyed {
		g.mu.Unlock()
		return nil
	}
	g.destroyed = true
	fd := g.fd
	g.fd = -1
	if g.usage != nil {
		g.usage.Close()
		g.usage = nil
	}
	g.mu.Unlock()

	err := g.Kill()
	if fd >= 0 {
		unix.Close(fd)
	}
	return errors.Join(err, g.removeDirs())
}

func (g *Group) removeDirs() error {
	var errs []error
	for i := len(g.paths) - 1; i >= 0; i-- {
		dir := g.paths[i]
		until := time.Now().Add(rmdirTimeout)
		for {
			err := g.host.sys.rmdir(dir)
			if err == nil || errors.Is(err, fs.ErrNotExist) {
				break
			}
			if errors.Is(err, unix.EBUSY) && time.Now().Before(until) {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			errs = append(errs, fmt.Errorf("cgroup: %w", err))
			break
		}
	}
	return errors.Join(errs...)
}

// Describe says what enforced the limits, for Result.isolation, e.g.
// "cgroup v1 (memory, pids)". It names only the limits in force.
func (g *Group) Describe() string {
	g.mu.Lock()
	lim := g.applied
	g.mu.Unlock()
	var on []string
	if lim.Memory > 0 {
		on = append(on, "memory")
	}
	if lim.Processes > 0 {
		on = append(on, "pids")
	}
	if lim.CPU > 0 {
		on = append(on, "cpu")
	}
	if len(on) == 0 {
		return fmt.Sprintf("cgroup v%d (no limits)", g.host.Version)
	}
	return fmt.Sprintf("cgroup v%d (%s)", g.host.Version, strings.Join(on, ", "))
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// writable checks that this process may create groups in dir: a parent
// left by an earlier run as root exists for everyone, but is not everyone's.
func writable(dir string) error {
	if err := unix.Faccessat(unix.AT_FDCWD, dir, unix.W_OK, unix.AT_EACCESS); err != nil {
		return &fs.PathError{Op: "access", Path: dir, Err: err}
	}
	return nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func (h *Host) mkdirExist(dir string) error {
	if err := h.sys.mkdir(dir); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return nil
}

// readTokens reads a space-separated list such as cgroup.controllers; a
// file that cannot be read gives none.
func readTokens(path string) []string {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	return strings.Fields(string(data))
}

// readPids reads cgroup.procs; a missing group has none.
func readPids(path string) []int {
	var pids []int
	for _, f := range readTokens(path) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

func readInt(path string) (int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
}
