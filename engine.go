package codecell

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/codecell-dev/codecell/bridge"
	"github.com/codecell-dev/codecell/guard"
	"github.com/codecell-dev/codecell/internal/capture"
	"github.com/codecell-dev/codecell/internal/instdir"
	"github.com/codecell-dev/codecell/internal/workspace"
	"github.com/codecell-dev/codecell/lang"
)

// Engine runs Execs. The zero value is ready to use: tier "auto", the
// default limits, the default interpreters.
type Engine struct {
	// Tier is the tier for Execs that name none; empty means "auto", the
	// strongest isolating tier this host offers.
	Tier string
	// Limits are the defaults for every Exec; zero fields take DefaultLimits.
	Limits Limits
	// Interpreters overrides interpreter paths by language name, such as
	// {"python": "/opt/python3.12/bin/python3"}.
	Interpreters map[string]string
	// InitPath is an installed codecell binary that tiers re-execute for
	// their init stage when this program did not call Init.
	InitPath string
	// TempDir holds temporary workspaces and runner directories; empty means
	// os.TempDir().
	TempDir string
	// Logger receives one line per Exec; nil means none.
	Logger *slog.Logger
	// Tiers, when set, are used instead of the registered tiers of the same
	// names: a differently configured native tier, say.
	Tiers []Tier
	// Tools are the tools programs may call; nil means none but an Exec's
	// own.
	Tools *Toolbox
	// Policy applies to every Exec, on top of the Exec's own: each can only
	// narrow what the other allows.
	Policy Policy
}

// lookupTier finds a tier by name, the Engine's own first.
func (e *Engine) lookupTier(name string) (Tier, bool) {
	for _, t := range e.Tiers {
		if t.Name() == name {
			return t, true
		}
	}
	return LookupTier(name)
}

// autoOrder is the order in which "auto" tries isolating tiers, strongest
// and cheapest first: the tiers codecell has that isolate.
var autoOrder = []string{"native"}

// maxArgsEnv bounds the program's arguments and environment together, well
// under the kernel's own limit for execve.
const maxArgsEnv = 256 << 10

