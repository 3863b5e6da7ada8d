//go:build linux

package native

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/bridge"
	"github.com/codecell-dev/codecell/internal/cgroup"
	"github.com/codecell-dev/codecell/internal/egress"
	"github.com/codecell-dev/codecell/internal/sandboxinit"
	"github.com/codecell-dev/codecell/internal/spawnwatch"
	"github.com/codecell-dev/codecell/internal/workspace"
)

// state is the tier's runtime state: the host's capabilities, probed once,
// and the pool of ready sandboxes.
type state struct {
	egressCA egressAuthority // for the hosts of network secrets (network_linux.go)

	probeOnce sync.Once
	probeErr  error
	ahead     *aheadBuild // the sandbox BuildAhead builds; poolMu guards it
	// hostErr is a sandbox's build that this host refused (Probe's start
	// passed, but a mount the sandbox needs did not): Probe says it from
	// then on, so that auto and doctor refuse as the runs fail.
	hostErr atomic.Pointer[error]
	cgroups *cgroup.Host

	rootDir  string
	rootOnce sync.Once

	// shown holds the interpreters visible found inside what the sandbox
	// shows: each is resolved once, not at every run.
	shown sync.Map

	poolMu   sync.Mutex
	poolInit string     // the init binary the pool's sandboxes run; "" until a job asks for the pool
	ready    []*sandbox // built and waiting, some with an interpreter started
	wanted   chan struct{}
	demand   demand
	warmDirs map[string]string // host directories holding each warm key's files

	closed   atomic.Bool    // Close was called: no pool from then on
	filling  sync.WaitGroup // the fillers, while they build sandboxes
	fillMu   sync.RWMutex   // read-held by each filler while it builds and adds a sandbox
	bg       sync.WaitGroup // sandboxes being closed after their run
	after    atomic.Int32   // runs whose background work waits for their Result (afterResult)
	warmRuns atomic.Int64
	coldRuns atomic.Int64
	forkRuns atomic.Int64
	execRuns atomic.Int64
	// born and moved count sandboxes started in their cgroup and those
	// moved into it after their start (see PoolStats and noteCgroup).
	born, moved atomic.Int64

	// Fork servers (zygote_linux.go), by warm key or execKey; poolMu
	// guards them.
	templates      map[string]*zygote
	templateStarts map[string]chan struct{} // closed when the start ends
	templateFailed map[string]time.Time     // when a start last failed
	// forkEvery, set by tests, waits for a fork server for every run that
	// can have one.
	forkEvery bool
	// warmEvery, set by tests, starts every run's interpreter before its
	// job, in a sandbox of its own when the pool has none ready for it.
	warmEvery bool
}

// Close empties the pool and waits until every sandbox a run left is torn
// down: their processes gone, their cgroups removed. Runs after Close still
// work, each in a sandbox built for it. A service calls it when it stops,
// so that it leaves nothing behind.
func (t *Tier) Close() error {
	t.closed.Store(true)
	// A sandbox a filler is building now is closed by the filler.
	t.fillMu.Lock()
	t.fillMu.Unlock()
	t.poolMu.Lock()
	ready := t.ready
	t.ready = nil
	templates := t.templates
	t.templates = nil
	if a := t.ahead; a != nil && a.sb != nil && !a.taken {
		a.taken = true
		ready = append(ready, a.sb)
	}
	t.poolMu.Unlock()
	for _, z := range templates {
		t.bg.Add(1)
		go func() {
			defer t.bg.Done()
			z.close()
		}()
	}
	// Fork servers being started, and spares being prepared, add
	// themselves to nothing now.
	t.bg.Wait()
	t.poolMu.Lock()
	dirs := t.warmDirs
	t.warmDirs = nil
	t.poolMu.Unlock()
	// Each close waits for its init to exit: they wait side by side.
	for _, sb := range ready {
		t.bg.Add(1)
		go func() {
			defer t.bg.Done()
			sb.close()
		}()
	}
	t.bg.Wait()
	for _, d := range dirs {
		os.RemoveAll(d)
	}
	return nil
}

// namespaces are created at clone; the cgroup namespace comes later (see
// sandboxinit's initStage).
const cloneFlags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID |
	syscall.CLONE_NEWNET | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS

var namespaceNames = []string{"user", "mount", "pid", "network", "ipc", "uts", "cgroup"}

// Probe checks, once, that this host can give the sandbox: user namespaces
// that this user may create, and the rest of the kernel's pieces.
func (t *Tier) Probe() error {
	t.probeOnce.Do(func() {
		t.cgroups = cgroup.Detect()
		// What a codecell process that died left behind: its sandboxes'
		// processes died with it (Pdeathsig), their cgroups did not.
		go t.cgroups.Sweep(time.Minute)
		if t.probeErr = probeHost(); t.probeErr != nil {
			return
		}
		t.poolMu.Lock()
		a := t.ahead
		t.poolMu.Unlock()
		if a != nil {
			// A sandbox built is a start that worked: no other is needed.
			sb, err := t.spawn(a.initPath, codecell.DefaultLimits.Workspace)
			t.poolMu.Lock()
			a.sb = sb
			t.poolMu.Unlock()
			if err == nil {
				return
			}
		}
		t.probeErr = probeStart(t.uidBase())
	})
	if err := t.hostErr.Load(); err != nil && t.probeErr == nil {
		return *err
	}
	return t.probeErr
}

// BuildAhead builds a sandbox now, in the background, for the next run
// to take if it can (a run with no mounts or network of its own, the
// default workspace, and initPath for its init): for a process that runs
// one program, whose sandbox is then built while the run is made ready.
// Its build stands for the probe's start (see Probe), which waits for it.
// Call it before the tier's first run; Close closes it if no run took it.
func (t *Tier) BuildAhead(initPath string) {
	t.poolMu.Lock()
	if t.ahead == nil {
		t.ahead = &aheadBuild{initPath: initPath}
	}
	t.poolMu.Unlock()
	go t.Probe()
}

// aheadBuild is the sandbox BuildAhead builds; poolMu guards it.
type aheadBuild struct {
	initPath string
	sb       *sandbox // nil until built, and when the build failed
	taken    bool
}

// takeAhead returns the sandbox built ahead when the job can run in it,
// and nil otherwise. It is taken once; a job that cannot run in it leaves
// it to Close.
func (t *Tier) takeAhead(job *codecell.Job) *sandbox {
	t.poolMu.Lock()
	defer t.poolMu.Unlock()
	a := t.ahead
	if a == nil || a.sb == nil || a.taken || job.InitPath != a.initPath || job.Limits.Workspace != codecell.DefaultLimits.Workspace || !a.sb.alive() {
		return nil
	}
	a.taken = true
	return a.sb
}

// probeHost checks what the host's settings say about namespaces: what
// disables them on the usual hosts. Only a start says whether this host
// allows one (probeStart).
func probeHost() error {
	for _, ns := range []string{"user", "mnt", "pid", "net", "ipc", "uts", "cgroup"} {
		if _, err := os.Stat("/proc/self/ns/" + ns); err != nil {
			return fmt.Errorf("this kernel has no %s namespaces", ns)
		}
	}
	if n, err := readInt("/proc/sys/user/max_user_namespaces"); err == nil && n == 0 {
		return errors.New("user namespaces are disabled (user.max_user_namespaces is 0)")
	}
	if os.Geteuid() != 0 {
		if n, err := readInt("/proc/sys/kernel/unprivileged_userns_clone"); err == nil && n == 0 {
			return errors.New("unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone is 0); run codecell as root or enable them")
		}
		if n, err := readInt("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"); err == nil && n == 1 {
			return errors.New("AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns is 1); run codecell as root or allow it a profile")
		}
	}
	return nil
}

