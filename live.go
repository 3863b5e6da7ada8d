package codecell

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/codecell-dev/codecell/internal/capture"
	"github.com/codecell-dev/codecell/lang"
)

// Live sessions keep an interpreter between Execs, as a notebook does: the
// variables, imports, functions and open objects one cell leaves are there
// for the next. An Exec with Live set runs as a cell of that session.
//
// Each language's interpreter runs in a sandbox of its own, started at the
// session's first cell of that language, with the session's limits. A cell
// over its time is interrupted (Python's KeyboardInterrupt) and the
// interpreter kept; one that does not stop within LiveInterruptGrace, or
// that runs out of memory, loses the interpreter, and the next cell starts
// a fresh one in the same workspace. Every Result says which
// (SessionState).

// LiveTier is implemented by tiers that can keep a program running between
// Execs: a live session's interpreter.
type LiveTier interface {
	// StartLive starts job.Argv and leaves it running. The program reads
	// cells from job.ExtraFiles[0] and calls tools on job.ExtraFiles[1];
	// its stdout and stderr go to job.Stdout and job.Stderr for its whole
	// life. job.Workspace is the session's, which the tier keeps in step
	// with what the program sees (SyncIn, SyncOut).
	StartLive(ctx context.Context, job *Job) (LiveProgram, error)
}

// LiveProgram is a program a tier keeps running for a live session.
type LiveProgram interface {
	// SyncIn brings into the program's view of the workspace what changed
	// in the session's workspace since the last sync.
	SyncIn() error
	// SyncOut brings back to the session's workspace what changed in the
	// program's view since the last sync, and lists it.
	SyncOut() (files []FileChange, warnings []string)
	// Interrupt asks the program to stop what it is doing (SIGINT).
	Interrupt() error
	// Kill ends the program and all it started.
	Kill()
	// Done is closed when the program has ended; Exit then says how.
	Done() <-chan struct{}
	Exit() *Outcome
	// Isolation is what isolates the program.
	Isolation() Isolation
	// MemoryUsage is the memory its sandbox holds, in bytes; 0 when unknown.
	MemoryUsage() int64
	// Close ends the program, if it runs, and frees all that held it.
	Close()
}

// LiveNetwork is implemented by live programs whose sandbox has a network
// (the session's network policy lets it reach hosts).
type LiveNetwork interface {
	// TakeConnections lists the connections that ended since the last
	// call, and forgets them.
	TakeConnections() []NetworkConnection
}

// LiveInterruptGrace is how long a cell over its time has to stop once
// interrupted before its interpreter is killed.
const LiveInterruptGrace = 2 * time.Second

// Session states a live cell's Result reports.
const (
	SessionKept = "kept" // the interpreter lives on, with what the cell left
	SessionLost = "lost" // the interpreter ended: the next cell starts afresh
)

// liveFDs are the descriptors of the control and tool sockets in a live
// interpreter.
const (
	liveControlFD = 3
	liveToolFD    = 4
)

// Live is a live session's interpreters, one per language. Make one with
// Engine.NewLive; Close it when the session ends. Its methods may be called
// concurrently: cells of one Live run one at a time.
type Live struct {
	e      *Engine
	mu     sync.Mutex // held while a cell runs
	pmu    sync.Mutex // guards the fields below
	procs  map[string]*liveProc
	closed bool
	// pending is the state each language's first interpreter loads, for
	// a fork (see Fork): a file, removed once loaded or at Close.
	pending map[string]*forkState
}

// NewLive makes a live session's set of interpreters; none runs until its
// first cell.
func (e *Engine) NewLive() *Live {
	return &Live{e: e, procs: map[string]*liveProc{}}
}

// LiveStatus is one interpreter of a live session.
type LiveStatus struct {
	Language string    `json:"language"`
	Running  bool      `json:"running"`
	Memory   int64     `json:"memory_bytes"`
	Started  time.Time `json:"started"`
	Cells    int       `json:"cells"`
}

// Status lists the session's interpreters, by language.
func (l *Live) Status() []LiveStatus {
	l.pmu.Lock()
	defer l.pmu.Unlock()
	var out []LiveStatus
	for name, p := range l.procs {
		out = append(out, LiveStatus{Language: name, Running: p.prog.Exit() == nil, Memory: p.prog.MemoryUsage(), Started: p.started, Cells: p.cells})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Language < out[j].Language })
	return out
}

// Memory is what the session's interpreters hold, in bytes.
func (l *Live) Memory() int64 {
	var n int64
	for _, s := range l.Status() {
		n += s.Memory
	}
	return n
}

