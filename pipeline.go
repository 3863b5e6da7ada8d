package codecell

// The pipeline of DESIGN: validate (validate), guard (guardStage), prepare
// (prepare), run (runOnTier) and collect (collect, then classify.go). Run
// takes an Exec through it; every stage that refuses or fails fills the
// Result and stops the ones after it.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/codecell-dev/codecell/bridge"
	"github.com/codecell-dev/codecell/guard"
	"github.com/codecell-dev/codecell/internal/capture"
	"github.com/codecell-dev/codecell/internal/workspace"
	"github.com/codecell-dev/codecell/lang"
)

// Run runs one Exec through the pipeline: validate, prepare, run on the tier,
// collect. Every outcome, including a refusal, is a Result; the error is
// non-nil only when no Result could be produced, which happens when ctx was
// cancelled by the caller (not by the Exec's own timeout).
//
// A panic in codecell's own code while it runs an Exec (a bug, or input it
// did not foresee) costs that Exec alone: it becomes a sandbox_error Result,
// and the stack goes to the Logger. A process serving many clients does not
// die with one run.
func (e *Engine) Run(ctx context.Context, x *Exec) (result *Result, err error) {
	start := time.Now()
	defer func() {
		if p := recover(); p != nil {
			result, err = e.panicked(p, start), nil
		}
	}()
	res := newResult()
	lim := x.Limits.Or(e.Limits.Or(DefaultLimits))
	l, tier, env := e.validate(x, lim, res)
	if res.Error == nil {
		var refusal *Envelope
		if res.Policy, refusal = e.policy(x); refusal != nil {
			block(res, refusal)
		} else if refusal = networkRefusal(x, tier, res.Policy.Network); refusal != nil {
			block(res, refusal)
		}
	}
	if res.Error == nil {
		res.Language = l.Name
		if tier != nil {
			res.Tier = tier.Name()
		}
		if x.Tier == StaticTier {
			res.Tier = StaticTier
		}
		err = e.execute(ctx, x, l, tier, env, lim, res)
	}
	if x.Live != nil && res.SessionState == "" {
		// Refused before it reached the session's interpreter, which
		// stays as it was.
		res.SessionState = SessionKept
	}
	res.DurationMS = time.Since(start).Milliseconds()
	res.Policy = res.Policy.withoutSecretSources()
	e.log(ctx, res, x)
	if err != nil {
		// The caller gave up before the program finished: the program was
		// killed and cleaned up, and nobody is waiting for a Result.
		return nil, err
	}
	return res, nil
}

// newResult is a Result before anything is known: nothing ran, nothing
// isolated it.
func newResult() *Result {
	return &Result{
		ID:        newID(),
		ExitCode:  -1,
		Files:     []FileChange{},
		ToolCalls: []ToolCall{},
		Warnings:  []string{},
		Isolation: Isolation{Level: "none", Network: "none"},
	}
}

// Refuse is the Result of an Exec that whoever hands requests to the Engine
// refused before it could be run (arguments it could not read, a session
// it could not have): blocked, with env, logged as the Engine logs its
// runs. Transports answer every refusal with a Result of the same shape.
func (e *Engine) Refuse(ctx context.Context, x *Exec, env *Envelope) *Result {
	res := newResult()
	block(res, env)
	if l := lang.Lookup(x.Language); l != nil {
		res.Language = l.Name
	}
	e.log(ctx, res, x)
	return res
}