func readInt(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// Run runs one job in a sandbox of its own.
func (t *Tier) Run(ctx context.Context, job *codecell.Job) (*codecell.Outcome, error) {
	if err := t.canRun(job); err != nil {
		return nil, err
	}
	if len(job.Network) > 0 || len(job.Mounts) > 0 {
		return t.runNetworked(ctx, job)
	}
	if z := t.zygoteFor(job); z != nil {
		if z.execs() && t.warmable(job) {
			// An interpreter the pool started for the job is quicker
			// than the fresh one a forked run would start.
			if sb := t.warmReady(job); sb != nil {
				return t.runIn(ctx, sb, job)
			}
		} else {
			t.noteForked(job)
		}
		if out, ok, err := t.runForked(ctx, z, job); ok {
			return out, err
		}
		// The fork server could not start the run: it runs as any other.
	}
	sb, err := t.take(job)
	if err != nil {
		return nil, err
	}
	if t.warmEvery && t.warmable(job) && (sb.warm == nil || sb.warm.key != job.Warm.Key) {
		// Every run by way of an interpreter started before it.
		if sb.warm != nil {
			go sb.close()
			if sb, err = t.spawn(job.InitPath, job.Limits.Workspace); err != nil {
				return nil, err
			}
		}
		if err := t.startWarm(sb, specOf(job)); err != nil {
			sb.close()
			return nil, err
		}
	}
	// When run returns, init has killed every process of the sandbox and
	// the workspace has been read: tearing the namespaces down (which takes
	// the kernel milliseconds) need not delay the Result. The pool is
	// refilled after that, not when the sandbox was taken: building the next
	// sandbox then competes neither for the CPU with this program nor with
	// the Engine collecting its Result (a spawn's fork holds copies of the
	// host's descriptors, the result channel among them, until its exec).
	out, err := t.runIn(ctx, sb, job)
	if errors.Is(err, errWarmLost) {
		// Its interpreter died waiting (killed for memory, say): the job
		// has not started, and runs in a sandbox of its own instead.
		if sb, err = t.spawn(job.InitPath, job.Limits.Workspace); err != nil {
			return nil, err
		}
		out, err = t.runIn(ctx, sb, job)
	}
	return out, err
}

// canRun checks what every job needs: a host that can sandbox, an init
// binary, and an interpreter the sandbox shows.
func (t *Tier) canRun(job *codecell.Job) error {
	if err := t.Probe(); err != nil {
		return err
	}
	if job.InitPath == "" {
		return errors.New("the native tier re-executes codecell as the sandbox's init: call codecell.Init() first thing in main, or set Engine.InitPath")
	}
	return t.visible(job.Argv[0])
}

// runNetworked runs a job whose policy lets it reach some hosts, or that
// sees host directories (Job.Mounts), in a sandbox built for it: its
// network and mounts are made before init confines itself, so no pooled
// or forked sandbox can serve it.
func (t *Tier) runNetworked(ctx context.Context, job *codecell.Job) (*codecell.Outcome, error) {
	sb, job, err := t.spawnFor(job)
	if err != nil {
		return nil, err
	}
	t.coldRuns.Add(1)
	return t.runIn(ctx, sb, job)
}

// spawnFor builds a sandbox for the job alone: its mounts bound, and its
// network, when its policy lets it reach hosts, made with it and served by
// a proxy of its own. It returns the job as the sandbox runs it (see
// networkFor).
func (t *Tier) spawnFor(job *codecell.Job) (*sandbox, *codecell.Job, error) {
	binds, err := bindsFor(job.Mounts)
	if err != nil {
		return nil, nil, err
	}
	var spec *netSpec
	var px *proxying
	if len(job.Network) > 0 {
		if spec, px, job, err = t.networkFor(job); err != nil {
			return nil, nil, err
		}
	}
	sb, err := t.spawnWith(job.InitPath, job.Limits.Workspace, false, spec, binds)
	if err != nil {
		if px != nil {
			px.stop()
		}
		return nil, nil, err
	}
	sb.px = px
	return sb, job, nil
}

// networkFor works out the network of a job whose policy lets it reach
// hosts: the sandbox's names and ports, the proxy its connections go to,
// and the job as the sandbox runs it (its environment with the secrets'
// placeholders).
func (t *Tier) networkFor(job *codecell.Job) (*netSpec, *proxying, *codecell.Job, error) {
	p := &egress.Policy{}
	for _, l := range job.Network {
		layer, err := egress.ParseLayer(l.Name, l.Allow, l.Deny)
		if err != nil {
			return nil, nil, nil, codecell.Errorf(codecell.KindValidation, codecell.CodeInvalidRequest, "%v", err).WithHints("fix the network policy's entry")
		}
		p.Layers = append(p.Layers, layer)
	}
	spec, err := netSpecFor(p)
	if err != nil {
		return nil, nil, nil, codecell.Errorf(codecell.KindValidation, codecell.CodePolicyUnsupported, "%v", err).WithHints("list fewer hosts")
	}
	// Secrets: their values stay here, with the proxy; the sandbox gets
	// placeholders, and a CA bundle that trusts the proxy's authority.
	secrets, auth, err := t.secretsFor(p, job.Network, spec)
	if err != nil {
		return nil, nil, nil, err
	}
	if len(secrets) > 0 {
		j := *job
		j.Env = secretEnv(job.Env, secrets, job.Network)
		job = &j
	}
	if spec == nil {
		return nil, nil, job, nil
	}
	pctx, stop := context.WithCancel(context.Background())
	px := &proxying{proxy: &egress.Proxy{Policy: p, Resolve: t.Resolve, Secrets: secrets, Authority: auth, RootCAs: t.RootCAs}, ctx: pctx, stop: stop}
	return spec, px, job, nil
}

// runIn runs the job in sb, and closes sb after.
func (t *Tier) runIn(ctx context.Context, sb *sandbox, job *codecell.Job) (*codecell.Outcome, error) {
	defer t.afterResult(job, func() {
		sb.close()
		t.refill()
	})
	return sb.run(ctx, job)
}

// afterResult runs f in the background once the caller has the job's
// Result (Job.Finished), or a second has passed: what a run leaves to do
// starts then, not while the Result is built.
func (t *Tier) afterResult(job *codecell.Job, f func()) {
	t.bg.Add(1)
	t.after.Add(1)
	go func() {
		defer t.bg.Done()
		if job.Finished != nil {
			timer := time.NewTimer(time.Second)
			select {
			case <-job.Finished:
			case <-timer.C:
			}
			timer.Stop()
		}
		f()
		t.after.Add(-1)
	}()
}

// visible checks that the interpreter is inside what the sandbox shows.
// An interpreter found there once is taken as there from then on: the
// check is for a clear error up front, and a run whose interpreter left
// since fails at its start all the same.
func (t *Tier) visible(path string) error {
	if _, ok := t.shown.Load(path); ok {
		return nil
	}
	if err := t.resolveVisible(path); err != nil {
		return err
	}
	t.shown.Store(path, struct{}{})
	return nil
}

func (t *Tier) resolveVisible(path string) error {
	resolved, err := filepath.EvalSymlinks(path)
	if err != nil {
		return fmt.Errorf("interpreter %s: %w", path, err)
	}
	for _, d := range append(append([]string{}, systemDirs...), t.ExtraMounts...) {
		real, err := filepath.EvalSymlinks(d)
		if err != nil {
			continue
		}
		if resolved == real || strings.HasPrefix(resolved, real+"/") {
			return nil
		}
	}
	return codecell.Errorf(codecell.KindInternal, codecell.CodeSandboxFailure, "the interpreter %s is outside what the sandbox shows (%s)",
		path, strings.Join(systemDirs, ", ")).WithHints(
		"show its directory to the sandbox: --mount DIR, the configuration's mounts, or the native tier's ExtraMounts; retrying will not help until then")
}

// take returns a ready sandbox for the job: from the pool, one whose
// interpreter was started for jobs like this one if there is one, else
// any; else a new one.
func (t *Tier) take(job *codecell.Job) (*sandbox, error) {
	if sb := t.takeAhead(job); sb != nil {
		return sb, nil
	}
	n := t.poolSize()
	if n == 0 || job.Limits.Workspace != codecell.DefaultLimits.Workspace || t.closed.Load() {
		return t.spawn(job.InitPath, job.Limits.Workspace)
	}
	key := ""
	if t.warmable(job) {
		key = job.Warm.Key
	}
	t.poolMu.Lock()
	t.startPool(job.InitPath)
	if t.templates[key] != nil {
		// Forked from its template, not started in a sandbox of the pool.
		key = ""
	}
	t.demand.note(key, job, n)
	var sb *sandbox
	if job.InitPath == t.poolInit {
		sb = t.pick(key)
	}
	t.poolMu.Unlock()
	if sb != nil {
		// The pool is topped up after the run (see Run).
		return sb, nil
	}
	t.refill()
	return t.spawn(job.InitPath, job.Limits.Workspace)
}

// pooledTooMuch reports whether what waits for jobs holds as much memory
// as the pool may (Tier.PoolMemory): the pool's sandboxes, the fork
// servers and their spares, each as its cgroup counts it.
func (t *Tier) pooledTooMuch() bool {
	max := t.poolMemory()
	if max < 0 {
		return false
	}
	t.poolMu.Lock()
	var held int64
	for _, sb := range t.ready {
		held += sb.memoryUsage()
	}
	servers := t.servers()
	t.poolMu.Unlock()
	for _, z := range servers {
		held += z.sb.memoryUsage()
		z.mu.Lock()
		for _, sb := range z.spares {
			held += sb.memoryUsage()
		}
		z.mu.Unlock()
	}
	return held >= max
}

// noteMemory puts in out what the sandbox's cgroup says of its memory once
// the program has ended: its peak, and whether the kernel killed it for
// its limit (a SIGKILL while the group counts an out-of-memory kill).
func (sb *sandbox) noteMemory(out *codecell.Outcome) {
	if sb.cg == nil {
		return
	}
	out.MemoryPeak = sb.cg.MemoryPeak()
	if out.Signal == int(syscall.SIGKILL) && sb.cg.OOMKills() > 0 {
		out.MemoryKilled = true
	}
}

func (sb *sandbox) memoryUsage() int64 {
	if sb.cg == nil {
		return 0
	}
	return sb.cg.MemoryUsage()
}

// startPool starts the pool's fillers, once, for sandboxes of initPath.
// Called with poolMu held.
func (t *Tier) startPool(initPath string) {
	if t.poolInit != "" {
		return
	}
	t.poolInit = initPath
	t.wanted = make(chan struct{}, 1)
	for range fillers() {
		t.filling.Add(1)
		go t.fill()
	}
}

// warmReady returns a sandbox of the pool whose interpreter was started
// for the job's warm key, or nil when none is ready; either way the job
// counts toward what the pool warms.
func (t *Tier) warmReady(job *codecell.Job) *sandbox {
	n := t.poolSize()
	if n == 0 || job.Limits.Workspace != codecell.DefaultLimits.Workspace || t.closed.Load() {
		return nil
	}
	t.poolMu.Lock()
	t.startPool(job.InitPath)
	t.demand.note(job.Warm.Key, job, n)
	var sb *sandbox
	if job.InitPath == t.poolInit {
		if i := slices.IndexFunc(t.ready, func(sb *sandbox) bool {
			return sb.warm != nil && sb.warm.key == job.Warm.Key && sb.alive()
		}); i >= 0 {
			sb = t.ready[i]
			t.ready = slices.Delete(t.ready, i, i+1)
		}
	}
	t.poolMu.Unlock()
	if sb == nil {
		t.refill() // an interpreter for the next job, in a sandbox the pool holds
	}
	// Else the pool is topped up once the run's Result is out (see runIn),
	// not now: building a sandbox and starting an interpreter in it would
	// take the CPU from this run (2-4 ms of a Node run's 13-20 on two
	// cores).
	return sb
}

// noteForked records, in the pool's demand, a job forked from its
// template: it asks the pool for no interpreter.
func (t *Tier) noteForked(job *codecell.Job) {
	t.poolMu.Lock()
	defer t.poolMu.Unlock()
	if t.poolInit != "" {
		t.demand.note("", job, t.poolSize())
	}
}

// fillers is how many sandboxes are built at once: building one is mostly
// CPU, so one per two cores, leaving the others to the programs.
func fillers() int {
	return min(max(runtime.NumCPU()/2, 1), 4)
}

// pick removes and returns the best ready sandbox for a job of this warm
// key: one warmed for it, else a plain one, else one warmed for another
// key (init ends that interpreter before the job). Called with poolMu held.
func (t *Tier) pick(key string) *sandbox {
	best := -1
	rank := func(sb *sandbox) int {
		switch {
		case !sb.alive():
			return -1
		case key != "" && sb.warm != nil && sb.warm.key == key:
			return 3
		case sb.warm == nil:
			return 2
		}
		return 1
	}
	for i, sb := range t.ready {
		if best < 0 || rank(sb) > rank(t.ready[best]) {
			best = i
		}
	}
	for best >= 0 {
		sb := t.ready[best]
		t.ready = slices.Delete(t.ready, best, best+1)
		if sb.alive() {
			return sb
		}
		go sb.close()
		best = slices.IndexFunc(t.ready, func(sb *sandbox) bool { return sb.alive() })
	}
	return nil
}

// PoolReady reports how many sandboxes are ready in the pool.
func (t *Tier) PoolReady() int {
	t.poolMu.Lock()
	defer t.poolMu.Unlock()
	return len(t.ready)
}

// PoolStats says what the pool holds and how runs were served.
type PoolStats struct {
	// Ready is how many sandboxes wait, by the language of the interpreter
	// started in them ("" for none yet).
	Ready map[string]int
	// WarmRuns ran in an interpreter started before them; ColdRuns started
	// theirs; ForkRuns were forked from a template interpreter; ExecRuns
	// started theirs in a sandbox forked from a fork server.
	WarmRuns, ColdRuns, ForkRuns, ExecRuns int64
	// BornInCgroup counts the sandboxes whose first process started in its
	// cgroup (CLONE_INTO_CGROUP on v2; on v1, started by a thread that
	// stood in the cgroup); MovedIntoCgroup, those moved there after their
	// start, each of which waited for the kernel's RCU grace period.
	BornInCgroup, MovedIntoCgroup int64
	// Templates is how many fork servers wait, by language ("" for the
	// server that executes commands); Prepared, how many runs they have
	// forked ahead of their jobs.
	Templates map[string]int
	Prepared  int
	// WarmError is why the last interpreter the pool started failed to
	// start; empty when none did.
	WarmError string
}

// Stats says what the pool holds and how runs were served.
func (t *Tier) Stats() PoolStats {
	t.poolMu.Lock()
	defer t.poolMu.Unlock()
	st := PoolStats{Ready: map[string]int{}, Templates: map[string]int{},
		WarmRuns: t.warmRuns.Load(), ColdRuns: t.coldRuns.Load(), ForkRuns: t.forkRuns.Load(), ExecRuns: t.execRuns.Load(),
		BornInCgroup: t.born.Load(), MovedIntoCgroup: t.moved.Load()}
	for _, z := range t.templates {
		st.Templates[z.lang]++
		z.mu.Lock()
		st.Prepared += len(z.spares)
		z.mu.Unlock()
	}
	if t.demand.lastErr != nil {
		st.WarmError = t.demand.lastErr.Error()
	}
	for _, sb := range t.ready {
		name := ""
		if sb.warm != nil {
			name = sb.warm.language
		}
		st.Ready[name]++
	}
	return st
}

// refill asks the pool's fillers to top the pool up.
func (t *Tier) refill() {
	t.poolMu.Lock()
	wanted := t.wanted
	t.poolMu.Unlock()
	if wanted == nil {
		return
	}
	select {
	case wanted <- struct{}{}:
	default: // a request is already pending
	}
}

// fill tops the pool up whenever asked: first the number of sandboxes,
// then an interpreter started in each, by what recent jobs asked for. A
// failing host backs off rather than spin.
func (t *Tier) fill() {
	defer t.filling.Done()
	t.poolMu.Lock()
	wanted := t.wanted
	t.poolMu.Unlock()
	delay := 100 * time.Millisecond
	for range wanted {
		for !t.closed.Load() {
			did, err := t.fillOne()
			if err != nil {
				time.Sleep(delay)
				delay = min(2*delay, 30*time.Second)
				continue
			}
			delay = 100 * time.Millisecond
			if !did {
				break
			}
		}
		// Another filler may have left work undone when this one stopped.
		if !t.closed.Load() && t.wantsWork() {
			t.refill()
		}
	}
}

// fillOne does one step of filling: it builds a sandbox, or starts an
// interpreter in a ready one. It reports whether there was a step to do.
func (t *Tier) fillOne() (bool, error) {
	if t.pooledTooMuch() {
		return false, nil
	}
	t.poolMu.Lock()
	n, size := t.poolSize(), len(t.ready)+t.demand.building
	var warm *sandbox
	var spec *demandSpec
	if size >= n {
		// Full: start an interpreter in a plain sandbox if a key lacks one.
		if _, ds := t.demand.lacking(t.ready); ds != nil {
			if i := slices.IndexFunc(t.ready, func(sb *sandbox) bool { return sb.warm == nil && sb.alive() }); i >= 0 {
				warm, spec = t.ready[i], ds
				t.ready = slices.Delete(t.ready, i, i+1)
			}
		}
		if warm == nil {
			t.poolMu.Unlock()
			return false, nil
		}
	}
	t.demand.building++
	initPath := t.poolInit
	t.poolMu.Unlock()

	t.fillMu.RLock()
	defer t.fillMu.RUnlock()
	var err error
	sb := warm
	if sb == nil {
		sb, err = t.spawn(initPath, codecell.DefaultLimits.Workspace)
	} else if werr := t.startWarm(sb, spec); werr != nil {
		// The sandbox is still good for a job that starts its own
		// interpreter, unless init is gone.
		t.poolMu.Lock()
		t.demand.lastErr = werr
		t.poolMu.Unlock()
	}
	t.poolMu.Lock()
	t.demand.building--
	if err == nil && !t.closed.Load() {
		t.ready = append(t.ready, sb)
		sb = nil
	}
	t.poolMu.Unlock()
	if sb != nil {
		sb.close()
		if err == nil {
			err = errors.New("closed")
		}
	}
	return true, err
}

// Settled reports whether the pool holds all it keeps, each sandbox with
// the interpreter demand asks of it, its fillers have nothing to do, and
// no fork server is starting or preparing spares.
func (t *Tier) Settled() bool {
	if t.poolSize() == 0 {
		return true
	}
	t.poolMu.Lock()
	building := t.demand.building
	starting := len(t.templateStarts)
	servers := t.servers()
	t.poolMu.Unlock()
	for _, z := range servers {
		z.mu.Lock()
		busy := z.preparing
		z.mu.Unlock()
		if busy {
			return false
		}
	}
	return building == 0 && starting == 0 && t.after.Load() == 0 && !t.wantsWork()
}

// wantsWork reports whether the pool lacks a sandbox or an interpreter.
func (t *Tier) wantsWork() bool {
	t.poolMu.Lock()
	defer t.poolMu.Unlock()
	if len(t.ready)+t.demand.building < t.poolSize() {
		return true
	}
	_, ds := t.demand.lacking(t.ready)
	return ds != nil && slices.ContainsFunc(t.ready, func(sb *sandbox) bool { return sb.warm == nil })
}

// sandbox is one running init, on the host's side: an init the host
// started (cmd), or the supervisor of a run a fork server forked (forked;
// see zygote_linux.go), which speaks the same protocol for its job.
type sandbox struct {
	t        *Tier
	initPath string
	cmd      *exec.Cmd
	pid      int  // init's host pid
	pidfd    int  // a forked run's supervisor, when forked
	forked   bool // a run forked from a fork server (zygote_linux.go)
	execs    bool // forked from the server that executes each run's command
	c        *conn
	id       *identity
	cg       *cgroup.Group
	cgErr    error
	limits   cgroup.Limits // what the cgroup holds now
	stderr   *boundedBuffer
	ready    readyInfo     // what init's confinement applied
	done     chan struct{} // closed when init has exited
	waitErr  error
	closed   sync.Once
	warm     *warmProc // the interpreter started ahead of its job, if any
	// toolClient is true when codecell-tool is in the runner directory
	// already (placeToolClient).
	toolClient bool
	network    *netSpec  // the names the sandbox reaches, if any
	px         *proxying // their proxy, while a job runs
}

// shmSize is the size of every sandbox's /dev/shm.
const shmSize = 64 << 20

// rootMountpoint is an empty host directory on which every sandbox mounts
// its new root, each in its own mount namespace: the host never sees those
// mounts. One directory per user serves every codecell process.
func (t *Tier) rootMountpoint() (string, error) {
	t.rootOnce.Do(func() {
		if dir, err := runDir(); err == nil {
			t.rootDir = filepath.Join(dir, "root")
		} else {
			t.rootDir = filepath.Join(os.TempDir(), fmt.Sprintf("codecell-root-%d", os.Geteuid()))
			// In a shared temporary directory another user could have put
			// a link or a directory of theirs here first: then one under
			// this user's cache directory, where no one else can.
			if ownMountpoint(t.rootDir) != nil {
				if cache, err := os.UserCacheDir(); err == nil && filepath.IsAbs(cache) {
					t.rootDir = filepath.Join(cache, "codecell", "root")
				}
			}
		}
	})
	if err := ownMountpoint(t.rootDir); err != nil {
		return "", err
	}
	return t.rootDir, nil
}

// ownMountpoint makes dir if missing and checks that it is a directory of
// this user's that only this user can write.
func ownMountpoint(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	info, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !info.IsDir() || !ok || int(st.Uid) != os.Geteuid() || info.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s is not a directory of this user's that only it can write: remove it, or run codecell with TMPDIR set to a directory of your own", dir)
	}
	return nil
}