// Restart ends the session's interpreters: the next cell of each language
// starts a fresh one, in the same workspace (and without the state a fork
// copied, if it was not loaded yet). It waits for a running cell.
// A cell that runs meanwhile loses its interpreter.
func (l *Live) Restart() {
	l.pmu.Lock()
	procs, pending := l.procs, l.pending
	if !l.closed {
		l.procs, l.pending = map[string]*liveProc{}, nil
	}
	l.pmu.Unlock()
	closeProcs(procs)
	removePending(pending)
}

// Close ends the session's interpreters for good.
func (l *Live) Close() {
	l.pmu.Lock()
	procs, pending := l.procs, l.pending
	l.procs, l.closed, l.pending = nil, true, nil
	l.pmu.Unlock()
	closeProcs(procs)
	removePending(pending)
}

// Ended reports whether Close was called: the session's interpreters are
// gone, and its cells are refused.
func (l *Live) Ended() bool {
	l.pmu.Lock()
	defer l.pmu.Unlock()
	return l.closed
}

// proc returns the session's interpreter of a language, or nil; ok is
// false once the session is closed.
func (l *Live) proc(name string) (p *liveProc, ok bool) {
	l.pmu.Lock()
	defer l.pmu.Unlock()
	return l.procs[name], !l.closed
}

// setProc records (or, with nil, forgets) the interpreter of a language.
// It reports false when the session was closed meanwhile.
func (l *Live) setProc(name string, p *liveProc) bool {
	l.pmu.Lock()
	defer l.pmu.Unlock()
	if l.closed {
		return false
	}
	if p == nil {
		delete(l.procs, name)
	} else {
		l.procs[name] = p
	}
	return true
}

// drop forgets p, if it is still the language's interpreter, and closes it
// in the background.
func (l *Live) drop(name string, p *liveProc) {
	l.pmu.Lock()
	if l.procs[name] == p {
		delete(l.procs, name)
	}
	l.pmu.Unlock()
	go p.close()
}

func closeProcs(procs map[string]*liveProc) {
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.close()
		}()
	}
	wg.Wait()
}

// liveProc is one interpreter of a live session, on the Engine's side.
type liveProc struct {
	prog    LiveProgram
	ctl     *os.File // the host's end of the control socket
	ctlR    *bufio.Reader
	tool    *os.File // the host's end of the interpreter's tool socket
	stdout  *cellSink
	stderr  *cellSink
	runner  string // the host directory of its runner's files
	started time.Time
	lim     Limits // the session's, which it was started with
	policy  []byte // the guardrails it applies at run time (RunnerFile); nil for none
	guard   string // what applies them (Isolation.Runtime)
	seq     int    // the id of the request it was last sent (see nextID)
	cells   int
	// packages are the packages it was started with (normalized), which
	// every cell of it gets and none may change.
	packages []string

	closeOnce sync.Once
}

// nextID gives the interpreter's next request an id of its own, at
// random, which its answer names: what the interpreter's program writes on
// the control socket without reading the request (an answer forged for a
// later cell, a thread that writes one later) cannot name it, and is
// refused. Below 2^53, so that node reads it exactly.
func (p *liveProc) nextID() int {
	var b [8]byte
	_, _ = rand.Read(b[:])
	p.seq = int(binary.LittleEndian.Uint64(b[:])>>11) | 1
	return p.seq
}

// stale reports whether the interpreter wrote on its control socket
// between requests (a thread a cell left, say): what it wrote is no answer,
// and the interpreter is not to be trusted with the next request.
func (p *liveProc) stale() bool {
	if p.ctlR.Buffered() > 0 {
		return true
	}
	rc, err := p.ctl.SyscallConn()
	if err != nil {
		return false
	}
	waiting := false
	_ = rc.Control(func(fd uintptr) {
		var b [1]byte
		n, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		waiting = err == nil && n > 0
	})
	return waiting
}

func (p *liveProc) close() {
	p.closeOnce.Do(p.closeNow)
}

func (p *liveProc) closeNow() {
	p.prog.Close()
	p.ctl.Close()
	p.tool.Close()
	os.RemoveAll(p.runner)
}

// liveCell is what a live interpreter reads for one cell.
type liveCell struct {
	ID         int      `json:"id"`
	Code       string   `json:"code"`
	Globals    []string `json:"globals,omitempty"`
	Filename   string   `json:"filename"`
	Args       []string `json:"args"`
	Env        []string `json:"env"`
	ValueLimit int      `json:"value_limit"`
	Token      string   `json:"token"`
}