// panicked is the Result of an Exec during which codecell panicked.
func (e *Engine) panicked(p any, start time.Time) *Result {
	res := newResult()
	res.Status = StatusSandboxError
	res.Error = Errorf(KindInternal, CodeSandboxFailure, "codecell failed while handling this program (%v); nothing more of it ran", p).WithHints(
		"this is a fault in codecell, not in the program: change the program, or report it with codecell's log")
	res.DurationMS = time.Since(start).Milliseconds()
	if e.Logger != nil {
		e.Logger.Error("codecell panicked while running an exec", "exec_id", res.ID, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
	}
	return res
}

// log writes the Exec's line, with ctx: a handler may add what the context
// carries, such as who asked for the run.
func (e *Engine) log(ctx context.Context, res *Result, x *Exec) {
	if e.Logger == nil {
		return
	}
	attrs := []any{"exec_id", res.ID, "status", res.Status, "tier", res.Tier, "language", res.Language,
		"exit_code", res.ExitCode, "duration_ms", res.DurationMS, "code_chars", utf8.RuneCountInString(x.Code)}
	if res.Error != nil {
		attrs = append(attrs, "error_code", res.Error.Code)
	}
	if len(res.Network) > 0 {
		refused := 0
		for _, c := range res.Network {
			if !c.Allowed {
				refused++
			}
		}
		attrs = append(attrs, "connections", len(res.Network), "connections_refused", refused)
	}
	e.Logger.InfoContext(ctx, "exec", attrs...)
}

// block fills res as refused before running.
func block(res *Result, env *Envelope) {
	res.Status = StatusBlocked
	res.Error = env
}

// validate checks the request and picks the language and the tier. On a
// refusal it fills res and returns nils.
func (e *Engine) validate(x *Exec, lim Limits, res *Result) (*lang.Language, Tier, []string) {
	l := lang.Lookup(x.Language)
	if l == nil {
		msg := fmt.Sprintf("unknown language %q", x.Language)
		if x.Language == "" {
			msg = "no language given"
		} else if near := nearest(x.Language, lang.Names()); near != "" {
			msg += fmt.Sprintf("; did you mean %q?", near)
		}
		block(res, Errorf(KindValidation, CodeUnknownLanguage, "%s", msg).WithHints(
			"use one of: "+strings.Join(lang.Names(), ", ")))
		return nil, nil, nil
	}
	if strings.TrimSpace(x.Code) == "" {
		block(res, Errorf(KindValidation, CodeEmptyCode, "the code is empty").WithHints(
			"send the program's source: in the code field (MCP, REST), or in the file or on standard input (codecell run)"))
		return nil, nil, nil
	}
	if err := lim.check(); err != nil {
		block(res, Errorf(KindValidation, CodeInvalidRequest, "%v", err).WithHints(
			"leave a limit at zero to take the default"))
		return nil, nil, nil
	}
	if n := utf8.RuneCountInString(x.Code); n > lim.CodeSize {
		block(res, Errorf(KindValidation, CodeCodeTooLarge, "the code is %d characters, over the limit of %d", n, lim.CodeSize).WithHints(
			"split the work into smaller programs", "write data to files in the workspace instead of embedding it in the code"))
		return nil, nil, nil
	}
	// A program that plainly needs more calls than it may make is refused
	// before it starts, not stopped half-way with its work half done.
	if n := guard.CountToolCalls(l.Name, x.Code); n > lim.ToolCalls {
		block(res, Errorf(KindGuardrail, CodeToolCallLimit, "the program calls tools in %d places, and a run may make %d calls", n, lim.ToolCalls).WithHints(
			"call the tool in a loop, or batch the work into fewer calls",
			"split the work across several runs"))
		return nil, nil, nil
	}
	env, bad := buildEnv(x.Env)
	if bad != nil {
		block(res, bad)
		return nil, nil, nil
	}
	size := 0
	for _, a := range append(append([]string{}, x.Args...), env...) {
		size += len(a) + 1
	}
	if size > maxArgsEnv {
		block(res, Errorf(KindValidation, CodeInvalidRequest, "the arguments and environment variables total %d bytes, over the limit of %d", size, maxArgsEnv).WithHints(
			"pass large data in a file (Exec.Files) or on standard input instead"))
		return nil, nil, nil
	}
	name := x.Tier
	if name == StaticTier {
		if l.Name != "python" {
			// Checked on the host: no tier takes part.
			return l, nil, env
		}
		// Python is checked by its own parser, in the sandbox.
		name = ""
	}
	tier, refusal := e.pickTier(name)
	if refusal != nil {
		block(res, refusal)
		return nil, nil, nil
	}
	return l, tier, env
}

// buildEnv validates the caller's variables. The host's environment is never
// passed on: a program sees the minimal environment and these.
func buildEnv(vars map[string]string) ([]string, *Envelope) {
	env := make([]string, 0, len(vars))
	for k, v := range vars {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return nil, Errorf(KindValidation, CodeInvalidRequest, "environment variable %q is not valid", k).WithHints(
				"names may not be empty or contain '=' or NUL; values may not contain NUL")
		}
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	return env, nil
}

// A run is one Exec past validation, as its stages hand it on.
type run struct {
	e      *Engine
	x      *Exec
	l      *lang.Language
	tier   Tier // nil for the static tier's host-side check
	env    []string
	lim    Limits
	res    *Result
	static bool // only checked (StaticTier), never run

	ws       string
	runner   string
	view     View
	prog     *lang.Program
	initPath string
	before   *workspace.Snapshot
	cleanups []func()
	// finished is closed once the Result is built (Job.Finished).
	finished chan struct{}
	// mounts and pkgEnv show the program its packages (packages.go).
	mounts []Mount
	pkgEnv []string
}

// execute takes a validated Exec through the stages after validation:
// guard, prepare, run, collect. It returns ctx's error when the caller
// cancelled the run.
func (e *Engine) execute(ctx context.Context, x *Exec, l *lang.Language, tier Tier, env []string, lim Limits, res *Result) error {
	r := &run{e: e, x: x, l: l, tier: tier, env: env, lim: lim, res: res, static: x.Tier == StaticTier, finished: make(chan struct{})}
	defer close(r.finished)
	defer r.cleanup()
	if !r.guardStage(ctx) {
		return nil
	}
	if x.Live != nil {
		if !r.livePackages() {
			return nil
		}
		return r.runCell(ctx)
	}
	if !r.prepare(ctx) {
		return nil
	}
	if !r.packages(ctx) {
		// A caller that gave up while the packages were installed gets
		// no Result, as one that gives up while the program runs.
		return ctx.Err()
	}
	return r.runAndCollect(ctx)
}

func (r *run) cleanup() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

// failInfra fills the Result as a failure of the host, not of the program.
func (r *run) failInfra(format string, args ...any) {
	r.res.Status = StatusSandboxError
	r.res.Error = Errorf(KindInternal, CodeSandboxFailure, format, args...).WithHints(
		"this is a failure of the sandbox host, not of the program; retrying may help")
	r.res.Error.Retryable = true
}

// failHost fails the run for what the host's configuration lacks (an
// interpreter that is not there, or not where the sandbox can see it):
// a retry fails the same way until the configuration changes.
func (r *run) failHost(env *Envelope) {
	r.res.Status = StatusSandboxError
	env.Retryable = false
	r.res.Error = env
}

// guardStage refuses, before anything is made for it, a program that is
// too deep to parse or that the guardrails refuse. It reports whether the
// run goes on.
func (r *run) guardStage(ctx context.Context) bool {
	if n := r.l.CheckNesting(r.x.Code); n != nil {
		block(r.res, nestingEnvelope(n))
		return false
	}
	findings, refused := r.e.checkStatic(ctx, r.l, r.x, &r.res.Policy.Guard)
	if refused != nil {
		block(r.res, refused)
		return false
	}
	if len(findings) > 0 {
		blockFindings(r.res, findings)
		return false
	}
	if r.static && r.tier == nil {
		r.res.Status = StatusSuccess
		return false
	}
	return true
}

// prepare makes the workspace and the runner directory, has the language
// prepare the program for the tier's view, writes the runner's files, and
// takes the workspace's snapshot to tell the run's changes by. It reports
// whether the run goes on.
func (r *run) prepare(ctx context.Context) bool {
	x, l, res := r.x, r.l, r.res
	ws, cleanupWS, err := r.e.workspace(x, r.tier)
	if err != nil {
		r.refuseOrFail(err, "preparing the workspace")
		return false
	}
	r.ws = ws
	r.cleanups = append(r.cleanups, cleanupWS)
	// A tier that writes the runner's files into its sandbox itself takes
	// them from the Job: no directory on the host.
	if rf, ok := r.tier.(RunnerFilesTier); !ok || !rf.TakesRunnerFiles() {
		runner, err := os.MkdirTemp(r.e.runnerTempDir(), "codecell-run-")
		if err != nil {
			r.failInfra("creating the runner directory: %v", err)
			return false
		}
		r.runner = runner
		r.cleanups = append(r.cleanups, func() { os.RemoveAll(runner) })
	}

	interp := r.e.Interpreters[l.Name]
	if interp != "" && !strings.Contains(interp, "/") {
		if found, err := exec.LookPath(interp); err == nil {
			interp = found
		}
	}
	r.initPath = r.e.initPath()
	if iu, ok := r.tier.(InitUser); ok && iu.NeedsInit() && r.initPath == "" {
		block(res, Errorf(KindValidation, CodeTierUnavailable, "tier %s re-executes this program for its sandbox's init, and this program did not call codecell.Init", r.tier.Name()).WithHints(
			"call codecell.Init() first thing in main", "or set Engine.InitPath to an installed codecell binary"))
		return false
	}
	r.view = r.tier.View(ws, r.runner)
	prog, err := l.Prepare(lang.Source{
		Code:        x.Code,
		Filename:    x.Filename,
		Args:        x.Args,
		Interpreter: interp,
		ValueFD:     valueFD,
		ToolFD:      toolFD,
		WarmFD:      warmFD,
		ValueLimit:  r.lim.Value,
		Memory:      r.lim.Memory,
		Policy:      res.Policy.Guard.RunnerFile(),
		CheckOnly:   r.static,
		Transpile:   r.e.transpiler(ctx),
	}, lang.View{Workspace: r.view.Workspace, Runner: r.view.Runner})
	var refused *Envelope
	if errors.As(err, &refused) {
		if refused.Retryable {
			res.Status = StatusSandboxError
			res.Error = refused
		} else {
			block(res, refused)
		}
		return false
	}
	if err != nil {
		block(res, Errorf(KindValidation, CodeInvalidRequest, "%v", err).WithHints("use a plain file name such as main.py"))
		return false
	}
	if prog.Syntax != nil {
		r.syntax(prog.Syntax)
		return false
	}
	r.prog = prog
	withToolClient(prog.Files)
	if r.runner != "" {
		if err := writeRunnerFiles(r.runner, prog.Files); err != nil {
			r.failInfra("%v", err)
			return false
		}
	}
	if info, err := os.Stat(prog.Argv[0]); err != nil || info.IsDir() {
		r.failHost(Errorf(KindInternal, CodeSandboxFailure, "the %s interpreter %s is not on this host", l.Name, prog.Argv[0]).WithHints(
			"install it, or give the interpreter's path (interpreters in the configuration, --interpreter " + l.Name + "=PATH); retrying will not help until then"))
		return false
	}
	if r.before, err = workspace.Take(ws); err != nil {
		r.failInfra("reading the workspace: %v", err)
		return false
	}
	return true
}

// syntax reports what the transpiler found, which the interpreter would
// have: the way a run that failed to compile is reported.
func (r *run) syntax(syn *lang.SyntaxError) {
	res := r.res
	res.Status, res.ExitCode = StatusFailure, 1
	res.Stderr = syn.Text
	res.Error = syntaxEnvelope(syn.Filename, syn.Line, syn.Column, syn.Message)
	if r.x.Stderr != nil {
		_, _ = io.WriteString(r.x.Stderr, syn.Text)
	}
}

// withToolClient adds codecell-tool to a runner directory's files: every
// program can call tools from the shell too, with codecell-tool on its
// PATH. It returns files.
func withToolClient(files map[string][]byte) map[string][]byte {
	files["bin/codecell-tool"] = bridge.ShellClient
	return files
}

// writeRunnerFiles writes a runner directory's files. Files under bin/ are
// executable.
func writeRunnerFiles(dir string, files map[string][]byte) error {
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if !strings.HasPrefix(name, "bin/") {
			if err := os.WriteFile(p, data, 0o644); err != nil {
				return err
			}
			continue
		}
		if err := writeExecutable(p, data); err != nil {
			return err
		}
	}
	return nil
}