// spawn starts an init and waits until its sandbox is built and init is
// confined, ready for a job.
func (t *Tier) spawn(initPath string, workspaceSize int64) (*sandbox, error) {
	return t.spawnWith(initPath, workspaceSize, false, nil, nil)
}

// bindsFor checks a job's mounts: absolute host directories, shown under
// /opt, where no system directory, workspace or runner directory is.
func bindsFor(mounts []codecell.Mount) ([]bindSpec, error) {
	var out []bindSpec
	for _, m := range mounts {
		if !filepath.IsAbs(m.Host) || !filepath.IsAbs(m.Path) || filepath.Clean(m.Path) != m.Path || !strings.HasPrefix(m.Path, "/opt/") {
			return nil, fmt.Errorf("mount %s at %s: the host path must be absolute, and the sandbox's a clean path under /opt", m.Host, m.Path)
		}
		if info, err := os.Stat(m.Host); err != nil || !info.IsDir() {
			return nil, fmt.Errorf("mount %s: not a directory", m.Host)
		}
		out = append(out, bindSpec{Src: m.Host, Dst: m.Path})
	}
	return out, nil
}

// spawnWith starts an init, or with template one that becomes a fork
// server (see zygote_linux.go).
func (t *Tier) spawnWith(initPath string, workspaceSize int64, template bool, network *netSpec, binds []bindSpec) (*sandbox, error) {
	rootDir, err := t.rootMountpoint()
	if err != nil {
		return nil, err
	}
	id, err := newIdentity(t.uidBase())
	if err != nil {
		return nil, err
	}
	sb := &sandbox{t: t, initPath: initPath, id: id, stderr: &boundedBuffer{max: 16 << 10}, done: make(chan struct{})}
	if t.cgroups != nil && t.cgroups.Version != 0 {
		def := codecell.DefaultLimits
		// An id naming this process, so that Recover, after this process
		// dies, can tell the group from another live codecell's.
		lim := cgroup.Limits{Memory: def.Memory, Processes: def.Processes + 1}
		if template {
			// The fork server, and each run's first child until it is in
			// the run's own cgroup (born there, or moved by the host).
			lim.Processes = 1 + 4*def.Processes
		}
		sb.cg, sb.cgErr = t.cgroups.New(cgroup.OwnedID(), lim)
	}
	host, initEnd, err := socketPair()
	if err != nil {
		sb.release()
		return nil, err
	}
	sb.c = newConn(host)

	cmd := exec.Command(initPath, sandboxinit.Stage, "3")
	cmd.Args[0] = sandboxinit.InitArg0
	cmd.Env = append([]string{}, sandboxinit.InitEnv...)
	cmd.ExtraFiles = []*os.File{initEnd}
	// init's own output is only ever a Go runtime crash: keep a little of
	// it for the error message. The program's output never passes here.
	cmd.Stderr = sb.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  cloneFlags,
		UidMappings: id.UIDMap(),
		GidMappings: id.UIDMap(),
		// Root may let the namespace use setgroups, which init needs to
		// drop the host's supplementary groups (root's among them) before
		// anything runs; an unprivileged mapping must deny it.
		GidMappingsEnableSetgroups: !id.Rootless,
		Credential:                 &syscall.Credential{Uid: initUID, Gid: initUID, Groups: []uint32{}, NoSetGroups: id.Rootless},
		// If codecell dies, so does init, and with it the namespaces and
		// every process in them.
		Pdeathsig: syscall.SIGKILL,
		Setsid:    true,
	}
	if sb.cg != nil {
		if fd, ok := sb.cg.FD(); ok {
			// Born in its cgroup (CLONE_INTO_CGROUP): no moment outside it.
			cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, fd
		}
	}
	placed, err := startOnSpawnThread(cmd, sb.cg)
	initEnd.Close()
	if err != nil {
		sb.release()
		return nil, fmt.Errorf("starting the sandbox's init: %w", err)
	}
	sb.cmd, sb.pid = cmd, cmd.Process.Pid
	go func() {
		sb.waitErr = cmd.Wait()
		close(sb.done)
	}()
	spec := spawnSpec{
		RootDir:     rootDir,
		SystemDirs:  systemDirs,
		EtcEntries:  etcEntries,
		ExtraMounts: t.ExtraMounts,
		Binds:       binds,
		Hostname:    "codecell",
		ProgramUID:  id.ProgramUID(),
		Workspace:   workspaceSize,
		Tmp:         t.tmpSize(),
		Shm:         shmSize,
		Template:    template,
		Network:     network,
	}
	if sb.cg != nil {
		_, hasFD := sb.cg.FD()
		spec.Placing = !hasFD && !placed
		t.noteCgroup(!spec.Placing)
	}
	if err := sb.c.Send(spec); err != nil {
		sb.close()
		return nil, sb.failure("sending the sandbox's spec", err)
	}
	if spec.Placing {
		// cgroup v1: init builds the root meanwhile (a move into a cgroup
		// waits for the kernel's RCU grace period: milliseconds), and runs
		// nothing else before Placed says it is in its cgroup.
		if err := sb.cg.Add(cmd.Process.Pid); err != nil {
			// init may have failed to build the root and exited first:
			// what it said is why.
			var m message
			if rerr := sb.recvTimeout(&m, time.Second); rerr == nil && m.Error != "" {
				sb.close()
				return nil, t.buildError(m, binds == nil && network == nil)
			}
			sb.close()
			return nil, fmt.Errorf("moving init into its cgroup: %w", err)
		}
		if err := sb.c.Send(message{Placed: true}); err != nil {
			sb.close()
			return nil, sb.failure("sending the sandbox's spec", err)
		}
	}
	spawnwatch.Spawned(t, cmd.Process.Pid, func() []string {
		if sb.cg != nil {
			return sb.cg.Paths()
		}
		return nil
	})
	var m message
	if err := sb.recvTimeout(&m, 30*time.Second); err != nil {
		sb.close()
		return nil, sb.failure("building the sandbox", err)
	}
	if m.Error != "" || m.Ready == nil {
		sb.close()
		return nil, t.buildError(m, binds == nil && network == nil)
	}
	sb.ready = *m.Ready
	sb.network = network
	sb.placeToolClient()
	return sb, nil
}