// refuseLive checks that an Exec can run as a cell of its live session,
// and returns the refusal when it cannot.
func (r *run) refuseLive(tier Tier) *Envelope {
	if r.l.LiveRuntime() == "" {
		return Errorf(KindValidation, CodeInvalidRequest, "a live session keeps Python and JavaScript interpreters, not %s ones", r.l.Name).WithHints(
			"run this program in a session whose state is \"files\", or without a session",
			"or write the cell in Python, JavaScript or TypeScript")
	}
	if _, ok := tier.(LiveTier); !ok {
		return Errorf(KindValidation, CodeTierUnavailable, "tier %s cannot keep an interpreter between executions", tier.Name()).WithHints(
			"make the live session on the native tier (or tier auto on Linux)",
			"or make a session whose state is \"files\"")
	}
	if r.x.Stdin != nil {
		return Errorf(KindValidation, CodeInvalidRequest, "a cell of a live session reads no standard input").WithHints(
			"put the input in a file (files) and read it from the workspace")
	}
	if r.x.Policy.Network != nil {
		// The interpreter's sandbox was made with the session's network,
		// which a cell cannot narrow.
		return Errorf(KindValidation, CodePolicyUnsupported, "a cell of a live session runs with its session's network policy, which the execution cannot change").WithHints(
			"leave the execution's network policy out", "or make a live session with the network policy the cells need")
	}
	return nil
}

// runCell runs the Exec as a cell of its live session, starting the
// session's interpreter of its language first if none runs, and collects
// its Result.
func (r *run) runCell(ctx context.Context) error {
	x, res, live := r.x, r.res, r.x.Live
	if env := r.refuseLive(r.tier); env != nil {
		block(res, env)
		return nil
	}
	live.mu.Lock()
	defer live.mu.Unlock()
	ended := Errorf(KindValidation, CodeInvalidRequest, "the live session has ended").WithHints("create a new session")
	runtime := r.l.LiveRuntime()
	p, ok := live.proc(runtime)
	if !ok {
		block(res, ended)
		return nil
	}
	r.prog = &lang.Program{}
	cell, err := r.l.Cell(x.Code, x.Filename, r.e.transpiler(ctx))
	if err != nil {
		r.refuseOrFail(err, "preparing the cell")
		return nil
	}
	if cell.Syntax != nil {
		r.syntax(cell.Syntax)
		res.SessionState = SessionKept
		return nil
	}
	if cell.Warning != "" {
		res.Warnings = append(res.Warnings, cell.Warning)
	}
	if !r.checkCell(ctx) {
		return nil
	}
	if p != nil && p.prog.Exit() != nil {
		// It ended between cells (a thread of it ran out of memory, say).
		res.Warnings = append(res.Warnings, "the session's interpreter ended after the last cell ("+describeExit(p.prog.Exit())+"); this cell runs in a fresh one: variables from earlier cells are gone")
		live.drop(runtime, p)
		p = nil
	}
	if p != nil && p.stale() {
		res.Warnings = append(res.Warnings, "the session's interpreter wrote on its control socket after the last cell (what that cell left running, a thread say): it was ended, and this cell runs in a fresh one: variables from earlier cells are gone")
		live.drop(runtime, p)
		p = nil
	}
	if p != nil {
		if env := r.samePackages(p); env != nil {
			block(res, env)
			res.SessionState = SessionKept
			return nil
		}
	}
	if p == nil {
		var env *Envelope
		p, env = r.startLive(ctx)
		if env != nil {
			if env.Kind == KindInternal {
				res.Status, res.Error = StatusSandboxError, env
			} else {
				block(res, env)
			}
			return nil
		}
		if p == nil {
			// Its packages could not be had: the Result says why.
			return nil
		}
		if st := live.takePending(runtime); st != nil {
			if w := p.restore(ctx, st); w != "" {
				res.Warnings = append(res.Warnings, w)
			}
		}
		if !live.setProc(runtime, p) {
			go p.close()
			block(res, ended)
			return nil
		}
	}
	r.prog.Runtime = p.guard
	if g := res.Policy.Guard; !bytes.Equal(p.policy, g.RunnerFile()) && !g.Empty() {
		res.Warnings = append(res.Warnings, "this execution's own guardrails checked it before it ran; while it runs, the session's apply")
	}
	if r.lim.Memory != p.lim.Memory || r.lim.Processes != p.lim.Processes || r.lim.Workspace != p.lim.Workspace {
		res.Warnings = append(res.Warnings, "a cell of a live session runs under its interpreter's memory, processes and workspace limits, which are the session's: the execution's own do not apply")
	}
	if err := writeFiles(x.Workspace, x.Files); err != nil {
		r.refuseOrFail(err, "writing the execution's files")
		return nil
	}
	if err := p.prog.SyncIn(); err != nil {
		r.refuseOrFail(err, "bringing the workspace's changes into the session's sandbox")
		return nil
	}
	got, lost, err := r.cell(ctx, p, cell)
	if err != nil {
		r.failInfra("%v", err)
		lost = true
	} else if cerr := r.collect(ctx, got); cerr != nil {
		if lost || p.prog.Exit() != nil {
			live.drop(runtime, p)
		}
		return cerr
	} else if got.unanswered != nil && res.Status != StatusTimeout && res.Status != StatusMemoryLimit {
		// The host ended it, for what it did on its control channel:
		// the signal it was ended with is not what happened.
		res.Status, res.Value = StatusFailure, nil
		res.Error = Errorf(KindSandboxRuntime, CodeResultChannel, "the session's interpreter gave no answer for this cell on its control channel (file descriptor 3), and was ended: %v", got.unanswered).WithHints(
			"leave file descriptors 3 and 4 alone: they are the session's control and tool channels",
			"run the cell again: it starts a fresh interpreter, without the variables of earlier cells")
	}
	res.SessionState = SessionKept
	if lost {
		res.SessionState = SessionLost
		res.Warnings = append(res.Warnings, "the session's interpreter was lost with this cell: the next cell starts a fresh one in the same workspace, without the variables of earlier cells")
		live.drop(runtime, p)
	}
	return nil
}