// valueFD is the program's file descriptor for the result channel: the first
// of Job.ExtraFiles.
const valueFD = 3

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
	res.DurationMS = time.Since(start).Milliseconds()
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
	res := &Result{
		ID:        newID(),
		Status:    StatusSandboxError,
		ExitCode:  -1,
		Files:     []FileChange{},
		ToolCalls: []ToolCall{},
		Warnings:  []string{},
		Isolation: Isolation{Level: "none", Network: "none"},
		Error: Errorf(KindInternal, CodeSandboxFailure, "codecell failed while handling this program (%v); nothing more of it ran", p).WithHints(
			"this is a fault in codecell, not in the program: change the program, or report it with codecell's log"),
		DurationMS: time.Since(start).Milliseconds(),
	}
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
		}
		block(res, Errorf(KindValidation, CodeUnknownLanguage, "%s", msg).WithHints(
			"use one of: "+strings.Join(lang.Names(), ", ")))
		return nil, nil, nil
	}
	if strings.TrimSpace(x.Code) == "" {
		block(res, Errorf(KindValidation, CodeEmptyCode, "the code is empty").WithHints(
			"send the program's source in the code field"))
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
	hosts := len(x.Policy.Network) + len(e.Policy.Network)
	if x.SessionPolicy != nil {
		hosts += len(x.SessionPolicy.Network)
	}
	if hosts > 0 {
		block(res, Errorf(KindValidation, CodePolicyUnsupported, "network allow-lists are not supported yet: no tier can confine a program to %d hosts", hosts).WithHints(
			"leave Policy.Network empty: programs run with no network",
			"fetch what the program needs on the host, and pass it in as a file"))
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

// ResolveTier returns the tier an Exec that names this tier would run on
// ("" and "auto" pick the strongest available), or the refusal it would get.
func (e *Engine) ResolveTier(name string) (Tier, *Envelope) { return e.pickTier(name) }

func (e *Engine) pickTier(name string) (Tier, *Envelope) {
	if name == "" {
		name = e.Tier
	}
	if name == "" || name == "auto" {
		var reasons []string
		for _, n := range autoOrder {
			t, ok := e.lookupTier(n)
			if !ok {
				continue
			}
			if err := t.Probe(); err != nil {
				reasons = append(reasons, n+": "+err.Error())
				continue
			}
			return t, nil
		}
		msg := "no isolating tier can run on this host"
		if len(reasons) > 0 {
			msg += " (" + strings.Join(reasons, "; ") + ")"
		}
		return nil, Errorf(KindValidation, CodeNoIsolation, "%s", msg).WithHints(
			"run `codecell doctor` to see what this host offers",
			"to run without any isolation, which is not safe for untrusted code, choose tier local explicitly (`--tier local`)")
	}
	t, ok := e.lookupTier(name)
	if !ok {
		return nil, Errorf(KindValidation, CodeUnknownTier, "unknown tier %q", name).WithHints(
			"tiers in this build: auto, " + strings.Join(TierNames(), ", "))
	}
	if err := t.Probe(); err != nil {
		return nil, Errorf(KindValidation, CodeTierUnavailable, "tier %q cannot run on this host: %v", name, err).WithHints(
			"run `codecell doctor` to see what this host offers")
	}
	return t, nil
}

// execute prepares the program, runs it on the tier and collects the Result.
// It returns ctx's error when the caller cancelled the run.
func (e *Engine) execute(ctx context.Context, x *Exec, l *lang.Language, tier Tier, env []string, lim Limits, res *Result) error {
	failInfra := func(format string, args ...any) {
		res.Status = StatusSandboxError
		res.Error = Errorf(KindInternal, CodeSandboxFailure, format, args...).WithHints(
			"this is a failure of the sandbox host, not of the program; retrying may help")
		res.Error.Retryable = true
	}
	guardPolicy := &res.Policy.Guard
	static := x.Tier == StaticTier
	if n := l.CheckNesting(x.Code); n != nil {
		block(res, nestingEnvelope(n))
		return nil
	}
	findings, refused := e.checkStatic(ctx, l, x, guardPolicy)
	if refused != nil {
		block(res, refused)
		return nil
	}
	if len(findings) > 0 {
		blockFindings(res, findings)
		return nil
	}
	if static && tier == nil {
		res.Status = StatusSuccess
		return nil
	}

	ws, cleanupWS, err := e.workspace(x, tier)
	if err != nil {
		var env *Envelope
		if errors.As(err, &env) {
			block(res, env)
		} else {
			failInfra("preparing the workspace: %v", err)
		}
		return nil
	}
	defer cleanupWS()
	runner, err := os.MkdirTemp(e.runnerTempDir(), "codecell-run-")
	if err != nil {
		failInfra("creating the runner directory: %v", err)
		return nil
	}
	defer os.RemoveAll(runner)

	interp := e.Interpreters[l.Name]
	if interp != "" && !strings.Contains(interp, "/") {
		if found, err := exec.LookPath(interp); err == nil {
			interp = found
		}
	}
	initPath := e.initPath()
	if iu, ok := tier.(InitUser); ok && iu.NeedsInit() && initPath == "" {
		block(res, Errorf(KindValidation, CodeTierUnavailable, "tier %s re-executes this program for its sandbox's init, and this program did not call codecell.Init", tier.Name()).WithHints(
			"call codecell.Init() first thing in main", "or set Engine.InitPath to an installed codecell binary"))
		return nil
	}
	view := tier.View(ws, runner)
	prog, err := l.Prepare(lang.Source{
		Code:        x.Code,
		Filename:    x.Filename,
		Args:        x.Args,
		Interpreter: interp,
		ValueFD:     valueFD,
		ToolFD:      toolFD,
		ValueLimit:  lim.Value,
		Memory:      lim.Memory,
		Policy:      guardPolicy.RunnerFile(),
		CheckOnly:   static,
		Transpile:   e.transpiler(ctx),
	}, lang.View{Workspace: view.Workspace, Runner: view.Runner})
	refused = nil
	if errors.As(err, &refused) {
		if refused.Retryable {
			res.Status = StatusSandboxError
			res.Error = refused
		} else {
			block(res, refused)
		}
		return nil
	}
	if err != nil {
		block(res, Errorf(KindValidation, CodeInvalidRequest, "%v", err).WithHints("use a plain file name such as main.py"))
		return nil
	}
	if prog.Syntax != nil {
		// The transpiler found what the interpreter would have: report it the
		// way a run that failed to compile is reported.
		res.Status, res.ExitCode = StatusFailure, 1
		res.Stderr = prog.Syntax.Text
		res.Error = syntaxEnvelope(prog.Syntax.Filename, prog.Syntax.Line, prog.Syntax.Column, prog.Syntax.Message)
		if x.Stderr != nil {
			_, _ = io.WriteString(x.Stderr, prog.Syntax.Text)
		}
		return nil
	}
	// Every program can call tools from the shell too: codecell-tool is on
	// its PATH.
	prog.Files["bin/codecell-tool"] = bridge.ShellClient
	for name, data := range prog.Files {
		p := filepath.Join(runner, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			failInfra("%v", err)
			return nil
		}
		mode := os.FileMode(0o644)
		if strings.HasPrefix(name, "bin/") {
			mode = 0o755
		}
		if err := os.WriteFile(p, data, mode); err != nil {
			failInfra("%v", err)
			return nil
		}
	}
	if info, err := os.Stat(prog.Argv[0]); err != nil || info.IsDir() {
		failInfra("the %s interpreter %s is not on this host: install it, or configure the interpreter's path", l.Name, prog.Argv[0])
		return nil
	}

	before, err := workspace.Take(ws)
	if err != nil {
		failInfra("reading the workspace: %v", err)
		return nil
	}

	stdout := capture.New(lim.Stdout, x.Stdout)
	stderr := capture.New(lim.Stderr, x.Stderr)
	valueR, valueW, err := os.Pipe()
	if err != nil {
		failInfra("%v", err)
		return nil
	}
	valueDone := make(chan []byte, 1)
	go func() { valueDone <- readBounded(valueR, int64(lim.Value)+64<<10) }()

	runCtx, cancel := context.WithTimeoutCause(ctx, lim.Timeout, errExecTimeout)
	defer cancel()
	tools, err := e.startTools(runCtx, x, lim, res.ID)
	if err != nil {
		valueW.Close()
		valueR.Close()
		failInfra("opening the tool channel: %v", err)
		return nil
	}
	job := &Job{
		ID:            res.ID,
		Language:      l.Name,
		Argv:          append(prog.Argv, []string{}...),
		Env:           append([]string{"PATH=" + path.Join(view.Runner, "bin") + ":/usr/local/bin:/usr/bin:/bin", "HOME=" + view.Workspace, "LANG=C.UTF-8"}, env...),
		Workspace:     ws,
		KeepWorkspace: x.Workspace != "",
		Runner:        runner,
		View:          view,
		Stdin:         x.Stdin,
		Stdout:        stdout,
		Stderr:        stderr,
		ExtraFiles:    []*os.File{valueW, tools.child},
		Limits:        lim,
		Policy:        x.Policy,
		InitPath:      initPath,
		Log:           e.Logger,
	}
	out, runErr := tier.Run(runCtx, job)
	// Every holder of the channels' program ends is gone once the tier
	// returns; closing ours lets the readers see the end.
	valueW.Close()
	if calls := tools.stop(); calls != nil {
		res.ToolCalls = calls
	}
	if n := tools.refused(); n > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%d more tool calls, refused past the limit, are not listed", n))
	}
	var raw []byte
	select {
	case raw = <-valueDone:
	case <-time.After(5 * time.Second):
		res.Warnings = append(res.Warnings, "the result channel stayed open after the program ended; its value was dropped")
	}
	valueR.Close()

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
		res.Isolation.Runtime = prog.Runtime
	}
	if runErr != nil {
		var env *Envelope
		if errors.As(runErr, &env) && env.Kind != KindInternal {
			// What the caller asked for cannot be done as asked: theirs
			// to change, not to retry.
			block(res, env)
			return nil
		}
		failInfra("%v", runErr)
		return nil
	}
	res.Warnings = append(res.Warnings, out.Warnings...)

	if out.Files != nil {
		res.Files = out.Files
	} else if after, err := workspace.Take(ws); err != nil {
		res.Warnings = append(res.Warnings, "the workspace could not be read after the run: "+err.Error())
	} else {
		res.Warnings = append(res.Warnings, after.Warnings()...)
		changes, err := workspace.Diff(before, after, ws)
		if err != nil {
			res.Warnings = append(res.Warnings, "listing changed files: "+err.Error())
		}
		for _, c := range changes {
			res.Files = append(res.Files, FileChange{Path: c.Path, Change: Change(c.Kind), Size: c.Size, SHA256: c.SHA256, Symlink: c.Symlink})
		}
	}

	if out.Stopped && !errors.Is(context.Cause(runCtx), errExecTimeout) {
		return ctx.Err()
	}
	verdict, rec, misuse := readChannel(raw, l, lim.Value, res)
	if verdict != nil && verdict.Guard != nil {
		// The runner checked the program before running any of it.
		var findings []GuardFinding
		if err := json.Unmarshal(verdict.Guard, &findings); err == nil && (len(findings) > 0 || static) {
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
	if static && res.Status == StatusSuccess {
		failInfra("the %s runner ended without reporting its check", l.Name)
	}
	return nil
}

// CodeResultChannel: the result channel held what the runner did not
// write, so no value is trusted.
const CodeResultChannel = "RESULT_CHANNEL_MISUSED"

// readChannel reads what the result channel held. A runner's first line is
// written before any of the program runs, so the verdict it carries (a
// syntax error, the guardrails' findings, or that the program starts) is
// the runner's; what follows "start" is at most one record, the value,
// which the program could have written itself: it never carries a verdict,
// and anything past one record is reported as misuse. A language without a
// runner (shell) has no value: whatever its program wrote is ignored.
func readChannel(raw []byte, l *lang.Language, limit int, res *Result) (verdict, rec *lang.Record, misuse string) {
	if len(raw) == 0 {
		return nil, nil, ""
	}
	if !l.Returns {
		res.Warnings = append(res.Warnings, "the program wrote to file descriptor 3, codecell's result channel; a "+l.Name+" program has no value, and what it wrote was ignored")
		return nil, nil, ""
	}
	first, rest, _ := bytes.Cut(raw, []byte("\n"))
	var v lang.Record
	if err := json.Unmarshal(first, &v); err != nil {
		// The runner wrote nothing: it never started, or something else
		// wrote first. Neither is a verdict or a value.
		return nil, nil, "the result channel (file descriptor 3) held something the runner did not write; it was ignored"
	}
	switch {
	case v.Guard != nil:
		return &v, nil, ""
	case v.Error != nil:
		// An error found before the program started: a syntax error.
		return &v, &v, ""
	case !v.Start:
		return nil, nil, "the result channel (file descriptor 3) held something the runner did not write; it was ignored"
	}
	if len(bytes.TrimSpace(rest)) == 0 {
		return &v, nil, ""
	}
	dec := json.NewDecoder(bytes.NewReader(rest))
	var one json.RawMessage
	if err := dec.Decode(&one); err != nil {
		return &v, nil, "the result channel (file descriptor 3) held something that is not a result record; the program's value was not trusted"
	}
	if dec.More() || len(bytes.TrimSpace(rest[dec.InputOffset():])) > 0 {
		return &v, nil, "the result channel (file descriptor 3) held more than one record: the program wrote to it, so no value from it is trusted"
	}
	rec = parseRecord(one, limit, res)
	if rec != nil {
		rec.Guard, rec.Start = nil, false // a verdict comes only before the program runs
	}
	return &v, rec, ""
}

var errExecTimeout = errors.New("the exec's timeout passed")

// toolCode reports whether a runner's record carries a tool's envelope: a
// tool's own code, never one of the codes the Engine gives its own
// verdicts, which the program, which writes the record, cannot claim.
func toolCode(te *lang.ToolEnvelope) bool {
	if te == nil || te.Code == "" || strings.HasPrefix(te.Code, "SANDBOX_") {
		return false
	}
	switch te.Code {
	case CodeEmptyCode, CodeUnknownLanguage, CodeCodeTooLarge, CodeInvalidRequest, CodeUnknownTier,
		CodeTierUnavailable, CodeNoIsolation, CodePolicyUnsupported, CodeSyntaxError, CodeRuntimeError,
		CodeNonZeroExit, CodeKilledBySignal, CodeTimeout, CodeMemoryLimit, CodeGuardrailBlocked,
		CodeModuleBlocked, CodePolicyBlocked, CodeResultChannel, CodeTooDeep, CodeTooComplex, CodeWorkspaceTooLarge:
		return false
	}
	return true
}

// memoryFromProgram reports whether the program's own side says it ran out
// of memory (a MemoryError in its record, an interpreter's out-of-memory
// message on stderr) where that is how the limit shows: the program could
// write either itself, so it counts only when the limit is an rlimit, with
// no kernel kill to observe, or, for node, when V8 ended the process at the
// heap limit codecell set (an abort). Under a cgroup, only the kill the
// host observed makes a memory_limit.
func memoryFromProgram(out *Outcome, rec *lang.Record, l *lang.Language, res *Result) bool {
	said := rec != nil && rec.Error != nil && rec.Error.Memory ||
		res.ExitCode != 0 && l.OutOfMemory(tailLines(res.Stderr, 20))
	if !said {
		return false
	}
	if strings.HasPrefix(out.Isolation.Limits.Memory, "rlimit") {
		return true
	}
	heapAbort := out.Signal == int(syscall.SIGABRT) || out.ExitCode == 128+int(syscall.SIGABRT)
	return (l.Name == "javascript" || l.Name == "typescript") && heapAbort
}

// guardExit is the exit status of a runner that refused to run its program
// on its guardrails' findings.
const guardExit = 3

// classify sets the status, the exit code, the value and the error.
func classify(res *Result, out *Outcome, rec *lang.Record, l *lang.Language, lim Limits, timedOut bool) {
	res.ExitCode = out.ExitCode
	if out.Signal != 0 {
		res.ExitCode = 128 + out.Signal
	}
	switch {
	case timedOut:
		res.Status = StatusTimeout
		res.Error = Errorf(KindTimeout, CodeTimeout, "the program ran longer than its %s time limit and was stopped", lim.Timeout).WithHints(
			"make the program do less work or finish sooner, or ask for a longer timeout",
			"look for loops that never end and for calls that wait on input")
		return
	case out.MemoryKilled, memoryFromProgram(out, rec, l, res):
		res.Status = StatusMemoryLimit
		res.Error = Errorf(KindLimit, CodeMemoryLimit, "the program used more than its memory limit of %s and was stopped; files it wrote to the workspace and /tmp count toward that limit", formatBytes(lim.Memory)).WithHints(
			"process the data in smaller pieces, or stream it instead of holding it all",
			"free large objects you no longer need, and write less to the workspace and /tmp (delete what you no longer need)",
			"or ask for a higher memory limit (--memory, limits.memory)")
		return
	}
	if rec != nil && rec.Value != nil && res.ExitCode == 0 {
		res.Value = rec.Value
	}
	if res.ExitCode == 0 {
		res.Status = StatusSuccess
		return
	}
	res.Status = StatusFailure
	switch {
	case rec != nil && rec.Error != nil && rec.Error.Syntax:
		res.Error = syntaxEnvelope(rec.Error.Filename, rec.Error.Line, rec.Error.Column, rec.Error.Message)
	case rec != nil && rec.Error != nil && rec.Error.ModuleBlocked != "":
		where := ""
		if rec.Error.Line > 0 {
			where = fmt.Sprintf(" (%s, line %d)", rec.Error.Filename, rec.Error.Line)
		}
		res.Error = Errorf(KindGuardrail, CodeModuleBlocked, "the policy refuses the import of module %q%s: %s", rec.Error.ModuleBlocked, where, rec.Error.Message).WithHints(
			"do without the module, or call the host's tools for what it would do",
			"catch ImportError to go on without it")
		res.Error.Meta = map[string]any{"module": rec.Error.ModuleBlocked, "rule": rec.Error.Rule, "line": rec.Error.Line}
	case rec != nil && rec.Error != nil && toolCode(rec.Error.ToolError):
		// A tool's failure the program did not catch: the Result's error is
		// the tool's, so that its code, whether a retry can help and its
		// hints reach the caller.
		te := rec.Error.ToolError
		where := ""
		if rec.Error.Line > 0 {
			where = fmt.Sprintf(" (%s, line %d)", rec.Error.Filename, rec.Error.Line)
		}
		kind := ErrorKind(te.Kind)
		if kind != KindUpstream {
			kind = KindTool
		}
		res.Error = Errorf(kind, te.Code, "a tool call failed and the program did not catch it%s: %s", where, te.Message).WithHints(te.Hints...)
		res.Error.Retryable = te.Retryable
		res.Error.Meta = map[string]any{"exception": rec.Error.Type, "line": rec.Error.Line}
	case rec != nil && rec.Error != nil && rec.Error.PolicyBlocked != "":
		where := ""
		if rec.Error.Line > 0 {
			where = fmt.Sprintf(" (%s, line %d)", rec.Error.Filename, rec.Error.Line)
		}
		res.Error = Errorf(KindGuardrail, CodePolicyBlocked, "the policy refused %s while the program ran%s: %s", rec.Error.PolicyBlocked, where, rec.Error.Message).WithHints(
			"do without it, or call the host's tools for what it would do",
			"catch PolicyBlockedError (a PermissionError) to go on without it")
		res.Error.Meta = map[string]any{"event": rec.Error.PolicyBlocked, "rule": rec.Error.Rule, "line": rec.Error.Line}
	case rec != nil && rec.Error != nil:
		where := ""
		if rec.Error.Line > 0 {
			where = fmt.Sprintf(" (%s, line %d)", rec.Error.Filename, rec.Error.Line)
		}
		msg := rec.Error.Type
		if rec.Error.Message != "" {
			msg += ": " + rec.Error.Message
		}
		res.Error = Errorf(KindSandboxRuntime, CodeRuntimeError, "%s%s", msg, where).WithHints(
			"the traceback is in stderr; fix the error and run the program again")
		res.Error.Meta = map[string]any{"exception": rec.Error.Type, "line": rec.Error.Line}
	case out.Signal != 0:
		res.Error = Errorf(KindSandboxRuntime, CodeKilledBySignal, "the program was killed by signal %d (%s)", out.Signal, syscall.Signal(out.Signal)).WithHints(
			"a crash in native code or a limit the program hit; stderr may say which")
	default:
		res.Error = Errorf(KindSandboxRuntime, CodeNonZeroExit, "the program exited with code %d", res.ExitCode).WithHints(
			"stderr says why")
	}
}

func syntaxEnvelope(filename string, line, col int, msg string) *Envelope {
	return Errorf(KindSandboxRuntime, CodeSyntaxError, "%s:%d:%d: syntax error: %s", filename, line, col, msg).WithHints(
		"fix the syntax at that line and run the program again")
}

// parseRecord decodes the runner's record. The program can write to the
// channel itself, so the record is untrusted input like any other output:
// bounded, validated, and only ever data.
func parseRecord(raw []byte, limit int, res *Result) *lang.Record {
	if len(raw) == 0 {
		return nil
	}
	if len(raw) > limit+32<<10 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("the return value was over the %s limit and was dropped; write large results to a file in the workspace instead", formatBytes(int64(limit))))
		return nil
	}
	var rec lang.Record
	if err := json.Unmarshal(raw, &rec); err != nil {
		res.Warnings = append(res.Warnings, "the result channel held something that is not a result record; it was ignored")
		return nil
	}
	if rec.ValueTooLarge > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("the return value was %s of JSON, over the %s limit, and was dropped; write large results to a file in the workspace instead",
			formatBytes(rec.ValueTooLarge), formatBytes(int64(limit))))
	}
	if len(rec.Value) > limit {
		res.Warnings = append(res.Warnings, fmt.Sprintf("the return value was over the %s limit and was dropped", formatBytes(int64(limit))))
		rec.Value = nil
	}
	for _, w := range rec.Warnings {
		res.Warnings = append(res.Warnings, "return value "+w)
	}
	return &rec
}