// noteCgroup counts a sandbox's first process as born in its cgroup, or
// moved there after its start.
func (t *Tier) noteCgroup(born bool) {
	if born {
		t.born.Add(1)
	} else {
		t.moved.Add(1)
	}
}

// placeToolClient writes codecell-tool into the ready sandbox's runner
// directory ahead of its job, which every job's runner files hold: the
// job's setUp then leaves it out. A sandbox it could not be written to
// gets it with the job.
func (sb *sandbox) placeToolClient() {
	initOwner, _ := sb.id.owners()
	sb.toolClient = workspace.WriteFiles(sb.root()+runnerDir, map[string][]byte{toolClient: bridge.ShellClient}, initOwner, nil) == nil
}

// toolClient is where codecell-tool is among a runner's files.
const toolClient = "bin/codecell-tool"

// buildError is the error of an init that could not build the sandbox.
// plain is a sandbox built with nothing of a job's (no mounts, no
// network): what its init was refused, the host refuses every sandbox.
func (t *Tier) buildError(m message, plain bool) error {
	if m.Mount != "" {
		return mountRefusal(m.Mount, m.Error)
	}
	if m.Refused && plain {
		err := fmt.Errorf("this host refuses what a sandbox needs (%s): a container that masks parts of /proc, or a security module, forbids it in a new user namespace", m.Error)
		t.hostErr.Store(&err)
		return codecell.Errorf(codecell.KindValidation, codecell.CodeTierUnavailable, "tier %q cannot run on this host: %v", Name, err).WithHints(
			"run `codecell doctor` to see what this host offers",
			"to run without any isolation, which is not safe for untrusted code, choose tier local explicitly (`--tier local`)")
	}
	return fmt.Errorf("building the sandbox: %s", m.Error)
}

