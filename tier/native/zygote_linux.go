//go:build linux

package native

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/cgroup"
	"github.com/codecell-dev/codecell/internal/sandboxinit"
	"github.com/codecell-dev/codecell/internal/seccomp"
	"github.com/codecell-dev/codecell/internal/spawnwatch"
	"github.com/codecell-dev/codecell/internal/workspace"
)

// Fork servers. For a language whose runner can be loaded without running
// a program (codecell.WarmStart.Fork: Python), the tier keeps a template
// sandbox whose init became a fork server: the interpreter, its runner
// loaded and nothing run. Each run is a child of it that enters new mount,
// UTS, IPC, network, pid and cgroup namespaces, joins a cgroup of its own,
// mounts its own tmpfs workspace, /tmp, /dev/shm and runner directory and
// its own /proc, confines itself as the program (capabilities, user,
// no_new_privs, Landlock, seccomp: the plans below, worked out here) and
// only then reads its job. The interpreter's start is off the run's path,
// and so is building the sandbox: a run costs two forks, a few mounts and
// its own code. zygote.py is the server; it says what each process does.
//
// A fork server without a runner (execKey) serves every other program:
// each run is forked and built the same way, and its process executes the
// program's command, as a sandbox's init would start it. What that saves
// is building the sandbox (two executions of codecell and some thirty
// mounts), not the interpreter's start.
//
// What runs forked from one template share is what the template is: its
// read-only root, its user namespace and host uid. A fresh pid namespace
// and /proc hide each run's processes from the others; a fresh mount
// namespace its files; Landlock's scopes its signals and abstract sockets.

//go:embed zygote.py
var zygoteScript []byte

// maxTemplates bounds how many fork servers a tier keeps, one per warm key;
// the one used least recently goes first.
const maxTemplates = 4

// execKey is the key of the fork server that executes each run's command.
const execKey = "exec"

// serverSpec is what starts a fork server.
type serverSpec struct {
	key  string
	lang string              // the language of the interpreter it holds; "" for none
	argv []string            // the server's interpreter and its options
	warm *codecell.WarmStart // the runner it loads (Fork.Runner) and its files; nil for none
}

// zygote is a fork server, on the host's side.
type zygote struct {
	key   string
	lang  string    // the interpreter's language; "" when it holds none
	sb    *sandbox  // the template; its control socket takes fork requests
	ready readyInfo // what its runs' confinement applies
	used  time.Time // the tier's poolMu guards it

	mu        sync.Mutex // guards the rest; one request at a time on the control socket
	spares    []*sandbox // runs forked and in their cgroups, waiting
	preparing bool
	closed    bool
	// home are the v1 tasks files of the template's own cgroup, which the
	// server's thread goes back to after each fork (prepare), opened once.
	home []*os.File
}

// execs reports whether z's runs execute their command (execKey).
func (z *zygote) execs() bool { return z.key == execKey }

// servers lists the tier's fork servers, for reading them once poolMu is
// released (each z.mu is taken after poolMu, never before). Called with
// poolMu held.
func (t *Tier) servers() []*zygote {
	out := make([]*zygote, 0, len(t.templates))
	for _, z := range t.templates {
		out = append(out, z)
	}
	return out
}

func (z *zygote) close() {
	z.mu.Lock()
	z.closed = true
	spare := z.spares
	z.spares = nil
	for _, f := range z.home {
		f.Close()
	}
	z.home = nil
	z.mu.Unlock()
	for _, sb := range spare {
		sb.close()
	}
	z.sb.close()
}

// confinement is what every forked run applies, worked out once.
var runConfinement = sync.OnceValues(func() (forkConfig, error) {
	var cfg forkConfig
	prog, err := seccomp.Filter()
	if err != nil {
		return cfg, err
	}
	for _, ins := range prog {
		cfg.Seccomp = binary.NativeEndian.AppendUint16(cfg.Seccomp, ins.Code)
		cfg.Seccomp = append(cfg.Seccomp, ins.Jt, ins.Jf)
		cfg.Seccomp = binary.NativeEndian.AppendUint32(cfg.Seccomp, ins.K)
	}
	cfg.CapLast, cfg.SupervisorCaps = sandboxinit.CapLast(), initCaps
	if LandlockABI() > 0 {
		plan, err := sandboxinit.PlanLandlock(landlockRules{
			Writable: []string{workspaceDir, "/tmp", "/dev/shm"},
			Devices:  []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"},
		})
		if err != nil {
			return cfg, err
		}
		cfg.Landlock = &plan
	}
	cfg.Proc = sandboxinit.ProcMasking()
	return cfg, nil
})

