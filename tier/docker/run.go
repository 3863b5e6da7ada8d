package docker

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/codecell-dev/codecell/internal/fdrelay"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
	"golang.org/x/sys/unix"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/sandboxinit"
	"github.com/codecell-dev/codecell/internal/workspace"
)

// cleanupTime bounds what the tier does after the run's context is done:
// killing, reading back and removing the container.
const cleanupTime = 30 * time.Second

// Run runs the job in a container of its own and removes it.
func (t *Tier) Run(ctx context.Context, job *codecell.Job) (*codecell.Outcome, error) {
	if job.InitPath == "" {
		return nil, errors.New("the docker tier runs codecell as the container's first process: call codecell.Init() first thing in main, or set Engine.InitPath to an installed codecell binary")
	}
	image := t.image(job.Language)
	if image == "" {
		return nil, errNoImage(job.Language)
	}
	uid, gid, err := parseUser(t.user())
	if err != nil {
		return nil, err
	}
	c, err := t.client()
	if err != nil {
		return nil, err
	}
	rt, err := t.Runtime(ctx)
	if err != nil {
		return nil, err
	}
	t.sweepOnce(ctx, c)

	setup, stop := setupContext(ctx)
	defer stop()
	key := poolKey{image: image, user: t.user(), memory: job.Limits.Memory, pids: job.Limits.Processes, cpu: job.Limits.CPU,
		workspace: job.Limits.Workspace, extra: len(job.ExtraFiles), init: job.InitPath}
	var r *run
	if len(job.Mounts) == 0 {
		// A job that sees host directories (its packages) gets a
		// container made with them; the pool's were made without.
		defer t.refill(key)
		r = t.take(key)
	}
	if r != nil {
		r.job = job
	} else {
		r = &run{t: t, c: c, job: job, image: image, uid: uid, gid: gid, runtime: rt}
	}
	defer r.cleanup()
	if r.id == "" {
		if err := r.create(setup); err != nil {
			return nil, err
		}
		if err := r.start(setup); err != nil {
			return nil, err
		}
	}
	if r.pooled {
		if err := r.copyRunner(setup); err != nil {
			return nil, err
		}
	}
	if err := r.copyIn(setup); err != nil {
		return nil, err
	}
	return r.run(ctx, setup)
}

// setupTime bounds making a container ready: creating it, copying the
// workspace in, attaching and starting it.
const setupTime = 2 * time.Minute

// setupContext is ctx without its deadline, for making the container
// ready: the Exec's timeout is the program's, counted from the container's
// start, so that a busy engine's slow start does not eat a short timeout.
// A cancellation of ctx still ends the setup.
func setupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	s, cancel := context.WithTimeout(context.WithoutCancel(ctx), setupTime)
	stop := context.AfterFunc(ctx, func() {
		if errors.Is(ctx.Err(), context.Canceled) {
			cancel()
		}
	})
	return s, func() { stop(); cancel() }
}

// run is one job's container.
type run struct {
	t        *Tier
	c        *client.Client
	job      *codecell.Job
	image    string
	uid, gid int
	runtime  string

	dir       string // on the host: the sockets' directory
	listeners []*net.UnixListener
	id        string // the container's
	volume    string // the workspace's tmpfs volume, when it has a size
	before    *workspace.Snapshot
	links     []linkSpec // the workspace's links the launcher makes (see ownTar)

	// A pooled container was made and started before its job, with its
	// runner's files copied in rather than bound. Every container's
	// launcher waits on ctl for the job's command and environment, and
	// says there when the program has ended.
	pooled bool
	ctlL   *net.UnixListener
	ctl    net.Conn
}

func parseUser(u string) (uid, gid int, err error) {
	us, gs, _ := strings.Cut(u, ":")
	if gs == "" {
		gs = us
	}
	uid, err1 := strconv.Atoi(us)
	gid, err2 := strconv.Atoi(gs)
	if err1 != nil || err2 != nil || uid < 0 || gid < 0 {
		return 0, 0, fmt.Errorf("docker.user %q is not \"uid:gid\" in numbers", u)
	}
	if uid == 0 || gid == 0 {
		return 0, 0, errRootUser
	}
	return uid, gid, nil
}