// mountRefusal is the error of a mount the sandbox cannot show: the
// caller's to change (its --mount, the configuration's mounts, the tier's
// ExtraMounts), which a retry does not.
func mountRefusal(dir, why string) error {
	return codecell.Errorf(codecell.KindValidation, codecell.CodeMountUnavailable,
		"the sandbox cannot show the mount %s: %s", dir, why).WithHints(
		"a mount must be a directory that exists on this host and that any user may reach: the sandbox reaches it as an unprivileged user of its own (chmod o+x on each directory above it, o+rx on it)",
		"or leave it out of --mount and the configuration's mounts")
}

// failure describes why init did not answer, with what it printed.
func (sb *sandbox) failure(what string, err error) error {
	if out := strings.TrimSpace(sb.stderr.String()); out != "" {
		return fmt.Errorf("%s: %v: %s", what, err, out)
	}
	return fmt.Errorf("%s: %w", what, err)
}

func (sb *sandbox) alive() bool {
	select {
	case <-sb.done:
		return false
	default:
		return true
	}
}

// recvTimeout reads one message, giving up when init dies or time passes.
func (sb *sandbox) recvTimeout(m *message, d time.Duration) error {
	fds, err := sb.recvFDs(m, d)
	closeAll(fds)
	return err
}

// recvFDs reads one message with the descriptors that came with it, giving
// up when init dies or time passes. The read waits in Go's network poller
// (the host's end of the socket does not block), with d as its deadline.
func (sb *sandbox) recvFDs(m *message, d time.Duration) ([]int, error) {
	var got message
	fds, err := sb.c.RecvWithin(&got, d)
	*m = got
	if errors.Is(err, os.ErrDeadlineExceeded) {
		where := initState(sb.pid)
		sb.kill()
		return nil, fmt.Errorf("init did not answer within %v (%s)", d, where)
	}
	return fds, err
}

