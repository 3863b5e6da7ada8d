package codecell

// The collect stage's reading of a run: what the result channel held, and
// what the run's outcome and record make of the Result's status, exit code,
// value and error.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/codecell-dev/codecell/internal/jsonkeys"
	"github.com/codecell-dev/codecell/lang"
)

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
	// The runners never write a key twice (their records are made from
	// maps): a record that does, the program wrote, to be read one way by
	// the host and another by whatever reads the Result after it.
	if err := json.Unmarshal(first, &v); err != nil || jsonkeys.Check(first) != nil {
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
	if d, ok := jsonkeys.IsDuplicate(jsonkeys.Check(one)); ok {
		return &v, nil, fmt.Sprintf("the result channel (file descriptor 3) held a record that gives the key %q twice in %s, which the runner never writes: the program wrote to it, so no value from it is trusted", d.Key, d.Where())
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
		CodeModuleBlocked, CodePolicyBlocked, CodeResultChannel, CodeTooDeep, CodeTooComplex, CodeWorkspaceTooLarge, CodeMountUnavailable:
		return false
	}
	return true
}

// memoryFromProgram reports whether the program's own side says it ran out
// of memory (a MemoryError in its record, an interpreter's out-of-memory
// message on stderr) where that is how the limit shows: the program could
// write either itself, so it counts only when the limit is an rlimit, with
// no kernel kill to observe, or, for node, when V8 ended the process at the
// heap limit codecell set (an abort) while holding memory near that limit.
// Under a cgroup, only the kill the host observed makes a memory_limit.
func memoryFromProgram(out *Outcome, rec *lang.Record, l *lang.Language, res *Result, memory int64) bool {
	stderrSays := res.ExitCode != 0 && l.OutOfMemory(tailLines(res.Stderr, 20))
	if strings.HasPrefix(out.Isolation.Limits.Memory, "rlimit") {
		return rec != nil && rec.Error != nil && rec.Error.Memory || stderrSays
	}
	// V8 ends the process with an abort the host sees as the signal: an
	// exit status of 134, or a record on the result channel, is what the
	// program could have chosen (process.exit(134)), and proves nothing.
	heapAbort := out.Signal == int(syscall.SIGABRT)
	// An abort with V8's words on stderr is what the program could have
	// chosen too (process.abort()); where the host knows the sandbox's
	// peak, the heap must have come near the limit codecell gave V8 (three
	// quarters of the memory limit): half of it, at least.
	if out.MemoryPeak > 0 && memory > 0 && out.MemoryPeak < memory*3/8 {
		heapAbort = false
	}
	return (l.Name == "javascript" || l.Name == "typescript") && heapAbort && stderrSays
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
			"make the program do less work or finish sooner, or ask for a longer timeout (--timeout, limits.timeout, MCP's timeout_seconds)",
			"look for loops that never end and for calls that wait on input")
		return
	case out.MemoryKilled, memoryFromProgram(out, rec, l, res, lim.Memory):
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
		where := at(rec.Error)
		res.Error = Errorf(KindGuardrail, CodeModuleBlocked, "the policy refuses the import of module %q%s: %s", rec.Error.ModuleBlocked, where, rec.Error.Message).WithHints(
			"do without the module, or call the host's tools for what it would do",
			"catch ImportError to go on without it")
		res.Error.Meta = map[string]any{"module": rec.Error.ModuleBlocked, "rule": rec.Error.Rule, "line": rec.Error.Line}
	case rec != nil && rec.Error != nil && toolCode(rec.Error.ToolError):
		// A tool's failure the program did not catch: the Result's error is
		// the tool's, so that its code, whether a retry can help and its
		// hints reach the caller.
		te := rec.Error.ToolError
		where := at(rec.Error)
		kind := ErrorKind(te.Kind)
		if kind != KindUpstream {
			kind = KindTool
		}
		res.Error = Errorf(kind, te.Code, "a tool call failed and the program did not catch it%s: %s", where, te.Message).WithHints(te.Hints...)
		res.Error.Retryable = te.Retryable
		res.Error.Meta = map[string]any{"exception": rec.Error.Type, "line": rec.Error.Line}
	case rec != nil && rec.Error != nil && rec.Error.PolicyBlocked != "":
		where := at(rec.Error)
		res.Error = Errorf(KindGuardrail, CodePolicyBlocked, "the policy refused %s while the program ran%s: %s", rec.Error.PolicyBlocked, where, rec.Error.Message).WithHints(
			"do without it, or call the host's tools for what it would do",
			"catch PolicyBlockedError (a PermissionError) to go on without it")
		res.Error.Meta = map[string]any{"event": rec.Error.PolicyBlocked, "rule": rec.Error.Rule, "line": rec.Error.Line}
	case rec != nil && rec.Error != nil:
		where := at(rec.Error)
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

// at says where in the program an error was raised, as " (file, line N)",
// or "" when the runner did not say.
func at(e *lang.RecordError) string {
	if e.Line <= 0 {
		return ""
	}
	return fmt.Sprintf(" (%s, line %d)", e.Filename, e.Line)
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
	for i, w := range rec.Warnings {
		if i == maxRecordWarnings {
			res.Warnings = append(res.Warnings, fmt.Sprintf("return value: %d more warnings were dropped", len(rec.Warnings)-i))
			break
		}
		if len(w) > maxRecordWarning {
			w = strings.ToValidUTF8(w[:maxRecordWarning], "") + "…"
		}
		res.Warnings = append(res.Warnings, "return value "+w)
	}
	return &rec
}

// The runners say at most 11 things about a value (10 and "more parts of
// the value were not JSON"), each a line; past these bounds, what the
// channel holds was written by the program, which gets no more room among
// the Result's warnings than the runner takes.
const (
	maxRecordWarnings = 11
	maxRecordWarning  = 1000
)