// writeExecutable writes a file a sandbox will execute. A process this one
// forks meanwhile (a sandbox's init, which waits for its user namespace's
// mappings before it execs) would hold the file open for writing until its
// exec, and an exec of the file then fails with ETXTBSY ("text file
// busy"): the file is written under the fork lock's read side, which no
// fork passes.
func writeExecutable(path string, data []byte) error {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	return os.WriteFile(path, data, 0o755)
}

// ran is what the run stage hands the collect stage.
type ran struct {
	out            *Outcome
	err            error  // the tier could not run the program
	raw            []byte // what the result channel held
	stdout, stderr *capture.Buffer
	timedOut       bool // the Exec's own timeout ended it
	// unanswered is why a live interpreter gave no answer for its cell
	// and was ended by the host (see runCell); nil otherwise.
	unanswered error
}

// runAndCollect runs the program on the tier and collects its Result.
func (r *run) runAndCollect(ctx context.Context) error {
	got, ok := r.runOnTier(ctx)
	if !ok {
		return nil
	}
	return r.collect(ctx, got)
}

// runOnTier opens the result and tool channels, hands the job to the tier
// within the Exec's time limit, and gathers what came back. It reports
// false when the channels could not be opened (the Result says so).
func (r *run) runOnTier(ctx context.Context) (*ran, bool) {
	x, lim, res := r.x, r.lim, r.res
	got := &ran{stdout: capture.New(lim.Stdout, x.Stdout), stderr: capture.New(lim.Stderr, x.Stderr)}
	valueR, valueW, err := os.Pipe()
	if err != nil {
		r.failInfra("%v", err)
		return nil, false
	}
	valueDone := make(chan []byte, 1)
	go func() { valueDone <- readBounded(valueR, int64(lim.Value)+64<<10) }()

	runCtx, cancel := context.WithTimeoutCause(ctx, lim.Timeout, errExecTimeout)
	defer cancel()
	tools, err := r.e.startTools(runCtx, x, lim, res.ID)
	if err != nil {
		valueW.Close()
		valueR.Close()
		r.failInfra("opening the tool channel: %v", err)
		return nil, false
	}
	baseEnv := []string{"PATH=" + path.Join(r.view.Runner, "bin") + ":/usr/local/bin:/usr/bin:/bin", "HOME=" + r.view.Workspace, "LANG=C.UTF-8"}
	job := &Job{
		ID:            res.ID,
		Language:      r.l.Name,
		Argv:          append(r.prog.Argv, []string{}...),
		Env:           append(slices.Clip(baseEnv), r.env...),
		Workspace:     r.ws,
		KeepWorkspace: x.Workspace != "",
		Runner:        r.runner,
		RunnerFiles:   r.prog.Files,
		Finished:      r.finished,
		View:          r.view,
		Stdin:         x.Stdin,
		Stdout:        got.stdout,
		Stderr:        got.stderr,
		ExtraFiles:    []*os.File{valueW, tools.child},
		Limits:        lim,
		Policy:        x.Policy,
		InitPath:      r.initPath,
		Mounts:        append(slices.Clip(x.mounts), r.mounts...),
		Log:           r.e.Logger,
	}
	if len(r.pkgEnv) > 0 {
		job.Env = withEnv(job.Env, r.pkgEnv)
	}
	if allowsHosts(res.Policy.Network) {
		job.Network = res.Policy.Network
	}
	job.Warm = warmStart(r.prog.Warm, baseEnv, job)
	got.out, got.err = r.tier.Run(runCtx, job)
	got.timedOut = errors.Is(context.Cause(runCtx), errExecTimeout)
	// Every holder of the channels' program ends is gone once the tier
	// returns; closing ours lets the readers see the end.
	valueW.Close()
	if calls := tools.stop(); calls != nil {
		res.ToolCalls = calls
	}
	if w := tools.unlistedWarning(); w != "" {
		res.Warnings = append(res.Warnings, w)
	}
	select {
	case got.raw = <-valueDone:
	case <-time.After(5 * time.Second):
		res.Warnings = append(res.Warnings, "the result channel stayed open after the program ended; its value was dropped")
	}
	valueR.Close()
	return got, true
}