// create makes the sockets and the container.
func (r *run) create(ctx context.Context) error {
	job := r.job
	var err error
	if r.dir, err = os.MkdirTemp("", tempPrefix()); err != nil {
		return err
	}
	// The program's user reaches the sockets, and may make nothing beside
	// them: the directory is root's (or codecell's), 0755.
	if err := os.Chmod(r.dir, 0o755); err != nil {
		return err
	}
	for i := range job.ExtraFiles {
		path := filepath.Join(r.dir, strconv.Itoa(3+i)+".sock")
		l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
		if err != nil {
			return fmt.Errorf("listening for the program's descriptor %d: %w", 3+i, err)
		}
		l.SetUnlinkOnClose(true)
		r.listeners = append(r.listeners, l)
		if err := os.Chmod(path, 0o777); err != nil {
			return err
		}
	}
	path := filepath.Join(r.dir, "ctl.sock")
	if r.ctlL, err = net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"}); err != nil {
		return fmt.Errorf("listening for the launcher: %w", err)
	}
	r.ctlL.SetUnlinkOnClose(true)
	if err := os.Chmod(path, 0o777); err != nil {
		return err
	}
	// The job comes once the container runs: its command and environment
	// through the launcher's socket.
	runner := mount.Mount{Type: mount.TypeBind, Source: job.Runner, Target: runnerDir, ReadOnly: true}
	if r.pooled {
		// The runner's files come through the archive endpoint, into a
		// volume.
		runner = mount.Mount{Type: mount.TypeVolume, Target: runnerDir}
	} else if err := os.Chmod(job.Runner, 0o755); err != nil {
		// The runner's directory is this job's alone; the program's user
		// reads it through the bind.
		return err
	}
	// The engine binds a file by its path: /proc/self/exe would be the
	// engine's own.
	initPath, err := filepath.EvalSymlinks(job.InitPath)
	if err != nil {
		return fmt.Errorf("finding codecell's binary: %w", err)
	}
	cmd := []string{codecell.InitArg0, Name, "wait"}
	// The launcher's environment (the program gets the job's): one Go
	// processor keeps its threads, which count toward the pids limit, few.
	env := []string{"PATH=" + shimDir + ":/usr/local/bin:/usr/bin:/bin", "GOMAXPROCS=1"}
	lim := job.Limits
	res := container.Resources{
		Memory:     lim.Memory,
		MemorySwap: lim.Memory, // no swap: the memory limit is the memory
		Ulimits:    ulimits(),
	}
	if lim.Processes > 0 {
		// The program's processes, plus the engine's init and the
		// launcher's threads.
		pids := int64(lim.Processes + launcherTasks)
		res.PidsLimit = &pids
	}
	if lim.CPU > 0 {
		res.NanoCPUs = int64(lim.CPU * 1e9)
	}
	labels := map[string]string{
		labelMark:     "1",
		labelPID:      strconv.Itoa(os.Getpid()),
		labelInstance: instance,
		labelStarted:  strconv.FormatInt(processStart(), 10),
		labelHost:     hostname,
	}
	ws := mount.Mount{Type: mount.TypeVolume, Target: workspaceDir}
	if lim.Workspace > 0 {
		if err := r.createVolume(ctx, labels); err != nil {
			return err
		}
		// Its root is the program's user's by the tmpfs's options: the
		// engine copies nothing of the image's /workspace into it, nor its
		// owner.
		ws.Source = r.volume
		ws.VolumeOptions = &mount.VolumeOptions{NoCopy: true}
	}
	cfg := &container.Config{
		Image:           r.image,
		Cmd:             cmd,
		Entrypoint:      []string{},
		Env:             env,
		User:            fmt.Sprintf("%d:%d", r.uid, r.gid),
		WorkingDir:      workspaceDir,
		OpenStdin:       true,
		StdinOnce:       true,
		AttachStdin:     true,
		AttachStdout:    true,
		AttachStderr:    true,
		Labels:          labels,
		NetworkDisabled: true,
	}
	yes := true
	host := &container.HostConfig{
		NetworkMode:    "none",
		ReadonlyRootfs: true,
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges"},
		// An init of the engine's (tini, catatonit) is the container's
		// first process: the program, under it, gets signals as a program
		// does, and the container ends when the program does.
		Init:      &yes,
		Tmpfs:     map[string]string{"/tmp": fmt.Sprintf("rw,nosuid,nodev,size=%d,mode=1777", r.t.tmpSize())},
		Resources: res,
		Mounts: []mount.Mount{
			runner,
			{Type: mount.TypeBind, Source: r.dir, Target: channelDir, ReadOnly: true},
			{Type: mount.TypeBind, Source: initPath, Target: shimDir + "/" + codecell.InitArg0, ReadOnly: true},
			ws,
		},
	}
	for _, m := range job.Mounts {
		// The job's packages, read-only, where the program looks for them.
		host.Mounts = append(host.Mounts, mount.Mount{Type: mount.TypeBind, Source: m.Host, Target: m.Path, ReadOnly: true})
	}
	created, err := r.c.ContainerCreate(ctx, client.ContainerCreateOptions{Config: cfg, HostConfig: host, Name: "codecell-" + job.ID})
	if err != nil {
		return fmt.Errorf("creating the container from %s: %w", r.image, err)
	}
	r.id = created.ID
	return nil
}