// initState says what a process that did not answer was doing, for the
// error that says so: its state and the kernel function it waited in.
func initState(pid int) string {
	state := "gone"
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "State:"); ok {
				state = strings.TrimSpace(v)
			}
		}
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/wchan", pid)); err == nil && len(b) > 0 && string(b) != "0" {
		state += ", waiting in " + string(b)
	}
	return fmt.Sprintf("init, pid %d: %s", pid, state)
}

func (sb *sandbox) kill() {
	switch {
	case sb.cmd != nil && sb.cmd.Process != nil:
		_ = sb.cmd.Process.Kill()
	case sb.forked:
		if sb.pidfd > 0 {
			_ = unix.PidfdSendSignal(sb.pidfd, unix.SIGKILL, nil, 0)
		}
		// Before the supervisor exists, and so that a read waiting on it
		// ends either way.
		_ = unix.Shutdown(sb.c.FD(), unix.SHUT_RDWR)
	}
}

// close ends init (which ends every process in the sandbox), removes the
// cgroup and gives the uid slot back.
func (sb *sandbox) close() {
	sb.closed.Do(func() {
		if sb.cmd != nil || sb.pidfd > 0 {
			_ = sb.c.Send(message{Exit: true})
			select {
			case <-sb.done:
			case <-time.After(2 * time.Second):
				sb.kill()
				<-sb.done
			}
		}
		if sb.c != nil {
			sb.c.Close()
		}
		if sb.warm != nil {
			sb.warm.close()
		}
		if sb.pidfd > 0 {
			unix.Close(sb.pidfd)
		}
		sb.release()
	})
}

func (sb *sandbox) release() {
	if sb.cg != nil {
		_ = sb.cg.Destroy()
	}
	if !sb.forked { // a forked run's identity is its template's
		sb.id.release()
	}
}

// run hands the sandbox its job and waits for the program.
func (sb *sandbox) run(ctx context.Context, job *codecell.Job) (*codecell.Outcome, error) {
	out := &codecell.Outcome{Isolation: sb.isolation(job)}
	before, rlimits, warnings, err := sb.setUp(job)
	out.Warnings = append(out.Warnings, warnings...)
	if err != nil {
		return out, err
	}

	js := jobSpec{Argv: job.Argv, Env: job.Env, Dir: workspaceDir, Rlimits: rlimits}
	var wait func()
	if sb.forked && !sb.execs {
		js.Forked, js.Message, js.Argv, js.Env = true, job.Warm.Message, nil, nil
		out.Isolation.Interpreter = "forked for this run from a template interpreter that has run no program"
		wait, err = sb.startJob(job, js)
		if err != nil {
			return out, err
		}
		sb.t.forkRuns.Add(1)
	} else if w := sb.warm; w != nil && sb.t.warmable(job) && job.Warm.Key == w.key && slices.Equal(w.rlimits, rlimits) {
		wait, err = sb.startWarmJob(job, js)
		if err != nil {
			return out, err
		}
		out.Isolation.Interpreter = "started before this run, in this run's sandbox, for this run alone"
		sb.t.warmRuns.Add(1)
	} else {
		wait, err = sb.startJob(job, js)
		if err != nil {
			return out, err
		}
		out.Isolation.Interpreter = "started for this run"
		if sb.forked {
			sb.t.execRuns.Add(1)
		} else {
			sb.t.coldRuns.Add(1)
		}
	}
	// init is kept out of the OOM killer's choice where the host may (it
	// takes CAP_SYS_RESOURCE; without it, the program's inherited score of
	// 1000, see runJob, still makes the program the first choice). Only
	// now, after the fork: the floor a privileged write sets (-1000) is the
	// process's own, and the program, forked before it, keeps its floor of
	// 0, so it cannot make itself unkillable.
	_ = os.WriteFile(fmt.Sprintf("/proc/%d/oom_score_adj", sb.pid), []byte("-1000"), 0)

	msgs := make(chan message, 2)
	go func() {
		for {
			var m message
			fds, err := sb.c.Recv(&m)
			if err != nil {
				close(msgs)
				return
			}
			if m.Conn != nil && len(fds) == 1 && sb.px != nil {
				// A connection the program opened: the proxy's to serve.
				sb.px.serve(m.Conn, fds[0])
				continue
			}
			closeAll(fds)
			msgs <- m
		}
	}()
	var exited *exitInfo
	var initErr string
	cancelled := ctx.Done()
	var deadline <-chan time.Time
wait:
	for {
		select {
		case m, ok := <-msgs:
			if !ok {
				break wait
			}
			if m.Exited != nil {
				exited = m.Exited
				break wait
			}
			if m.Error != "" {
				initErr = m.Error
			}
		case <-cancelled:
			out.Stopped = true
			cancelled = nil
			_ = sb.c.Send(message{Kill: true})
			deadline = time.After(5 * time.Second)
		case <-deadline:
			sb.kill()
			deadline = nil
		}
	}
	wait()
	if sb.px != nil {
		out.Network = sb.px.finish()
		out.Isolation.Network = networkIsolation(sb.network)
	}
	if exited == nil && !out.Stopped && sb.cg != nil && sb.cg.OOMKills() > 0 {
		// init did not live to report, and the kernel killed for memory in
		// the sandbox's cgroup: the program ran out of it (with what it
		// wrote to the tmpfs workspace and /tmp counted), which is the
		// program's to fix, not a failure of the host.
		out.MemoryKilled = true
		out.Warnings = append(out.Warnings, "the sandbox ran out of memory before it could read the workspace: the file list is empty")
		out.Files = []codecell.FileChange{}
		out.ExitCode, out.Signal = -1, int(syscall.SIGKILL)
		return out, nil
	}
	if exited == nil {
		if out.Stopped {
			exited = &exitInfo{ExitCode: -1, Signal: int(syscall.SIGKILL)}
		} else {
			if initErr == "" {
				initErr = "init ended without a report"
			}
			return out, sb.failure("running the program", errors.New(initErr))
		}
	}
	out.ExitCode, out.Signal = exited.ExitCode, exited.Signal
	sb.noteMemory(out)

	// Every process of the sandbox but init is dead: the workspace holds
	// still while it is read.
	if sb.alive() {
		files, _, warnings := sb.bringBack(before, job, false)
		out.Files = files
		out.Warnings = append(out.Warnings, warnings...)
	} else {
		out.Warnings = append(out.Warnings, "the sandbox ended before its workspace could be read: the file list is empty")
		out.Files = []codecell.FileChange{}
	}
	return out, nil
}