// collect fills the Result from what the run left: the output, the
// isolation, the workspace's changes, the channel's record, and from them
// the status (classify).
func (r *run) collect(ctx context.Context, got *ran) error {
	l, lim, res := r.l, r.lim, r.res
	stdout, stderr, out := got.stdout, got.stderr, got.out
	res.Stdout, res.StdoutTruncated = stdout.String(), stdout.Truncated()
	res.Stderr, res.StderrTruncated = stderr.String(), stderr.Truncated()
	if res.StdoutTruncated {
		res.Warnings = append(res.Warnings, fmt.Sprintf("stdout was %d characters; only %d were kept", stdout.Written(), lim.Stdout))
	}
	if res.StderrTruncated {
		res.Warnings = append(res.Warnings, fmt.Sprintf("stderr was %d characters; only %d were kept", stderr.Written(), lim.Stderr))
	}
	if out != nil {
		// Set up before any failure: a sandbox_error still says what
		// isolation the run had.
		res.Isolation = out.Isolation
		res.Isolation.Runtime = r.prog.Runtime
	}
	if got.err != nil {
		var env *Envelope
		if errors.As(got.err, &env) && env.Kind != KindInternal {
			// What the caller asked for cannot be done as asked: theirs
			// to change, not to retry.
			block(res, env)
			return nil
		}
		if errors.As(got.err, &env) {
			// The host's, which says itself whether a retry can help.
			r.failHost(env)
			return nil
		}
		r.failInfra("%v", got.err)
		return nil
	}
	res.Warnings = append(res.Warnings, out.Warnings...)
	res.Network = out.Network
	r.files(out)

	if out.Stopped && !got.timedOut {
		return ctx.Err()
	}
	verdict, rec, misuse := readChannel(got.raw, l, lim.Value, res)
	if verdict != nil && verdict.Guard != nil {
		// The runner checked the program before running any of it.
		var findings []GuardFinding
		if err := json.Unmarshal(verdict.Guard, &findings); err == nil && (len(findings) > 0 || r.static) {
			res.ExitCode = -1
			if len(findings) > 0 {
				blockFindings(res, findings)
			} else {
				res.Status = StatusSuccess
			}
			return nil
		}
	}
	classify(res, out, rec, l, lim, out.Stopped)
	if misuse != "" && res.Status != StatusTimeout && res.Status != StatusMemoryLimit {
		// Something besides the runner wrote to the result channel: what
		// it holds is not the program's value, nor a verdict.
		res.Status, res.Value = StatusFailure, nil
		res.Error = Errorf(KindSandboxRuntime, CodeResultChannel, "%s", misuse).WithHints(
			"leave file descriptor 3 alone: it is codecell's channel for the value of the final expression",
			"return the value instead (the final expression, or return at top level)")
	}
	if r.static && res.Status == StatusSuccess {
		r.failInfra("the %s runner ended without reporting its check", l.Name)
	}
	return nil
}