// launcherTasks is what the pids limit allows beyond the program's
// processes: the engine's init, and the launcher's threads (a Go process
// with one processor, blocked in two system calls, with threads to spare
// made before the program starts: see warmThreads).
const launcherTasks = 8

// createVolume makes the workspace's volume: a tmpfs of the workspace
// limit's size, owned by the program's user. The engine mounts it while
// the container runs, and only then: the workspace is copied in after the
// container's start and read back before its end.
func (r *run) createVolume(ctx context.Context, labels map[string]string) error {
	// The size in pages (nr_blocks): Podman before 4.4 takes a "size"
	// option for a disk quota, even on a tmpfs, and refuses it.
	page := int64(os.Getpagesize())
	blocks := (r.job.Limits.Workspace + page - 1) / page
	name := "codecell-ws-" + r.job.ID
	_, err := r.c.VolumeCreate(ctx, client.VolumeCreateOptions{
		Name:   name,
		Driver: "local",
		DriverOpts: map[string]string{
			"type":   "tmpfs",
			"device": "tmpfs",
			// And no more entries than the native tier's workspace holds:
			// a read-back lists at most that many.
			"o": fmt.Sprintf("nr_blocks=%d,nr_inodes=%d,uid=%d,gid=%d,mode=0755", blocks,
				sandboxinit.TmpfsInodes(r.job.Limits.Workspace, workspace.MaxWorkspaceEntries+1), r.uid, r.gid),
		},
		Labels: labels,
	})
	if err != nil {
		return fmt.Errorf("creating the workspace's volume: %w", err)
	}
	r.volume = name
	return nil
}

// start starts the container and waits for its launcher to connect. A
// container that ends first (an image that cannot run the launcher) is
// not waited for.
func (r *run) start(ctx context.Context) error {
	if _, err := r.c.ContainerStart(ctx, r.id, client.ContainerStartOptions{}); err != nil {
		return fmt.Errorf("starting the container: %w", err)
	}
	l := r.ctlL
	ended := make(chan int64, 1)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		w := r.c.ContainerWait(wctx, r.id, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
		select {
		case res := <-w.Result:
			ended <- res.StatusCode
			l.Close()
		case <-w.Error:
		}
	}()
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	_ = l.SetDeadline(time.Now().Add(setupTime))
	conn, err := l.AcceptUnix()
	if err != nil {
		select {
		case code := <-ended:
			return fmt.Errorf("the container ended (status %d) before its launcher connected: the image must run the codecell binary (a static build) and hold the interpreter", code)
		default:
		}
		return fmt.Errorf("the container's launcher did not connect: %w", err)
	}
	r.ctl = conn
	r.ctlL.Close()
	r.ctlL = nil
	return nil
}

// ulimits keeps the engine from raising the open-files and processes
// limits above what this process may hold (the engine's defaults can be
// higher, and a runtime without CAP_SYS_RESOURCE then fails to start the
// container). The processes limit proper is the cgroup's pids limit.
func ulimits() []*container.Ulimit {
	var out []*container.Ulimit
	for _, l := range []struct {
		name string
		res  int
	}{{"nofile", unix.RLIMIT_NOFILE}, {"nproc", unix.RLIMIT_NPROC}} {
		var rl unix.Rlimit
		n := int64(16384)
		if unix.Getrlimit(l.res, &rl) == nil && rl.Max < uint64(n) {
			n = int64(rl.Max)
		}
		out = append(out, &container.Ulimit{Name: l.name, Soft: n, Hard: n})
	}
	return out
}