// serverFor says which fork server runs the job: the template of its
// interpreter when it can be one, else the server that executes commands;
// ok is false when the job runs in a sandbox of its own. Runs are forked
// only where the cgroup controllers keep them apart (without a pids
// controller, processes would be counted per host uid, which the runs of a
// server share).
func (t *Tier) serverFor(job *codecell.Job) (spec serverSpec, ok bool) {
	if t.poolSize() == 0 || t.closed.Load() || t.cgroups == nil ||
		!slices.Contains(t.cgroups.Controllers, "memory") || !slices.Contains(t.cgroups.Controllers, "pids") {
		return spec, false
	}
	if t.warmable(job) && job.Warm.Fork != nil {
		w := *job.Warm
		w.Message = nil // the job's own
		key := w.Key
		if len(w.Fork.Preload) > 0 {
			// A template of its own: see codecell.ForkStart.Preload.
			key += " " + strings.Join(w.Fork.Preload, " ")
		}
		return serverSpec{key: key, lang: job.Language, argv: w.Fork.Interpreter, warm: &w}, true
	}
	py := execInterpreter()
	if py == "" || t.visible(py) != nil {
		return spec, false
	}
	// -S: no site directories; the server imports only the standard
	// library's modules it names.
	return serverSpec{key: execKey, argv: []string{py, "-I", "-S", "-B"}}, true
}

// execInterpreter is the Python that serves as the fork server executing
// commands: the system's, which the sandbox shows; "" when there is none.
var execInterpreter = sync.OnceValue(func() string {
	for _, p := range []string{"/usr/bin/python3", "/bin/python3"} {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p
		}
	}
	return ""
})

// zygoteFor returns the fork server for the job, or nil when there is
// none ready; it starts one then, in the background (and waits for it
// when the tier's forkEvery asks).
func (t *Tier) zygoteFor(job *codecell.Job) *zygote {
	spec, ok := t.serverFor(job)
	if !ok {
		return nil
	}
	key := spec.key
	t.poolMu.Lock()
	z := t.templates[key]
	if z != nil && !z.sb.alive() {
		delete(t.templates, key)
		go z.close()
		z = nil
	}
	if z != nil {
		z.used = time.Now()
		t.poolMu.Unlock()
		return z
	}
	started, ok := t.templateStarts[key]
	if !ok && time.Since(t.templateFailed[key]) > time.Minute {
		started = make(chan struct{})
		if t.templateStarts == nil {
			t.templateStarts = map[string]chan struct{}{}
		}
		t.templateStarts[key] = started
		t.bg.Add(1)
		go t.startTemplate(job.InitPath, spec, started)
	}
	wait := t.forkEvery && started != nil
	t.poolMu.Unlock()
	if !wait {
		return nil
	}
	<-started
	t.poolMu.Lock()
	defer t.poolMu.Unlock()
	return t.templates[key]
}

// startTemplate starts a fork server for spec and adds it to the tier's.
func (t *Tier) startTemplate(initPath string, spec serverSpec, started chan struct{}) {
	defer t.bg.Done()
	if t.pooledTooMuch() {
		// No room for another server now; a later run asks again.
		t.poolMu.Lock()
		delete(t.templateStarts, spec.key)
		t.poolMu.Unlock()
		close(started)
		return
	}
	z, err := t.newZygote(initPath, spec)
	t.poolMu.Lock()
	delete(t.templateStarts, spec.key)
	if err != nil {
		if t.templateFailed == nil {
			t.templateFailed = map[string]time.Time{}
		}
		t.templateFailed[spec.key] = time.Now()
		t.demand.lastErr = fmt.Errorf("starting a fork server: %w", err)
		z = nil
	}
	var evict *zygote
	if z != nil && !t.closed.Load() {
		if t.templates == nil {
			t.templates = map[string]*zygote{}
		}
		z.used = time.Now()
		t.templates[z.key] = z
		if len(t.templates) > maxTemplates {
			for _, o := range t.templates {
				if evict == nil || o.used.Before(evict.used) {
					evict = o
				}
			}
			delete(t.templates, evict.key)
		}
		z = nil
	}
	t.poolMu.Unlock()
	close(started)
	for _, o := range []*zygote{z, evict} {
		if o != nil {
			o.close()
		}
	}
}