// setUp readies the sandbox for the job: its cgroup's limits, the runner's
// files and the workspace's contents copied in through init's root, and the
// workspace's snapshot to tell the program's changes by. It returns the
// rlimits that stand in for missing controllers, with warnings that say so.
func (sb *sandbox) setUp(job *codecell.Job) (before *workspace.Snapshot, rlimits []rlimit, warnings []string, err error) {
	ws := sb.workspace()
	lim := job.Limits
	rlimits, warnings = sb.fallbacks(lim)
	if sb.cg != nil {
		want := cgroup.Limits{Memory: lim.Memory, Processes: lim.Processes + 1, CPU: lim.CPU}
		if want != sb.limits {
			if err := sb.cg.SetLimits(want); err != nil {
				return nil, nil, warnings, fmt.Errorf("setting cgroup limits: %w", err)
			}
			sb.limits = want
		}
	}

	// The runner's files and the workspace's contents go in through init's
	// root; nothing of the program runs yet.
	initOwner, programOwner := sb.id.owners()
	if err := sb.writeRunner(job, initOwner); err != nil {
		return nil, nil, warnings, fmt.Errorf("copying the runner's files into the sandbox: %w", err)
	}
	// A host that is not root opens for the copy what a program (or an
	// upload) left without its owner's read permission (workspace.Unlock):
	// the copies get the permissions their files had, and the host's tree
	// gets them back at once.
	locked := workspace.Unlock(job.Workspace)
	err = locked.CopyTree(job.Workspace, ws, programOwner)
	locked.Restore(job.Workspace)
	if err != nil {
		return nil, nil, warnings, workspaceCopyError(err, lim)
	}
	before, err = workspace.Take(ws)
	return before, rlimits, warnings, err
}

// writeRunner writes the job's runner files into the sandbox, but for
// codecell-tool when it is there already. A job that gives only a runner
// directory on the host has it copied, in place of anything placed.
func (sb *sandbox) writeRunner(job *codecell.Job, owner workspace.Owner) error {
	if job.RunnerFiles == nil {
		if sb.toolClient {
			if err := sb.removeToolClient(); err != nil {
				return err
			}
		}
		return workspace.CopyTree(job.Runner, sb.root()+runnerDir, owner)
	}
	placed := func(name string) bool {
		return sb.toolClient && name == toolClient && bytes.Equal(job.RunnerFiles[name], bridge.ShellClient)
	}
	return workspace.WriteFiles(sb.root()+runnerDir, job.RunnerFiles, owner, placed)
}

// removeToolClient removes the codecell-tool placeToolClient wrote.
func (sb *sandbox) removeToolClient() error {
	r, err := workspace.Open(sb.root() + runnerDir)
	if err != nil {
		return err
	}
	defer r.Close()
	if err := r.Remove(toolClient, false); err != nil && !errors.Is(err, workspace.ErrNotFound) {
		return err
	}
	sb.toolClient = false
	return nil
}

// workspaceCopyError is the error of a workspace that could not be copied
// into the sandbox: the caller's to fix when it does not fit.
func workspaceCopyError(err error, lim codecell.Limits) error {
	if errors.Is(err, syscall.ENOSPC) {
		return codecell.Errorf(codecell.KindLimit, codecell.CodeWorkspaceTooLarge, "the workspace does not fit in its %d MiB quota, or holds more than %d files, directories and links", lim.Workspace>>20, workspace.MaxWorkspaceEntries).WithHints(
			"remove files from the workspace (or pack many small ones into an archive), or ask for a larger workspace limit (limits.workspace)")
	}
	return fmt.Errorf("copying the workspace into the sandbox: %w", err)
}

// root is the sandbox's root directory, as the host reaches it.
func (sb *sandbox) root() string { return fmt.Sprintf("/proc/%d/root", sb.pid) }

// workspace is the sandbox's workspace, as the host reaches it.
func (sb *sandbox) workspace() string { return sb.root() + workspaceDir }

// bringBack lists what the program changed in the sandbox's workspace
// since before and, when the job's workspace is the caller's, brings the
// changes back to it.
//
// A host that is not root reads the workspace as its files' owner: what
// the program left without the owner's read permission is opened for the
// reading (workspace.Unlock), copied back with the permissions it had,
// and, in a sandbox that stays (a live session's), given them back there.
func (sb *sandbox) bringBack(before *workspace.Snapshot, job *codecell.Job, stays bool) ([]codecell.FileChange, *workspace.Snapshot, []string) {
	ws := sb.workspace()
	locked := workspace.Unlock(ws)
	if stays {
		defer locked.Restore(ws)
	}
	changes, after, warnings := workspace.Changes(before, ws)
	if after == nil {
		return []codecell.FileChange{}, nil, warnings
	}
	files := make([]codecell.FileChange, 0, len(changes))
	for _, c := range changes {
		files = append(files, codecell.FileChange{Path: c.Path, Change: codecell.Change(c.Kind), Size: c.Size, SHA256: c.SHA256, Symlink: c.Symlink, MIME: c.MIME})
	}
	if job.KeepWorkspace {
		for _, err := range locked.Apply(changes, ws, job.Workspace, workspace.OwnerOf(job.Workspace)) {
			warnings = append(warnings, "bringing a file back to the workspace: "+err.Error())
		}
		if cost, quota := after.Cost(), job.Limits.Workspace; len(changes) > 0 && quota > 0 && cost > quota {
			// The tmpfs counts content alone; the disk the workspace
			// lives on spends a block on each directory and small file.
			warnings = append(warnings, fmt.Sprintf("the workspace now takes about %d MiB of disk, past its %d MiB quota: each file, directory and link costs at least 4 KiB there, which the sandbox's workspace does not count; remove files (uploads to it are refused until it is under)",
				cost>>20, quota>>20))
		}
	}
	return files, after, warnings
}

// startJob sends init the job with descriptors of the host's making: init
// starts the program. The returned wait blocks until the program's output
// is read to its end.
func (sb *sandbox) startJob(job *codecell.Job, js jobSpec) (wait func(), err error) {
	// The program's stdio are pipes codecell made: never a descriptor of
	// the host's own (a terminal could be pushed keystrokes into).
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		stdinR.Close()
		stdinW.Close()
		return nil, err
	}
	stderrR, stderrW, err := os.Pipe()
	if err != nil {
		for _, f := range []*os.File{stdinR, stdinW, stdoutR, stdoutW} {
			f.Close()
		}
		return nil, err
	}
	fds := []int{int(stdinR.Fd()), int(stdoutW.Fd()), int(stderrW.Fd())}
	for _, f := range job.ExtraFiles {
		fds = append(fds, int(f.Fd()))
	}
	err = sb.c.Send(message{Job: &js}, fds...)
	stdinR.Close()
	stdoutW.Close()
	stderrW.Close()
	if err != nil {
		stdinW.Close()
		stdoutR.Close()
		stderrR.Close()
		return nil, sb.failure("sending the job", err)
	}
	var copying sync.WaitGroup
	pipeStdio(job, stdinW, stdoutR, stderrR, &copying)

	var m message
	if err := sb.recvTimeout(&m, 30*time.Second); err != nil || m.Started == 0 {
		copying.Wait()
		if m.Error != "" {
			return nil, fmt.Errorf("starting the program: %s", m.Error)
		}
		return nil, sb.failure("starting the program", err)
	}
	return copying.Wait, nil
}

// Pdeathsig fires when the thread that started the child exits, not the
// process, and Go retires the threads of goroutines that exit while locked
// to them. Every init is therefore started from one thread that is locked
// for the life of the process and never exits.
//
// On cgroup v1 that thread also stands in the init's cgroup while it starts
// it (cgroup.Group.EnterThread), so that init is born there, as
// CLONE_INTO_CGROUP does on v2: moving init after its start would wait for
// an RCU grace period, about 10 ms, on the way of every sandbox's build.
var spawnRequests = make(chan spawnRequest)
var spawnOnce sync.Once

type spawnRequest struct {
	cmd  *exec.Cmd
	cg   *cgroup.Group // the group to start cmd in on v1, or nil
	done chan spawnResult
}

type spawnResult struct {
	placed bool // cmd's process was born in cg
	err    error
}