// copyIn copies the workspace into the container's volume, owned by the
// program's user, and notes what it held.
func (r *run) copyIn(ctx context.Context) error {
	root, err := workspace.Open(r.job.Workspace)
	if err != nil {
		return err
	}
	defer root.Close()
	if r.before, err = workspace.Take(r.job.Workspace); err != nil {
		return err
	}
	lim := r.job.Limits
	if r.volume != "" {
		var size int64
		for _, e := range r.before.Entries {
			if e.Mode.IsRegular() {
				size += e.Size
			}
		}
		if size > lim.Workspace {
			return errWorkspaceTooLarge(lim)
		}
	}
	raw, rawW := io.Pipe()
	go func() { rawW.CloseWithError(root.WriteTar("", rawW)) }()
	owned, ownedW := io.Pipe()
	links := make(chan []linkSpec, 1)
	go func() {
		var l []linkSpec
		ownedW.CloseWithError(ownTar(ownedW, raw, r.uid, r.gid, 0o777, &l))
		links <- l
	}()
	_, err = r.c.CopyToContainer(ctx, r.id, client.CopyToContainerOptions{DestinationPath: workspaceDir, Content: owned})
	owned.CloseWithError(errors.New("not read"))
	raw.CloseWithError(errors.New("not read"))
	if err == nil {
		r.links = <-links
	}
	if err != nil {
		if r.volume != "" && strings.Contains(err.Error(), "no space left on device") {
			return errWorkspaceTooLarge(lim)
		}
		return fmt.Errorf("copying the workspace into the container: %w", err)
	}
	return nil
}

// errWorkspaceTooLarge refuses a workspace that does not fit in its
// volume, as the native tier does: the caller's to fix.
func errWorkspaceTooLarge(lim codecell.Limits) error {
	return codecell.Errorf(codecell.KindLimit, codecell.CodeWorkspaceTooLarge, "the workspace does not fit in its %d MiB quota", lim.Workspace>>20).WithHints(
		"remove files from the workspace, or ask for a larger workspace limit (limits.workspace)")
}

// stopGrace bounds how long the launcher has to end the program when the
// host asks it to; then the container is killed, and its workspace lost.
const stopGrace = 10 * time.Second

// run attaches, hands the job to the launcher, waits for the program's end
// and reads the workspace back while the container still runs.
func (r *run) run(ctx, setup context.Context) (*codecell.Outcome, error) {
	job := r.job
	att, err := r.c.ContainerAttach(setup, r.id, client.ContainerAttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true})
	if err != nil {
		return nil, fmt.Errorf("attaching to the container: %w", err)
	}
	defer att.Close()
	relays := r.relay()
	output := make(chan struct{})
	go func() {
		defer close(output)
		_, _ = stdcopy.StdCopy(job.Stdout, job.Stderr, att.Reader)
	}()
	go func() {
		if job.Stdin != nil {
			_, _ = io.Copy(att.Conn, job.Stdin)
		}
		_ = att.CloseWrite()
	}()
	if err := r.send(); err != nil {
		r.closeRelays(relays)
		return nil, fmt.Errorf("handing the job to the container: %w", err)
	}
	out := &codecell.Outcome{Isolation: r.isolation()}
	// The wait lasts as long as the program: the Exec's timeout bounds it,
	// not cleanupTime, which counts from the program's end.
	life, endLife := context.WithCancel(context.WithoutCancel(ctx))
	defer endLife()
	waited := r.c.ContainerWait(life, r.id, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	status := make(chan *exitMessage, 1)
	go func() { status <- readStatus(r.ctl) }()
	// The program's time runs from here; a cancellation of ctx ends it at
	// once.
	var timeUp <-chan time.Time
	if job.Limits.Timeout > 0 {
		timer := time.NewTimer(job.Limits.Timeout)
		defer timer.Stop()
		timeUp = timer.C
	}
	canceled := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		if errors.Is(ctx.Err(), context.Canceled) {
			close(canceled)
		}
	})
	defer stop()
	var (
		st        *exitMessage // the launcher's word: nil when it has none
		stated    bool
		code      int64
		ended     bool // the container has ended
		killAfter <-chan time.Time
	)
	stopProgram := func() {
		if out.Stopped {
			return
		}
		out.Stopped = true
		// The launcher ends the program and says so, with the workspace
		// still there to read back; a launcher that does not is killed
		// with its container.
		_ = r.ctl.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = r.ctl.Write([]byte("kill\n"))
		killAfter = time.After(stopGrace)
	}
	for !stated && !ended {
		select {
		case st = <-status:
			stated = true
		case w := <-waited.Result:
			code, ended = w.StatusCode, true
		case err := <-waited.Error:
			return nil, fmt.Errorf("waiting for the container: %w", err)
		case <-timeUp:
			stopProgram()
		case <-canceled:
			stopProgram()
		case <-killAfter:
			killAfter = nil
			kill, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTime)
			_, _ = r.c.ContainerKill(kill, r.id, client.ContainerKillOptions{Signal: "KILL"})
			cancel()
		}
	}
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTime)
	defer cancel()
	// The program has ended, and every process it started: so has every
	// socket it held.
	r.closeRelays(relays)
	readBack := r.volume == "" // a disk volume outlives the container
	if st != nil && !ended {
		readBack = true
		files, warnings := r.copyOut(bg, st.Left)
		out.Files = files
		out.Warnings = append(out.Warnings, warnings...)
	}
	// The launcher exits when its socket closes, and the container with it.
	r.ctl.Close()
	if !ended {
		select {
		case w := <-waited.Result:
			code = w.StatusCode
		case <-waited.Error:
		case <-bg.Done():
			// The launcher did not exit: the container goes with the
			// cleanup.
		}
	}
	select {
	case <-output:
	case <-time.After(5 * time.Second):
		out.Warnings = append(out.Warnings, "the container's output did not end with it; some may be missing")
	}

	inspect, err := r.c.ContainerInspect(bg, r.id, client.ContainerInspectOptions{})
	if err == nil && inspect.Container.State != nil {
		s := inspect.Container.State
		code = int64(s.ExitCode)
		out.MemoryKilled = s.OOMKilled
	}
	out.ExitCode = int(code)
	switch {
	case st != nil && st.Signal > 0:
		out.ExitCode, out.Signal = -1, st.Signal
	case st != nil:
		out.ExitCode = st.Exit
	case code > 128 && code < 128+65:
		// The engine reports a program ended by a signal as 128 + the
		// signal.
		out.ExitCode, out.Signal = -1, int(code-128)
	}
	r.noteMemory(out, st)
	if st == nil && code == 125 && !out.Stopped {
		// The launcher could not start the program (it said why on
		// stderr).
		return nil, errors.New("the container could not start the program: see its stderr")
	}
	if !readBack {
		out.Files = []codecell.FileChange{}
		out.Warnings = append(out.Warnings, "the container ended before its workspace could be read back (its tmpfs went with it), so no change was kept")
	} else if st == nil {
		files, warnings := r.copyOut(bg, nil)
		out.Files = files
		out.Warnings = append(out.Warnings, warnings...)
	}
	return out, nil
}