// newZygote builds a template sandbox and starts the fork server in it.
func (t *Tier) newZygote(initPath string, spec serverSpec) (*zygote, error) {
	cfg, err := runConfinement()
	if err != nil {
		return nil, err
	}
	if len(spec.argv) == 0 {
		return nil, errors.New("the interpreter cannot be a fork server")
	}
	var files string
	if spec.warm != nil {
		if files, err = t.warmDir(spec.warm); err != nil {
			return nil, err
		}
	}
	sb, err := t.spawnWith(initPath, codecell.DefaultLimits.Workspace, true, nil, nil)
	if err != nil {
		return nil, err
	}
	fail := func(what string, err error) (*zygote, error) {
		sb.close()
		return nil, sb.failure(what, err)
	}
	root := fmt.Sprintf("/proc/%d/root", sb.pid)
	owner, _ := sb.id.owners()
	if files != "" {
		if err := workspace.CopyTree(files, root+runnerDir, owner); err != nil {
			return fail("copying the interpreter's files into the sandbox", err)
		}
	}
	server, err := t.warmDir(&codecell.WarmStart{Key: "fork server", Files: map[string][]byte{"zygote.py": zygoteScript}})
	if err == nil {
		err = workspace.CopyTree(server, root+runnerDir, owner)
	}
	if err != nil {
		return fail("writing the fork server into the sandbox", err)
	}
	argv := append(slices.Clone(spec.argv), runnerDir+"/zygote.py", "3")
	env := []string{"LANG=C.UTF-8"}
	if spec.warm != nil {
		argv, env = append(append(argv, spec.warm.Fork.Runner), spec.warm.Fork.Preload...), spec.warm.Env
	}
	cfg.ProgramUID = sb.id.ProgramUID()
	if err := sb.c.Send(message{Template: &templateSpec{Argv: argv, Env: env, Dir: "/"}}); err != nil {
		return fail("starting the fork server", err)
	}
	if err := sb.c.Send(message{Config: &cfg}); err != nil {
		return fail("starting the fork server", err)
	}
	var m message
	if err := sb.recvTimeout(&m, 30*time.Second); err != nil {
		return fail("starting the fork server", err)
	}
	if m.Ready == nil {
		return fail("starting the fork server", errors.New(m.Error))
	}
	z := &zygote{key: spec.key, lang: spec.lang, sb: sb}
	z.ready.Seccomp = sandboxinit.SeccompApplied()
	if cfg.Landlock != nil {
		z.ready.Landlock = cfg.Landlock.Applied
	}
	return z, nil
}

// Making a run's sandbox takes milliseconds: its first child is cloned into
// the run's cgroup (on v2 by the host moving it, which waits for an RCU
// grace period, the kernel's cgroup_threadgroup_rwsem; on v1 by the server's
// thread standing in the cgroup for the clone), then come the namespaces,
// some thirty mounts and the confinement. So each fork server
// keeps spares, runs forked and built ahead of their job: a job takes one
// and the next is prepared in the background. Nothing of a job has reached
// a spare before it is taken.
const spares = 2