// refuseOrFail fills the Result for err: the caller's refusal when it is
// an Envelope, else a failure of the host while doing what.
func (r *run) refuseOrFail(err error, doing string) {
	var env *Envelope
	if errors.As(err, &env) {
		block(r.res, env)
		return
	}
	r.failInfra("%s: %v", doing, err)
}

// checkCell checks a Python cell against its guardrails before it reaches
// the session's interpreter, which earlier cells ran in and could have
// changed: in a fresh interpreter of its own, as codecell check does
// (JavaScript and shell cells were checked on the host, in guardStage). It
// reports whether the cell goes on; when not, the Result says why.
func (r *run) checkCell(ctx context.Context) bool {
	if r.res.Policy.Guard.Empty() || r.l.Name != "python" {
		return true
	}
	x := r.x
	check, err := r.e.Run(ctx, &Exec{Tier: StaticTier, Language: x.Language, Code: x.Code, Filename: x.Filename,
		Policy: x.Policy, SessionPolicy: x.SessionPolicy})
	if err != nil {
		r.failInfra("checking the cell against the guardrails: %v", err)
		return false
	}
	if check.Status == StatusSuccess {
		return true
	}
	res := r.res
	res.Status, res.Error, res.Findings, res.ExitCode = check.Status, check.Error, check.Findings, check.ExitCode
	res.Stderr = check.Stderr
	if x.Stderr != nil {
		_, _ = io.WriteString(x.Stderr, check.Stderr)
	}
	res.SessionState = SessionKept
	return false
}

// sessionPolicy is the policy of the Exec's session, without the Exec's
// own layer: what its live interpreters apply at run time (the guardrails)
// and their sandboxes get (the network). Empty when it cannot be worked
// out (the Exec's own check refuses such a policy first).
func (e *Engine) sessionPolicy(x *Exec) AppliedPolicy {
	applied, env := e.policy(&Exec{SessionPolicy: x.SessionPolicy})
	if env != nil {
		return AppliedPolicy{}
	}
	return *applied
}