// startOnSpawnThread starts cmd from the spawn thread; placed says whether
// it was born in cg by the thread standing there, which only v1 allows (on
// v2, cmd's own CgroupFD starts it there).
func startOnSpawnThread(cmd *exec.Cmd, cg *cgroup.Group) (placed bool, err error) {
	spawnOnce.Do(func() {
		go func() {
			runtime.LockOSThread()
			// stuck: a move back failed, so this thread stands in some
			// sandbox's cgroup. It goes on starting inits, which are moved
			// from there into their own cgroups before they run anything
			// (SpawnSpec.Placing), and never enters a group again.
			stuck := false
			for r := range spawnRequests {
				var leave func() error
				if r.cg != nil && !stuck {
					leave, _ = r.cg.EnterThread() // on failure (or v2), not placed
				}
				err := r.cmd.Start()
				if leave != nil && leave() != nil {
					stuck = true
				}
				r.done <- spawnResult{placed: leave != nil && err == nil, err: err}
			}
		}()
	})
	done := make(chan spawnResult, 1)
	spawnRequests <- spawnRequest{cmd, cg, done}
	r := <-done
	return r.placed, r.err
}

// pipeStdio feeds the job's stdin to the program's and drains its stdout
// and stderr into the job's writers; copying is done when both outputs are.
func pipeStdio(job *codecell.Job, stdin, stdout, stderr *os.File, copying *sync.WaitGroup) {
	copying.Add(2)
	go func() {
		if job.Stdin != nil {
			_, _ = io.Copy(stdin, job.Stdin)
		}
		stdin.Close()
	}()
	go func() { defer copying.Done(); drain(job.Stdout, stdout) }()
	go func() { defer copying.Done(); drain(job.Stderr, stderr) }()
}

// drain copies a program's output to w, and keeps reading after w fails, so
// that the program is never blocked on a full pipe.
func drain(w io.Writer, r *os.File) {
	defer r.Close()
	if w == nil {
		w = io.Discard
	}
	_, _ = io.Copy(w, r)
	_, _ = io.Copy(io.Discard, r)
}

// fallbacks returns the rlimits that stand in for the cgroup controllers this
// sandbox lacks, and the warnings that say so.
func (sb *sandbox) fallbacks(lim codecell.Limits) ([]rlimit, []string) {
	var rl []rlimit
	var warn []string
	if !sb.has("memory") {
		rl = append(rl, rlimit{Resource: unix.RLIMIT_DATA, Value: uint64(lim.Memory)})
		warn = append(warn, "no cgroup memory controller ("+sb.cgroupReason()+"): memory is limited per process by RLIMIT_DATA, not in total")
	}
	if !sb.has("pids") {
		if how := sb.nproc(); how == "" {
			warn = append(warn, "no cgroup pids controller ("+sb.cgroupReason()+"): the processes limit is not enforced")
		} else {
			rl = append(rl, rlimit{Resource: unix.RLIMIT_NPROC, Value: uint64(lim.Processes)})
			warn = append(warn, "no cgroup pids controller ("+sb.cgroupReason()+"): processes are limited by "+how)
		}
	}
	if lim.CPU > 0 && !sb.has("cpu") {
		warn = append(warn, "no cgroup cpu controller ("+sb.cgroupReason()+"): the CPU limit is not enforced")
	}
	return rl, warn
}

// nproc says how RLIMIT_NPROC limits the sandbox's processes where no
// cgroup does, or "" where it cannot. The kernel counts a user's
// processes against it per user namespace (since Linux 5.14), and before
// that per host uid.
//   - As root, the sandbox's host uid is its own: either count is the
//     sandbox's.
//   - Rootless, the host uid is the user's, shared with all their
//     processes: only the count in the sandbox's own user namespace is
//     the sandbox's, or, for a run forked from a template, the count of
//     the runs forked from it, whose user namespace it shares.
func (sb *sandbox) nproc() string {
	switch {
	case !sb.id.Rootless:
		return "RLIMIT_NPROC on the sandbox's host uid"
	case !nprocPerUserNS():
		return ""
	case sb.forked:
		return "RLIMIT_NPROC, which the kernel counts in the user namespace this run shares with the others forked from its template: they share the limit"
	}
	return "RLIMIT_NPROC, which the kernel counts in the sandbox's own user namespace"
}

// nprocPerUserNS says whether the kernel counts RLIMIT_NPROC per user
// namespace: Linux 5.14 and later.
var nprocPerUserNS = sync.OnceValue(func() bool {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	var major, minor int
	if _, err := fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &major, &minor); err != nil {
		return false
	}
	return major > 5 || major == 5 && minor >= 14
})

// has reports whether the sandbox's cgroup enforces a controller.
func (sb *sandbox) has(controller string) bool {
	return sb.cg != nil && slices.Contains(sb.t.cgroups.Controllers, controller)
}

func (sb *sandbox) cgroupReason() string {
	switch {
	case sb.cgErr != nil:
		return sb.cgErr.Error()
	case sb.t.cgroups != nil && sb.t.cgroups.Reason != "":
		return sb.t.cgroups.Reason
	}
	return "none available"
}

func (sb *sandbox) isolation(job *codecell.Job) codecell.Isolation {
	iso := codecell.Isolation{
		Level:      "sandbox",
		Namespaces: namespaceNames,
		Seccomp:    sb.ready.Seccomp,
		Landlock:   sb.ready.Landlock,
		NoNewPrivs: true,
		Network:    "none (an empty network namespace)",
		Cgroup:     "none",
		Limits: codecell.LimitsApplied{
			Timeout:   "wall clock; the sandbox's whole pid namespace is killed",
			Workspace: fmt.Sprintf("tmpfs of %d MiB and at most %d files, directories and links: writing past either fails with ENOSPC; its pages count toward the memory limit", job.Limits.Workspace>>20, workspace.MaxWorkspaceEntries),
			Output:    "capped by codecell",
		},
	}
	if iso.Landlock == "" {
		iso.Landlock = "unavailable in this kernel"
	}
	if sb.id.Rootless {
		iso.User = fmt.Sprintf("uid 0 inside a user namespace, without capabilities; your own uid %d on the host", sb.id.HostInit)
	} else {
		iso.User = fmt.Sprintf("uid %d inside; host uid %d, unprivileged and this sandbox's own", programUID, sb.id.HostProgram)
		if sb.forked {
			iso.User = fmt.Sprintf("uid %d inside; host uid %d, unprivileged, its template's: shared with the other runs forked from it, each in namespaces of its own", programUID, sb.id.HostProgram)
		}
	}
	if sb.cg != nil {
		iso.Cgroup = fmt.Sprintf("v%d", sb.t.cgroups.Version)
	}
	v := iso.Cgroup
	switch {
	case sb.has("memory"):
		iso.Limits.Memory = fmt.Sprintf("cgroup %s memory controller, %d MiB, no swap beyond it", v, job.Limits.Memory>>20)
	default:
		iso.Limits.Memory = "rlimit RLIMIT_DATA, per process"
	}
	switch {
	case sb.has("pids"):
		iso.Limits.Processes = fmt.Sprintf("cgroup %s pids controller, %d", v, job.Limits.Processes)
	case sb.nproc() == "":
		iso.Limits.Processes = "not enforced"
	default:
		iso.Limits.Processes = fmt.Sprintf("%d, by %s", job.Limits.Processes, sb.nproc())
	}
	switch {
	case job.Limits.CPU == 0:
		iso.Limits.CPU = "no limit asked for"
	case sb.has("cpu"):
		iso.Limits.CPU = fmt.Sprintf("cgroup %s cpu controller, %g cores", v, job.Limits.CPU)
	default:
		iso.Limits.CPU = "not enforced"
	}
	return iso
}

// boundedBuffer keeps the first max bytes written to it.
type boundedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (b *boundedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