// readBounded reads r to its end, keeping at most max bytes and discarding
// the rest, so that the writer never blocks and memory stays bounded.
func readBounded(r io.Reader, max int64) []byte {
	data, _ := io.ReadAll(io.LimitReader(r, max))
	_, _ = io.Copy(io.Discard, r)
	return data
}

// workspace returns the run's workspace and how to clean it up: the caller's
// directory, kept, or a fresh temporary one, removed.
func (e *Engine) workspace(x *Exec, tier Tier) (string, func(), error) {
	dir := x.Workspace
	cleanup := func() {}
	if dir == "" {
		base := e.TempDir
		if wc, ok := tier.(WorkspaceCopier); ok && wc.CopiesWorkspace() {
			base = e.runnerTempDir()
		}
		d, err := os.MkdirTemp(base, "codecell-ws-")
		if err != nil {
			return "", nil, err
		}
		dir, cleanup = d, func() { os.RemoveAll(d) }
	} else {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return "", nil, err
		}
		info, err := os.Stat(abs)
		if err != nil || !info.IsDir() {
			return "", nil, Errorf(KindValidation, CodeInvalidRequest, "workspace %q is not a directory", dir).WithHints(
				"create the directory first, or leave the workspace out for a fresh temporary one")
		}
		dir = abs
	}
	if err := writeFiles(dir, x.Files); err != nil {
		cleanup()
		return "", nil, err
	}
	return dir, cleanup, nil
}