// startLive starts the session's interpreter of the Exec's language.
func (r *run) startLive(ctx context.Context) (*liveProc, *Envelope) {
	x, l := r.x, r.l
	internal := func(format string, args ...any) *Envelope {
		env := Errorf(KindInternal, CodeSandboxFailure, format, args...).WithHints(
			"this is a failure of the sandbox host, not of the program; retrying may help")
		env.Retryable = true
		return env
	}
	r.initPath = r.e.initPath()
	if iu, ok := r.tier.(InitUser); ok && iu.NeedsInit() && r.initPath == "" {
		return nil, Errorf(KindValidation, CodeTierUnavailable, "tier %s re-executes this program for its sandbox's init, and this program did not call codecell.Init", r.tier.Name()).WithHints(
			"call codecell.Init() first thing in main", "or set Engine.InitPath to an installed codecell binary")
	}
	runner, err := os.MkdirTemp(r.e.runnerTempDir(), "codecell-live-")
	if err != nil {
		return nil, internal("creating the runner directory: %v", err)
	}
	view := r.tier.View(x.Workspace, runner)
	interp := r.e.Interpreters[l.Name]
	session := r.e.sessionPolicy(x)
	var policy []byte
	if g := session.Guard; !g.Empty() {
		policy = g.RunnerFile()
	}
	start := l.Live(lang.LiveSource{Interpreter: interp, Memory: r.lim.Memory, ControlFD: liveControlFD, ToolFD: liveToolFD, Policy: policy},
		lang.View{Workspace: view.Workspace, Runner: view.Runner})
	// The packages the interpreter imports, for its life: the
	// configuration's, the session's and this first cell's.
	r.prog.Argv = start.Argv
	if !r.packages(ctx) {
		os.RemoveAll(runner)
		return nil, nil
	}
	if err := writeRunnerFiles(runner, withToolClient(start.Files)); err != nil {
		os.RemoveAll(runner)
		return nil, internal("writing the runner's files: %v", err)
	}
	ctl, ctlChild, err := filePair("control")
	if err != nil {
		os.RemoveAll(runner)
		return nil, internal("%v", err)
	}
	tool, toolChild, err := filePair("tools")
	if err != nil {
		ctl.Close()
		ctlChild.Close()
		os.RemoveAll(runner)
		return nil, internal("%v", err)
	}
	p := &liveProc{ctl: ctl, ctlR: bufio.NewReader(ctl), tool: tool, stdout: newCellSink(), stderr: newCellSink(),
		runner: runner, started: time.Now(), lim: r.lim, policy: policy, guard: start.Guard}
	if rep, ok := r.res.Packages[packageLanguage(l.Name)]; ok {
		p.packages = rep.List
	}
	job := &Job{
		ID:            r.res.ID,
		Language:      l.Name,
		Argv:          start.Argv,
		Env:           append([]string{"PATH=" + path.Join(view.Runner, "bin") + ":/usr/local/bin:/usr/bin:/bin", "HOME=" + view.Workspace, "LANG=C.UTF-8"}, r.pkgEnv...),
		Mounts:        r.mounts,
		Workspace:     x.Workspace,
		KeepWorkspace: true,
		Runner:        runner,
		RunnerFiles:   start.Files,
		View:          view,
		Stdout:        p.stdout,
		Stderr:        p.stderr,
		ExtraFiles:    []*os.File{ctlChild, toolChild},
		Limits:        r.lim,
		Policy:        x.Policy,
		InitPath:      r.initPath,
		Log:           r.e.Logger,
	}
	if allowsHosts(session.Network) {
		job.Network = session.Network
	}
	prog, err := r.tier.(LiveTier).StartLive(ctx, job)
	ctlChild.Close()
	toolChild.Close()
	if err != nil {
		ctl.Close()
		tool.Close()
		os.RemoveAll(runner)
		var env *Envelope
		if errors.As(err, &env) {
			return nil, env
		}
		return nil, internal("starting the session's interpreter: %v", err)
	}
	p.prog = prog
	// Ready once the runner says so.
	ready := make(chan error, 1)
	go func() {
		line, err := readLine(p.ctlR, maxDoneLine)
		if err == nil && string(line) != "ready\n" {
			err = fmt.Errorf("it said %q", line)
		}
		ready <- err
	}()
	var werr error
	select {
	case werr = <-ready:
	case <-prog.Done():
		werr = errors.New("it ended: " + describeExit(prog.Exit()))
	case <-time.After(30 * time.Second):
		werr = errors.New("it did not say it was ready within 30 s")
	}
	if werr != nil {
		<-prog.Done() // its output read to the end
		p.close()
		if said := strings.TrimSpace(p.stderr.betweenText()); said != "" {
			werr = fmt.Errorf("%v: %s", werr, tailLines(said, 10))
		}
		return nil, internal("starting the session's %s interpreter: %v", l.Name, werr)
	}
	return p, nil
}