// noteMemory puts in out what is known of the program's memory: whether
// the kernel killed it for its limit and its peak, from the counters of
// the container's cgroup the launcher read (the engine's inspection
// misses the kill on some engines: Podman on cgroup v1), and the limits
// the kernel held, in the isolation. Where neither the engine nor the
// launcher can tell, the Result says so rather than guess.
func (r *run) noteMemory(out *codecell.Outcome, st *exitMessage) {
	lim := r.job.Limits
	var cg *cgroupReport
	if st != nil {
		cg = st.Cgroup
	}
	// The counters are the container's when its limit is the one asked
	// for: a cgroup seen from above (the host's root) has another.
	if cg != nil && lim.Memory > 0 && cg.MemoryLimit != lim.Memory {
		out.Warnings = append(out.Warnings, fmt.Sprintf("the container's cgroup holds a memory limit of %s, not the %d MiB asked for: its counters were not used", describeLimit(cg.MemoryLimit), lim.Memory>>20))
		cg = nil
	}
	if cg != nil {
		if cg.Version != "" {
			out.Isolation.Cgroup = cg.Version
		}
		if cg.MemoryPeak > 0 {
			out.MemoryPeak = cg.MemoryPeak
		}
		if out.Signal == int(syscall.SIGKILL) && cg.OOMKills > 0 {
			out.MemoryKilled = true
		}
		l := &out.Isolation.Limits
		if lim.Memory > 0 {
			swap := "swap not known"
			switch {
			case cg.Swap == 0:
				swap = "no swap"
			case cg.Swap == noLimit:
				swap = "swap not limited"
			case cg.Swap > 0:
				swap = fmt.Sprintf("%d MiB of swap beyond it", cg.Swap>>20)
			}
			l.Memory = fmt.Sprintf("container memory limit %d MiB, %s (cgroup %s, as the kernel holds it)", cg.MemoryLimit>>20, swap, cg.Version)
		}
		if lim.Processes > 0 {
			want := int64(lim.Processes + launcherTasks)
			if cg.PidsLimit == want {
				l.Processes += " (as the kernel holds it)"
			} else {
				l.Processes = fmt.Sprintf("asked for a container pids limit of %d, but the kernel holds %s", want, describeLimit(cg.PidsLimit))
			}
		}
	}
	if out.MemoryKilled || out.Signal != int(syscall.SIGKILL) || out.Stopped || lim.Memory <= 0 {
		return
	}
	switch {
	case cg != nil && cg.OOMKills == 0:
		// The kernel counted no out-of-memory kill: the SIGKILL came
		// from elsewhere.
	case cg != nil && cg.OOMKills < 0:
		out.Warnings = append(out.Warnings, "the program was killed by SIGKILL, which codecell did not send, and the container's count of out-of-memory kills could not be read: whether it ran out of memory is not known")
	default:
		out.Warnings = append(out.Warnings, fmt.Sprintf("the program was killed by SIGKILL, which codecell did not send; the engine (cgroup %s) did not report an out-of-memory kill, and the container's counters were not read (its launcher ended too): whether it ran out of memory is not known", orUnknown(r.t.cgroupVersion())))
	}
}