// files lists the workspace's changes: the tier's list when it made one
// (a tier that copies the workspace back), else the difference between
// the snapshots before and after.
func (r *run) files(out *Outcome) {
	res := r.res
	if out.Files != nil {
		res.Files = out.Files
		return
	}
	changes, _, warnings := workspace.Changes(r.before, r.ws)
	res.Warnings = append(res.Warnings, warnings...)
	for _, c := range changes {
		res.Files = append(res.Files, FileChange{Path: c.Path, Change: Change(c.Kind), Size: c.Size, SHA256: c.SHA256, Symlink: c.Symlink, MIME: c.MIME})
	}
}

// warmStart says how the job's interpreter may be started before it, or nil
// when it may not: when its language has no runner that waits, or when the
// job's environment sets what an interpreter reads only as it starts
// (locale, time zone, the loader's and the interpreter's own variables),
// which a warm one, started with baseEnv, would have read differently.
func warmStart(w *lang.Warm, baseEnv []string, job *Job) *WarmStart {
	if w == nil {
		return nil
	}
	for _, kv := range job.Env[len(baseEnv):] {
		name, _, _ := strings.Cut(kv, "=")
		if name == "LANG" || name == "TZ" || name == "HOME" || name == "PATH" || name == "TMPDIR" ||
			strings.HasPrefix(name, "LC_") || strings.HasPrefix(name, "LD_") || strings.HasPrefix(name, "PYTHON") ||
			strings.HasPrefix(name, "NODE_") || strings.HasPrefix(name, "UV_") || strings.HasPrefix(name, "MALLOC_") ||
			strings.HasPrefix(name, "GLIBC_") {
			return nil
		}
	}
	var fork *ForkStart
	if w.Fork != nil {
		fork = &ForkStart{Interpreter: w.Fork.Interpreter, Runner: w.Fork.Runner, Preload: w.Fork.Preload}
	}
	return &WarmStart{
		Fork:    fork,
		Key:     warmKey(w, baseEnv),
		Argv:    w.Argv,
		Env:     baseEnv,
		Files:   w.Files,
		Extra:   len(job.ExtraFiles),
		Message: lang.WarmMessage(w.Args, job.Env),
	}
}

// withEnv is env with vars set, in place of any of the same names.
func withEnv(env, vars []string) []string {
	out := make([]string, 0, len(env)+len(vars))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.ContainsFunc(vars, func(v string) bool { return strings.HasPrefix(v, name+"=") }) {
			out = append(out, kv)
		}
	}
	return append(out, vars...)
}

// warmKey digests what starts a warm interpreter: its command, environment
// and files (by the digest lang worked out once for them).
func warmKey(w *lang.Warm, env []string) string {
	h := sha256.New()
	for _, part := range [][]string{w.Argv, env} {
		for _, s := range part {
			fmt.Fprintf(h, "%d:%s\n", len(s), s)
		}
		h.Write([]byte{0})
	}
	fmt.Fprintf(h, "%d:%s\n", len(w.Digest), w.Digest)
	return hex.EncodeToString(h.Sum(nil)[:16])
}