// prepare has the fork server fork a run: its first child moved into a
// cgroup of its own, with the default limits, then its namespaces made and
// its filesystems mounted (the workspace of workspaceSize), its supervisor
// confined and waiting for the job.
func (t *Tier) prepare(z *zygote, workspaceSize int64) (*sandbox, error) {
	sb := &sandbox{t: t, id: z.sb.id, forked: true, execs: z.execs(), stderr: &boundedBuffer{max: 16 << 10}, done: make(chan struct{}), ready: z.ready}
	if t.cgroups != nil && t.cgroups.Version != 0 {
		def := codecell.DefaultLimits
		want := cgroup.Limits{Memory: def.Memory, Processes: def.Processes + 1}
		sb.cg, sb.cgErr = t.cgroups.New(cgroup.OwnedID(), want)
		if sb.cgErr != nil {
			return nil, sb.cgErr
		}
		sb.limits = want
	}
	host, end, err := socketPair()
	if err != nil {
		sb.release()
		return nil, err
	}
	sb.c = newConn(host)
	fork, fds := &forkSpec{}, []int{int(end.Fd())}
	into := tasksFiles(sb.cg)
	z.mu.Lock()
	if len(into) > 0 && z.home == nil && !z.closed {
		z.home = tasksFiles(z.sb.cg)
	}
	if len(into) > 0 && len(z.home) > 0 {
		// cgroup v1: the server's thread moves into the run's cgroup to
		// fork it there, rather than the host moving the run after its
		// fork, which waits for an RCU grace period.
		fork.Enter = len(into)
		for _, f := range append(into, z.home...) {
			fds = append(fds, int(f.Fd()))
		}
	}
	err = z.sb.c.Send(message{Fork: fork}, fds...)
	z.mu.Unlock()
	end.Close()
	for _, f := range into {
		f.Close()
	}
	if err != nil {
		sb.close()
		return nil, fmt.Errorf("asking the fork server for a run: %w", err)
	}
	// The child says hello with a pidfd of its own, and whether it was born
	// in the run's cgroup; if not, the host moves it there before it makes
	// anything.
	var placed bool
	pidfd, err := sb.expect(func(m *message) bool { placed = m.Placed; return m.Hello })
	if err != nil {
		sb.close()
		return nil, err
	}
	pid, err := pidOf(pidfd)
	if err == nil && sb.cg != nil {
		t.noteCgroup(placed)
		if !placed {
			err = sb.cg.Add(pid)
		}
	}
	unix.Close(pidfd)
	if err != nil {
		sb.close()
		return nil, fmt.Errorf("moving the run into its cgroup: %w", err)
	}
	if err := sb.c.Send(message{Go: &forkSpec{Mounts: runMounts(workspaceSize, t.tmpSize(), sb.id.ProgramUID())}}); err != nil {
		sb.close()
		return nil, fmt.Errorf("starting a run: %w", err)
	}
	// Its supervisor, pid 1 of the run's namespaces, says ready.
	if sb.pidfd, err = sb.expect(func(m *message) bool { return m.Ready != nil }); err != nil {
		sb.close()
		return nil, err
	}
	if sb.pid, err = pidOf(sb.pidfd); err != nil {
		sb.close()
		return nil, err
	}
	watchExit(sb.pidfd, sb.done)
	spawnwatch.Spawned(t, sb.pid, sb.cg.Paths)
	sb.placeToolClient()
	return sb, nil
}

// spare returns a prepared child of z, or prepares one. The spares are
// topped up once the run's Result is built (see runForked), so that
// preparing the next does not take the CPU from this one, unless none is
// left.
func (t *Tier) spare(z *zygote) (*sandbox, error) {
	z.mu.Lock()
	var sb *sandbox
	if n := len(z.spares); n > 0 {
		sb, z.spares = z.spares[n-1], z.spares[:n-1]
	}
	left := len(z.spares)
	z.mu.Unlock()
	if left == 0 {
		t.topUp(z)
	}
	if sb != nil && sb.alive() {
		return sb, nil
	}
	if sb != nil {
		go sb.close()
	}
	return t.prepare(z, codecell.DefaultLimits.Workspace)
}

// topUp prepares spares for z in the background, one at a time.
func (t *Tier) topUp(z *zygote) {
	z.mu.Lock()
	if z.preparing || len(z.spares) >= spares || t.closed.Load() {
		z.mu.Unlock()
		return
	}
	z.preparing = true
	z.mu.Unlock()
	t.bg.Add(1)
	go func() {
		defer t.bg.Done()
		for {
			if t.pooledTooMuch() {
				z.mu.Lock()
				z.preparing = false
				z.mu.Unlock()
				return
			}
			sb, err := t.prepare(z, codecell.DefaultLimits.Workspace)
			z.mu.Lock()
			if err != nil || t.closed.Load() || z.closed {
				z.preparing = false
				z.mu.Unlock()
				if sb != nil {
					sb.close()
				}
				return
			}
			z.spares = append(z.spares, sb)
			if len(z.spares) >= spares {
				z.preparing = false
				z.mu.Unlock()
				return
			}
			z.mu.Unlock()
		}
	}()
}