func describeLimit(n int64) string {
	switch {
	case n == noLimit:
		return "none"
	case n < 0:
		return "one it could not read"
	}
	return strconv.FormatInt(n, 10)
}

func orUnknown(s string) string {
	if s == "" {
		return "version not known"
	}
	return s
}

// readStatus reads the launcher's line saying how the program ended, or
// returns nil when the launcher ends without one (or with one that is no
// exit status).
func readStatus(r io.Reader) *exitMessage {
	// The line names at most 2*maxSkipped paths of the workspace.
	line, err := bufio.NewReader(io.LimitReader(r, 1<<20)).ReadBytes('\n')
	if err != nil {
		return nil
	}
	var st exitMessage
	if json.Unmarshal(line, &st) != nil {
		return nil
	}
	if st.Signal < 0 || st.Signal > 64 || st.Exit < -1 || st.Exit > 255 || (st.Signal > 0) != (st.Exit == -1) {
		return nil
	}
	if l := st.Left; l != nil {
		// Names the workspace could hold, as many as the launcher names,
		// and counts of at least those.
		files := l.Files[:0]
		for _, f := range l.Files {
			if p, err := workspace.CleanPath(string(f.Name)); err == nil && p == string(f.Name) && f.Size >= 0 && len(files) < maxSkipped {
				files = append(files, f)
			}
		}
		l.Files = files
		specials := l.Specials[:0]
		for _, n := range l.Specials {
			if p, err := workspace.CleanPath(string(n)); err == nil && p == string(n) && len(specials) < maxSkipped {
				specials = append(specials, n)
			}
		}
		l.Specials = specials
		l.NFiles = max(l.NFiles, len(l.Files))
		l.NSpecial = max(l.NSpecial, len(l.Specials))
	}
	return &st
}

// relay serves the program's descriptors: each listener takes one
// connection, joined to the job's file for that descriptor.
func (r *run) relay() []chan func() {
	var stops []chan func()
	for i, l := range r.listeners {
		file := r.job.ExtraFiles[i]
		stop := make(chan func(), 1)
		stops = append(stops, stop)
		go func() {
			conn, err := l.AcceptUnix()
			if err != nil {
				stop <- func() {}
				return
			}
			sock, err := conn.File()
			conn.Close()
			if err != nil {
				stop <- func() {}
				return
			}
			done, cut, err := fdrelay.Relay(sock, file)
			if err != nil {
				sock.Close()
				stop <- func() {}
				return
			}
			stop <- func() {
				select {
				case <-done:
				case <-time.After(5 * time.Second):
				}
				cut()
			}
		}()
	}
	return stops
}

// closeRelays ends the relays once the container has ended: a listener
// nothing connected to is closed; a relay finishes passing on what the
// program wrote, then stops.
func (r *run) closeRelays(stops []chan func()) {
	for _, l := range r.listeners {
		l.Close()
	}
	for _, s := range stops {
		(<-s)()
	}
	r.listeners = nil
}