// cell hands the interpreter one cell and waits for it, within the Exec's
// time: over it, the cell is interrupted, and the interpreter killed if it
// does not stop within LiveInterruptGrace. lost says the interpreter ended.
func (r *run) cell(ctx context.Context, p *liveProc, cell *lang.Cell) (got *ran, lost bool, err error) {
	x, lim, res := r.x, r.lim, r.res
	got = &ran{stdout: capture.New(lim.Stdout, x.Stdout), stderr: capture.New(lim.Stderr, x.Stderr)}
	runCtx, cancel := context.WithTimeoutCause(ctx, lim.Timeout, errExecTimeout)
	defer cancel()
	tools, err := r.e.startTools(runCtx, x, lim, res.ID)
	if err != nil {
		return nil, false, fmt.Errorf("opening the tool channel: %v", err)
	}
	p.nextID()
	p.cells++
	var tok [16]byte
	_, _ = rand.Read(tok[:])
	token := "\x00codecell-cell-" + hex.EncodeToString(tok[:]) + "\x00"
	filename := x.Filename
	if filename == "" {
		filename = r.l.DefaultFilename()
	}
	req, err := json.Marshal(liveCell{ID: p.seq, Code: cell.Code, Globals: cell.Globals, Filename: filename, Args: x.Args, Env: r.env,
		ValueLimit: lim.Value, Token: token})
	if err != nil {
		tools.stop()
		return nil, false, err
	}
	outSeen := p.stdout.begin(got.stdout, token)
	errSeen := p.stderr.begin(got.stderr, token)
	stopCalls, stopRelay := relayTools(p.tool, tools.child)

	out := &Outcome{Isolation: p.prog.Isolation()}
	var unanswered error
	status, raw, stopped, askErr := p.ask(runCtx, req, lim.Value)
	out.Stopped = stopped
	got.timedOut = errors.Is(context.Cause(runCtx), errExecTimeout)
	if askErr != nil {
		// The interpreter ended, or broke the protocol (what came is not
		// an answer: a program that wrote on the control socket itself):
		// it is ended, and how is what its sandbox saw.
		lost = true
		ended := false
		if !stopped && (errors.Is(askErr, io.EOF) || errors.Is(askErr, io.ErrUnexpectedEOF)) {
			// Its end of the socket closed: it is ending (the cell's
			// exit, or its runner's, which says why on stderr), and how
			// it ends is what the Result says, not the kill that would
			// race it.
			select {
			case <-p.prog.Done():
				ended = true
			case <-time.After(LiveInterruptGrace):
			}
		}
		if !ended {
			p.prog.Kill()
			<-p.prog.Done()
		}
		exit := p.prog.Exit()
		out.ExitCode, out.Signal, out.MemoryKilled = exit.ExitCode, exit.Signal, exit.MemoryKilled
		if !stopped && !ended && !exit.MemoryKilled {
			unanswered = askErr
		}
	} else {
		out.ExitCode = status
		got.raw = raw
	}
	// The cell's output ends at the token the interpreter wrote after it;
	// what a thread of it writes later goes to the next cell.
	waitSeen(outSeen, errSeen, p.prog.Done(), 2*time.Second)
	if !p.stdout.end() || !p.stderr.end() {
		if !lost {
			res.Warnings = append(res.Warnings, "the end of this cell's output did not come: output written since goes to the next cell")
		}
	}
	if lost {
		// What it wrote after the cell's end, as it ended (its runner's
		// last words), is this cell's: no later cell sees it.
		_, _ = got.stdout.Write(p.stdout.takeBetween())
		_, _ = got.stderr.Write(p.stderr.takeBetween())
	}
	// The calls end first, then the channel, whose last answers (the
	// calls left in flight, cancelled) the relay forwards before it ends.
	stopCalls()
	calls := tools.stop()
	stopRelay()
	if calls != nil {
		res.ToolCalls = calls
	}
	if w := tools.unlistedWarning(); w != "" {
		res.Warnings = append(res.Warnings, w)
	}
	out.Files, out.Warnings = p.prog.SyncOut()
	if ln, ok := p.prog.(LiveNetwork); ok {
		out.Network = ln.TakeConnections()
	}
	got.out, got.unanswered = out, unanswered
	return got, lost, nil
}

// ask sends the interpreter a request (its id p.seq) and waits for the
// answer. Once ctx ends, the interpreter is interrupted, and killed if the
// answer does not come within LiveInterruptGrace; stopped says ctx ended
// first. err means no answer came: the interpreter ended, or what came is
// not one.
func (p *liveProc) ask(ctx context.Context, req []byte, valueLimit int) (status int, raw []byte, stopped bool, err error) {
	id := p.seq
	stopped, err = p.exchange(ctx, func() error {
		_, err := p.ctl.Write(append(req, '\n'))
		return err
	}, func(rd *bufio.Reader) error {
		var err error
		status, raw, err = readDone(rd, id, valueLimit)
		return err
	})
	return status, raw, stopped, err
}

// exchange writes a request to the interpreter and reads its answer, as
// ask does: once ctx ends, the interpreter is interrupted, and killed if
// the answer does not come within LiveInterruptGrace.
func (p *liveProc) exchange(ctx context.Context, write func() error, read func(*bufio.Reader) error) (stopped bool, err error) {
	answers := make(chan error, 1)
	go func() { answers <- read(p.ctlR) }()
	// The request is written while the answer is awaited: an interpreter
	// that does not read it (stopped, or its runner held by what a cell
	// left) is one that does not answer, and the time and the grace bound
	// the write as they bound the answer.
	wrote := make(chan error, 1)
	go func() { wrote <- write() }()
	var grace <-chan time.Time
	done := ctx.Done()
	for {
		select {
		case werr := <-wrote:
			wrote = nil
			if werr != nil {
				p.prog.Kill()
			}
		case err := <-answers:
			if wrote != nil {
				// The write has ended, or (an answer that came before
				// the request was all read, which is no answer to it)
				// the deadline ends it.
				_ = p.ctl.SetWriteDeadline(time.Now())
				werr := <-wrote
				_ = p.ctl.SetWriteDeadline(time.Time{})
				if werr != nil {
					p.prog.Kill()
					if err == nil {
						err = errors.New("the interpreter answered before it read the request")
					}
				}
			}
			return stopped, err
		case <-done:
			done = nil
			stopped = true
			_ = p.prog.Interrupt()
			grace = time.After(LiveInterruptGrace)
		case <-grace:
			grace = nil
			p.prog.Kill()
		}
	}
}