// writeFiles places the Exec's files in the workspace, refusing paths that
// would leave it.
func writeFiles(dir string, files []File) error {
	if len(files) == 0 {
		return nil
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	for _, f := range files {
		clean := path.Clean(f.Path)
		if f.Path == "" || path.IsAbs(f.Path) || clean == ".." || strings.HasPrefix(clean, "../") || strings.ContainsRune(f.Path, 0) {
			return Errorf(KindValidation, CodeInvalidRequest, "file path %q is not inside the workspace", f.Path).WithHints(
				"use a relative path such as data/input.csv")
		}
		if d := path.Dir(clean); d != "." {
			if err := root.MkdirAll(d, 0o755); err != nil {
				return err
			}
		}
		mode := os.FileMode(f.Mode & 0o777)
		if mode == 0 {
			mode = 0o644
		}
		w, err := root.OpenFile(clean, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, mode)
		if err != nil {
			return err
		}
		_, err = w.Write(f.Data)
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// runnerTempDir is where runner directories go: a few small files each, made
// and removed once per run. A tmpfs makes that an order of magnitude
// cheaper than a disk filesystem (on ext4 mounted with discard, removal
// waits for the device); /dev/shm is one on every Linux host, and the
// directories are made 0700.
//
// They go in a directory of this process's own (internal/instdir), held
// with a lock for its life: a process killed in the middle of a run leaves
// its runner directory behind, and the next codecell process to run a
// program removes what a dead one left, on a tmpfs that holds memory.
func (e *Engine) runnerTempDir() string {
	if e.TempDir != "" {
		return e.TempDir
	}
	shmOnce.Do(func() {
		parent := instdir.TmpfsBase()
		if parent != "" {
			shmDir = "/dev/shm" // should no directory of its own be had
		} else {
			parent = filepath.Join(os.TempDir(), fmt.Sprintf("codecell-%d", os.Geteuid()))
		}
		// With an error, d may still be usable: some leftovers stayed.
		if d, _, _ := instdir.Claim(parent, "proc-"); d != nil {
			// Kept for the life of the process: its lock goes with it (a
			// collected Dir would close the file that holds the lock).
			procDir, shmDir = d, d.Path
		}
	})
	return shmDir
}

var (
	shmOnce sync.Once
	shmDir  string // "" means os.TempDir()
	procDir *instdir.Dir
)

func (e *Engine) initPath() string {
	if initCalled.Load() {
		// The running binary itself, even if its file was replaced or
		// removed since it started.
		return "/proc/self/exe"
	}
	return e.InitPath
}

func newID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func tailLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func formatBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20:
		return fmt.Sprintf("%.4g MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.4g KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