// copyOut reads the container's workspace back, lists what changed and,
// when the workspace is the caller's, brings the changes back. launcher is
// what the container's launcher left out of the workspace (nil: nothing,
// or no word from it).
func (r *run) copyOut(ctx context.Context, launcher *leaveReport) ([]codecell.FileChange, []string) {
	job := r.job
	dir, err := os.MkdirTemp("", tempPrefix())
	if err != nil {
		return []codecell.FileChange{}, []string{"the workspace could not be read back: " + err.Error()}
	}
	defer os.RemoveAll(dir)
	skipped, left, err := r.readBack(ctx, dir, job.Limits.Workspace, launcher)
	if err != nil {
		return []codecell.FileChange{}, append(skipped, "the workspace could not be read back, so no change was kept: "+err.Error())
	}
	changes, after, listed := workspace.ChangesLeaving(r.before, dir, left)
	warnings := append(skipped, listed...)
	if after == nil {
		return []codecell.FileChange{}, warnings
	}
	changes = r.realChanges(changes, after)
	files := make([]codecell.FileChange, 0, len(changes))
	for _, c := range changes {
		files = append(files, codecell.FileChange{Path: c.Path, Change: codecell.Change(c.Kind), Size: c.Size, SHA256: c.SHA256, Symlink: c.Symlink, MIME: c.MIME})
	}
	if job.KeepWorkspace {
		for _, err := range workspace.Apply(changes, dir, job.Workspace, workspace.OwnerOf(job.Workspace)) {
			warnings = append(warnings, "bringing a file back to the workspace: "+err.Error())
		}
	}
	return files, warnings
}

// readBack copies directory /workspace of the container into dir, as an
// untrusted archive: see Reroot and workspace.Root.ExtractTarWith. quota
// bounds the bytes (0: none). It returns a warning for each file it left
// out, and what it left, for workspace.ChangesLeaving.
func (r *run) readBack(ctx context.Context, dir string, quota int64, launcher *leaveReport) ([]string, *workspace.Left, error) {
	got, err := r.c.CopyFromContainer(ctx, r.id, client.CopyFromContainerOptions{SourcePath: workspaceDir})
	if err != nil {
		return nil, nil, err
	}
	defer got.Content.Close()
	return extractBack(got.Content, dir, quota, launcher)
}

// maxSkipped is how many entries left in the container are named, one
// warning each; the rest are counted.
const maxSkipped = 20

// raiseQuota is what to do about a file too long for the read-back.
const raiseQuota = "raise limits.workspace, or have the program write less (a file of holes, as truncate makes, comes back at its whole length)"

// extractBack unpacks the engine's archive of the workspace into dir,
// leaving out what cannot come back (see workspace.ExtractOptions.Leave),
// with what the launcher left out beforehand (nil: nothing). An archive
// that holds more entries, or more bytes, than the read-back takes is
// brought back as far as it goes, with no file taken for deleted. It
// returns a warning for each file left, and what was left.
func extractBack(src io.Reader, dir string, quota int64, launcher *leaveReport) (warnings []string, left *workspace.Left, err error) {
	left = &workspace.Left{}
	root, err := workspace.Open(dir)
	if err != nil {
		return nil, nil, err
	}
	defer root.Close()
	// Reroot's side of the pipe and ExtractTarWith's both leave files.
	var mu sync.Mutex
	leaveFile := func(name, why string) {
		mu.Lock()
		defer mu.Unlock()
		if left.NFiles++; len(left.Files) < maxSkipped {
			left.Files = append(left.Files, name)
			warnings = append(warnings, name+" was left in the container, and is not in the file list (a copy the workspace held is kept): "+why)
		}
	}
	specials := map[string]bool{}
	special := func(name string) {
		if specials[name] {
			return
		}
		if left.Specials++; len(left.Special) < maxSkipped {
			specials[name] = true
			left.Special = append(left.Special, name)
		}
	}
	if launcher != nil {
		for _, f := range launcher.Files {
			why := fmt.Sprintf("it is %d bytes long, past what the read-back, which brings back at most %d bytes (limits.workspace), had left for it: %s", f.Size, quota, raiseQuota)
			if f.Data < f.Size {
				why = fmt.Sprintf("it is %d bytes long but holds %d bytes of data (the rest are holes, which an archive carries as zeros), past what the read-back, which brings back at most %d bytes (limits.workspace), had left for it: %s", f.Size, f.Data, quota, raiseQuota)
			}
			leaveFile(string(f.Name), why)
		}
		left.NFiles += max(0, launcher.NFiles-len(launcher.Files))
		for _, n := range launcher.Specials {
			special(string(n))
		}
		left.Specials += max(0, launcher.NSpecial-len(launcher.Specials))
	}
	type symlink struct{ name, target string }
	var links []symlink
	pr, pw := io.Pipe()
	rerooted := make(chan error, 1)
	go func() {
		err := Reroot(pw, src, RerootOptions{
			Base:  strings.TrimPrefix(workspaceDir, "/"),
			Limit: quota,
			Leave: func(name string, size, room int64) {
				leaveFile(name, fmt.Sprintf("it is %d bytes long, and the read-back, which brings back at most %d bytes (limits.workspace), had %d left for it: %s", size, quota, room, raiseQuota))
			},
			Link: func(name, target string) error {
				if len(links) >= workspace.MaxWorkspaceEntries {
					return workspace.ErrTooManyEntries
				}
				links = append(links, symlink{name, target})
				return nil
			},
			Special: special,
		})
		pw.CloseWithError(err)
		rerooted <- err
	}()
	_, _, err = root.ExtractTarWith("", pr, workspace.ExtractOptions{Quota: quota, Leave: func(name, why string) {
		leaveFile(name, why+": "+raiseQuota)
	}})
	pr.CloseWithError(errors.New("not read"))
	rerr := <-rerooted
	if n := left.NFiles - len(left.Files); n > 0 {
		warnings = append(warnings, fmt.Sprintf("and %d more files were left in the container (%d in all)", n, left.NFiles))
	}
	switch {
	case errors.Is(rerr, errArchiveTooLong) || errors.Is(err, workspace.ErrTooManyEntries):
		// What came is kept; what did not is not known by name.
		left.Incomplete = true
		why := rerr
		if why == nil || !errors.Is(rerr, errArchiveTooLong) {
			why = err
		}
		warnings = append(warnings, fmt.Sprintf("the read-back stopped before the end of the workspace (%v): the files after it were left in the container, and no file was reported deleted or removed from your directory; %s", why, raiseQuota))
		err = nil
	case err != nil:
		return warnings, nil, err
	}
	// The links last, each made beneath dir without following any link
	// on the way to it.
	for _, l := range links {
		if err := root.Symlink(l.target, l.name); err != nil {
			return warnings, nil, err
		}
	}
	return warnings, left, nil
}