// maxDoneLine bounds the line of an interpreter's answer ("done ID STATUS
// LENGTH\n", or "ready\n"): the control socket is the program's to write
// on, and what it writes there is never held past this before it is
// refused.
const maxDoneLine = 128

// readDone reads the interpreter's answer to cell id: "done ID STATUS
// LENGTH\n" and LENGTH bytes of what its result channel would have held.
func readDone(rd *bufio.Reader, id, valueLimit int) (status int, raw []byte, err error) {
	b, err := readLine(rd, maxDoneLine)
	if err != nil {
		return 0, nil, err
	}
	line := string(b)
	f := strings.Fields(line)
	if len(f) != 4 || f[0] != "done" {
		return 0, nil, fmt.Errorf("the interpreter answered %q", line)
	}
	got, err1 := strconv.Atoi(f[1])
	status, err2 := strconv.Atoi(f[2])
	n, err3 := strconv.Atoi(f[3])
	if err1 != nil || err2 != nil || err3 != nil || got != id || n < 0 || n > valueLimit+64<<10 {
		return 0, nil, fmt.Errorf("the interpreter answered %q", line)
	}
	raw = make([]byte, n)
	if _, err := io.ReadFull(rd, raw); err != nil {
		return 0, nil, err
	}
	return status, raw, nil
}

func waitSeen(a, b <-chan struct{}, done <-chan struct{}, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	for _, ch := range []<-chan struct{}{a, b} {
		select {
		case <-ch:
		case <-done:
			return
		case <-t.C:
			return
		}
	}
}

func describeExit(o *Outcome) string {
	switch {
	case o == nil:
		return "it runs"
	case o.MemoryKilled:
		return "killed for exceeding the memory limit"
	case o.Signal != 0:
		return "killed by signal " + strconv.Itoa(o.Signal)
	}
	return "exit status " + strconv.Itoa(o.ExitCode)
}

// filePair is a connected pair of stream sockets: the host's end,
// non-blocking (so that closing it, or a deadline, ends a read on it), and
// the program's.
func filePair(name string) (host, child *os.File, err error) {
	fds, err := socketpair()
	if err != nil {
		return nil, nil, err
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, nil, err
	}
	return os.NewFile(uintptr(fds[0]), name), os.NewFile(uintptr(fds[1]), name), nil
}

// relayTools joins the interpreter's tool socket to one cell's tool
// channel for the cell's life: calls go from the one to the other, answers
// back. stopCalls ends the way of the calls: what the interpreter writes
// later waits in its socket for the next cell. stop, once the host's end
// of the cell's channel is closed, forwards the answers written last (to
// the calls the cell left in flight, cancelled, for the threads that wait
// for them), and ends the relay.
func relayTools(interp, child *os.File) (stopCalls, stop func()) {
	// A non-blocking copy of the cell's end, so that closing it ends the
	// read on it.
	fd, err := unix.FcntlInt(child.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return func() {}, func() {}
	}
	_ = unix.SetNonblock(fd, true)
	cell := os.NewFile(uintptr(fd), "tools")
	calls, answers := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(answers)
		_, _ = io.Copy(interp, cell)
	}()
	go func() {
		defer close(calls)
		_, _ = io.Copy(cell, interp)
	}()
	// Deadlines end the read from the interpreter, and a write of answers
	// it does not read (a cell that wrote calls on its own and left them),
	// without closing its socket, which lives on for the next cell.
	stopCalls = sync.OnceFunc(func() {
		// Both ends of the way: a call may wait to be written to a host
		// that does not read it (a flood that does not read the answers).
		now := time.Now()
		_ = interp.SetReadDeadline(now)
		_ = cell.SetWriteDeadline(now)
		<-calls
	})
	stop = func() {
		stopCalls()
		_ = interp.SetWriteDeadline(time.Now().Add(time.Second))
		select {
		case <-answers: // the host's end closed, and all it wrote went on
		case <-time.After(time.Second):
		}
		_ = interp.SetWriteDeadline(time.Now())
		cell.Close()
		<-answers
		_ = interp.SetReadDeadline(time.Time{})
		_ = interp.SetWriteDeadline(time.Time{})
	}
	return stopCalls, stop
}