// fork returns a run for job from z, a spare if one fits: its sandbox
// built, its supervisor waiting for the job. The sandbox runs the job as
// any other does (sandbox.run, which also sets the job's cgroup limits).
func (t *Tier) fork(z *zygote, job *codecell.Job) (*sandbox, error) {
	if job.Limits.Workspace == codecell.DefaultLimits.Workspace {
		return t.spare(z)
	}
	return t.prepare(z, job.Limits.Workspace)
}

// expect reads the next message of a run being forked, which must be the
// one ok accepts, with one descriptor: a pidfd.
func (sb *sandbox) expect(ok func(*message) bool) (int, error) {
	var m message
	fds, err := sb.recvFDs(&m, 30*time.Second)
	if err != nil {
		return -1, fmt.Errorf("forking a run: %w", err)
	}
	if !ok(&m) || len(fds) != 1 {
		closeAll(fds)
		if m.Error != "" {
			return -1, fmt.Errorf("forking a run: %s", m.Error)
		}
		return -1, errors.New("forking a run: the fork server answered out of turn")
	}
	return fds[0], nil
}

// tasksFiles opens the v1 tasks files of g (cgroup.Group.OpenTasks), or
// returns none: no group, a v2 one, or files that would not open, in which
// case the run is moved after its fork.
func tasksFiles(g *cgroup.Group) []*os.File {
	if g == nil {
		return nil
	}
	files, err := g.OpenTasks()
	if err != nil {
		return nil
	}
	return files
}

// watchExit closes done once the process of pidfd has ended. It waits in
// Go's network poller, on a duplicate of the pidfd (readable once the
// process has ended), rather than hold a thread in poll(2) for the run's
// life; where the poller will not take it, in poll(2).
func watchExit(pidfd int, done chan struct{}) {
	ended := func(fd int, timeout int) bool {
		for {
			n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, timeout)
			if err != unix.EINTR {
				return err != nil || n > 0
			}
		}
	}
	var rc syscall.RawConn
	var f *os.File
	if dup, err := unix.FcntlInt(uintptr(pidfd), unix.F_DUPFD_CLOEXEC, 0); err == nil {
		// O_NONBLOCK is the open file's, which pidfd shares: it changes
		// only waitid(2) on it, which a pidfd of a process not our child
		// has no use for.
		if err := unix.SetNonblock(dup, true); err == nil {
			f = os.NewFile(uintptr(dup), "pidfd")
			rc, _ = f.SyscallConn()
		} else {
			unix.Close(dup)
		}
	}
	go func() {
		defer close(done)
		if f != nil {
			defer f.Close()
			if rc != nil && rc.Read(func(fd uintptr) bool { return ended(int(fd), 0) }) == nil {
				return
			}
		}
		ended(pidfd, -1)
	}()
}

// pidOf returns the host pid of the process a pidfd refers to.
func pidOf(pidfd int) (int, error) {
	f, err := os.Open(fmt.Sprintf("/proc/self/fdinfo/%d", pidfd))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "Pid:"); ok {
			pid, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || pid <= 0 {
				return 0, errors.New("the process of a pidfd has ended")
			}
			return pid, nil
		}
	}
	return 0, errors.New("no pid in a pidfd's fdinfo")
}

// runMounts are the writable filesystems of a forked run, each a tmpfs of
// its own over its template's: those a sandbox's init mounts (tmpfsMounts,
// shmMount).
func runMounts(workspaceSize, tmpSize int64, programUID int) []mountSpec {
	return append(sandboxinit.TmpfsMounts(workspaceSize, tmpSize, programUID), sandboxinit.ShmMount(shmSize))
}

// runForked runs the job forked from z; ok is false when the fork server
// could not start a run, and the job is still to run.
func (t *Tier) runForked(ctx context.Context, z *zygote, job *codecell.Job) (out *codecell.Outcome, ok bool, err error) {
	sb, err := t.fork(z, job)
	if err != nil {
		t.poolMu.Lock()
		t.demand.lastErr = err
		if t.templates[z.key] == z && !z.sb.alive() {
			delete(t.templates, z.key)
			go z.close()
		}
		t.poolMu.Unlock()
		return nil, false, err
	}
	out, err = t.runIn(ctx, sb, job)
	t.afterResult(job, func() { t.topUp(z) })
	return out, true, err
}