// realChanges drops what Diff calls modified only because the file is a
// copy (a new inode and time): the same type, permissions and content as
// before the run.
func (r *run) realChanges(changes []workspace.Change, after *workspace.Snapshot) []workspace.Change {
	root, err := workspace.Open(r.job.Workspace)
	if err != nil {
		return changes
	}
	defer root.Close()
	out := changes[:0]
	for _, c := range changes {
		if c.Kind == "modified" {
			b, a := r.before.Entries[c.Path], after.Entries[c.Path]
			if b.Mode == a.Mode && (b.Mode.IsDir() || (b.Mode&os.ModeSymlink != 0 && b.Link == a.Link) ||
				(b.Mode.IsRegular() && b.Size == c.Size && sameContent(root, c.Path, c.SHA256))) {
				continue
			}
		}
		out = append(out, c)
	}
	return out
}

func sameContent(root *workspace.Root, rel, sum string) bool {
	f, _, err := root.Open(rel)
	if err != nil {
		return false
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return false
	}
	return hex.EncodeToString(h.Sum(nil)) == sum
}

// cleanup removes the container with its volumes, and the sockets.
func (r *run) cleanup() {
	// The container goes first: a ready container's launcher, seeing its
	// socket close, would end it while the engine removes it, and an
	// engine may refuse a removal then (a second try finds it ended).
	if r.id != "" {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTime)
		var err error
		for try := 0; try < 3; try++ {
			if _, err = r.c.ContainerRemove(ctx, r.id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err == nil || cerrdefs.IsNotFound(err) {
				err = nil
				break
			}
		}
		cancel()
		if err != nil && r.job != nil && r.job.Log != nil {
			r.job.Log.Warn("removing a container", "id", r.id, "err", err)
		}
	}
	// The workspace's volume is named: the container's removal leaves it.
	if r.volume != "" {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTime)
		var err error
		for try := 0; try < 3; try++ {
			if _, err = r.c.VolumeRemove(ctx, r.volume, client.VolumeRemoveOptions{Force: true}); err == nil || cerrdefs.IsNotFound(err) {
				err = nil
				break
			}
		}
		cancel()
		if err != nil && r.job != nil && r.job.Log != nil {
			r.job.Log.Warn("removing a volume", "name", r.volume, "err", err)
		}
	}
	for _, l := range r.listeners {
		l.Close()
	}
	if r.ctl != nil {
		r.ctl.Close()
	}
	if r.ctlL != nil {
		r.ctlL.Close()
	}
	if r.dir != "" {
		os.RemoveAll(r.dir)
	}
}