// cellSink is where a live interpreter's stdout (or stderr) goes for its
// whole life: to the running cell's capture, up to the token the
// interpreter writes after the cell; between cells, to a small buffer that
// the next cell's output begins with.
type cellSink struct {
	mu      sync.Mutex
	cur     io.Writer
	token   []byte
	held    []byte // the end of what came, which may be the token's start
	seen    chan struct{}
	between bytes.Buffer
}

const maxBetween = 64 << 10

func newCellSink() *cellSink { return &cellSink{} }

// begin sends what comes to w until the token passes; the channel is
// closed then.
func (s *cellSink) begin(w io.Writer, token string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cur, s.token, s.held = w, []byte(token), nil
	s.seen = make(chan struct{})
	if s.between.Len() > 0 {
		_, _ = w.Write(s.between.Bytes())
		s.between.Reset()
	}
	return s.seen
}

// end stops sending to the cell's writer, and reports whether the token
// had passed.
func (s *cellSink) end() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := s.cur == nil
	if !seen {
		// What is held is output, not a token's start.
		_, _ = s.cur.Write(s.held)
		s.cur, s.held, s.token = nil, nil, nil
	}
	return seen
}

// takeBetween returns what came between cells, and forgets it.
func (s *cellSink) takeBetween() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := bytes.Clone(s.between.Bytes())
	s.between.Reset()
	return b
}

// betweenText is what came between cells, not yet any cell's.
func (s *cellSink) betweenText() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.between.String()
}

func (s *cellSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		if s.cur == nil {
			if room := maxBetween - s.between.Len(); room > 0 {
				s.between.Write(p[:min(len(p), room)])
			}
			return n, nil
		}
		data := append(s.held, p...)
		p = nil
		if i := bytes.Index(data, s.token); i >= 0 {
			_, _ = s.cur.Write(data[:i])
			p = data[i+len(s.token):]
			s.cur, s.held, s.token = nil, nil, nil
			close(s.seen)
			continue
		}
		keep := min(len(data), len(s.token)-1)
		// The longest tail of data that starts the token is held back.
		for ; keep > 0; keep-- {
			if bytes.HasPrefix(s.token, data[len(data)-keep:]) {
				break
			}
		}
		_, _ = s.cur.Write(data[:len(data)-keep])
		s.held = append([]byte(nil), data[len(data)-keep:]...)
	}
	return n, nil
}

// Variable is one name a live session's cells left: its type and a short
// repr.
type Variable struct {
	Name string `json:"name"`
	Type string `json:"type"`
	Repr string `json:"repr"`
}

// ErrLiveBusy is returned by Variables while a cell of the session runs.
var ErrLiveBusy = errors.New("a cell of the live session is running")

// maxVariables bounds the names Variables lists.
const maxVariables = 1000

// Variables lists the names the session's interpreter of language holds,
// without running a cell; none when that interpreter has not started. A
// repr that does not return within LiveInterruptGrace is interrupted, and
// one that ignores the interrupt costs the interpreter.
func (l *Live) Variables(ctx context.Context, language string) ([]Variable, error) {
	lg := lang.Lookup(language)
	if lg == nil || lg.LiveRuntime() == "" {
		return nil, fmt.Errorf("a live session keeps no %q interpreter", language)
	}
	runtime := lg.LiveRuntime()
	if !l.mu.TryLock() {
		return nil, ErrLiveBusy
	}
	defer l.mu.Unlock()
	p, _ := l.proc(runtime)
	if p == nil || p.prog.Exit() != nil {
		return []Variable{}, nil
	}
	req, _ := json.Marshal(map[string]any{"id": p.nextID(), "variables": true, "max": maxVariables})
	vctx, cancel := context.WithTimeout(ctx, LiveInterruptGrace)
	defer cancel()
	_, raw, _, err := p.ask(vctx, req, 8<<20)
	if err != nil {
		l.drop(runtime, p)
		return nil, fmt.Errorf("the session's interpreter ended while listing its variables: %w", err)
	}
	var vars []Variable
	if err := json.Unmarshal(raw, &vars); err != nil {
		var failed struct{ Error string }
		if json.Unmarshal(raw, &failed) == nil && failed.Error != "" {
			return nil, fmt.Errorf("listing the variables: %s", failed.Error)
		}
		return nil, fmt.Errorf("the interpreter's list of variables is not JSON: %w", err)
	}
	if vars == nil {
		vars = []Variable{}
	}
	return vars, nil
}
