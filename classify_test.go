package codecell

import (
	"strings"
	"syscall"
	"testing"

	"github.com/codecell-dev/codecell/lang"
)

// classify on its own, on any host: an outcome and a record in, the
// Result's status, exit code, value and error out.
func TestClassify(t *testing.T) {
	py := lang.Lookup("python")
	js := lang.Lookup("javascript")
	cgroup := Isolation{Limits: LimitsApplied{Memory: "cgroup v2"}}
	rlimit := Isolation{Limits: LimitsApplied{Memory: "rlimit (address space)"}}
	for _, tc := range []struct {
		name     string
		out      Outcome
		rec      *lang.Record
		l        *lang.Language
		stderr   string
		timedOut bool
		status   Status
		exit     int
		code     string
		value    string
	}{
		{name: "success with a value", out: Outcome{}, rec: &lang.Record{Value: []byte(`42`)}, l: py, status: StatusSuccess, value: "42"},
		{name: "a value and a failing exit: no value", out: Outcome{ExitCode: 1}, rec: &lang.Record{Value: []byte(`42`)}, l: py, status: StatusFailure, exit: 1, code: CodeNonZeroExit},
		{name: "timeout", out: Outcome{Stopped: true, Signal: 9}, l: py, timedOut: true, status: StatusTimeout, exit: 137, code: CodeTimeout},
		{name: "killed by the cgroup", out: Outcome{MemoryKilled: true, Signal: 9, Isolation: cgroup}, l: py, status: StatusMemoryLimit, exit: 137, code: CodeMemoryLimit},
		{name: "MemoryError under an rlimit", out: Outcome{ExitCode: 1, Isolation: rlimit}, rec: &lang.Record{Error: &lang.RecordError{Type: "MemoryError", Memory: true}}, l: py, status: StatusMemoryLimit, exit: 1, code: CodeMemoryLimit},
		{name: "MemoryError the program raised, under a cgroup", out: Outcome{ExitCode: 1, Isolation: cgroup}, rec: &lang.Record{Error: &lang.RecordError{Type: "MemoryError", Memory: true, Line: 3, Filename: "m.py"}}, l: py, status: StatusFailure, exit: 1, code: CodeRuntimeError},
		{name: "node's heap limit: an abort", out: Outcome{Signal: int(syscall.SIGABRT), Isolation: cgroup}, l: js, stderr: "FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory", status: StatusMemoryLimit, exit: 134, code: CodeMemoryLimit},
		{name: "node's heap limit: an abort, the sandbox near its memory", out: Outcome{Signal: int(syscall.SIGABRT), Isolation: cgroup, MemoryPeak: DefaultLimits.Memory * 3 / 4}, l: js, stderr: "FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory", status: StatusMemoryLimit, exit: 134, code: CodeMemoryLimit},
		{name: "V8's words and an abort the program chose, with little memory held", out: Outcome{Signal: int(syscall.SIGABRT), Isolation: cgroup, MemoryPeak: 40 << 20}, l: js, stderr: "FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory", status: StatusFailure, exit: 134, code: CodeKilledBySignal},
		{name: "node's words and exit status 134, without the abort", out: Outcome{ExitCode: 134, Isolation: cgroup}, rec: &lang.Record{Error: &lang.RecordError{Type: "Error", Memory: true}}, l: js, stderr: "FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory", status: StatusFailure, exit: 134, code: CodeRuntimeError},
		{name: "a memory record and an abort, without V8's words", out: Outcome{Signal: int(syscall.SIGABRT), Isolation: cgroup}, rec: &lang.Record{Error: &lang.RecordError{Type: "Error", Memory: true}}, l: js, status: StatusFailure, exit: 134, code: CodeRuntimeError},
		{name: "syntax error", out: Outcome{ExitCode: 1}, rec: &lang.Record{Error: &lang.RecordError{Type: "SyntaxError", Syntax: true, Filename: "a.py", Line: 2, Column: 5, Message: "invalid syntax"}}, l: py, status: StatusFailure, exit: 1, code: CodeSyntaxError},
		{name: "a module the policy refused", out: Outcome{ExitCode: 1}, rec: &lang.Record{Error: &lang.RecordError{Type: "ModuleBlockedError", ModuleBlocked: "socket", Line: 1, Filename: "a.py"}}, l: py, status: StatusFailure, exit: 1, code: CodeModuleBlocked},
		{name: "an event the policy refused", out: Outcome{ExitCode: 1}, rec: &lang.Record{Error: &lang.RecordError{Type: "PolicyBlockedError", PolicyBlocked: "os.system"}}, l: py, status: StatusFailure, exit: 1, code: CodePolicyBlocked},
		{name: "an uncaught tool error keeps the tool's envelope", out: Outcome{ExitCode: 1}, rec: &lang.Record{Error: &lang.RecordError{Type: "ToolError", Line: 4, Filename: "a.py", ToolError: &lang.ToolEnvelope{Kind: "upstream", Code: "RATE_LIMITED", Message: "slow down", Retryable: true}}}, l: py, status: StatusFailure, exit: 1, code: "RATE_LIMITED"},
		{name: "a tool error claiming an engine code is a runtime error", out: Outcome{ExitCode: 1}, rec: &lang.Record{Error: &lang.RecordError{Type: "ToolError", ToolError: &lang.ToolEnvelope{Code: CodeMemoryLimit}}}, l: py, status: StatusFailure, exit: 1, code: CodeRuntimeError},
		{name: "killed by a signal", out: Outcome{Signal: int(syscall.SIGSEGV)}, l: py, status: StatusFailure, exit: 139, code: CodeKilledBySignal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := &Result{Stderr: tc.stderr}
			classify(res, &tc.out, tc.rec, tc.l, DefaultLimits, tc.timedOut)
			if res.Status != tc.status || res.ExitCode != tc.exit || string(res.Value) != tc.value {
				t.Fatalf("status %s exit %d value %s, want %s %d %s", res.Status, res.ExitCode, res.Value, tc.status, tc.exit, tc.value)
			}
			switch {
			case tc.code == "" && res.Error != nil:
				t.Errorf("error %+v", res.Error)
			case tc.code != "" && (res.Error == nil || res.Error.Code != tc.code || len(res.Error.Hints) == 0 && tc.code != "RATE_LIMITED"):
				t.Errorf("error %+v, want %s", res.Error, tc.code)
			}
		})
	}
	// Where the runner said the error was raised, the message says too.
	res := &Result{}
	classify(res, &Outcome{ExitCode: 1}, &lang.Record{Error: &lang.RecordError{Type: "ValueError", Message: "bad", Filename: "job.py", Line: 7}}, py, DefaultLimits, false)
	if !strings.HasSuffix(res.Error.Message, "ValueError: bad (job.py, line 7)") {
		t.Errorf("message %q", res.Error.Message)
	}
}

// The result channel: the runner's first line is the verdict, then at most
// one record, the program's value.
func TestReadChannel(t *testing.T) {
	py := lang.Lookup("python")
	sh := lang.Lookup("bash")
	for _, tc := range []struct {
		name   string
		raw    string
		l      *lang.Language
		value  string
		misuse bool
		guard  bool
	}{
		{name: "nothing", raw: "", l: py},
		{name: "started, no value", raw: "{\"start\":true}\n", l: py},
		{name: "started, a value", raw: "{\"start\":true}\n{\"value\":[1,2],\"warnings\":[]}", l: py, value: "[1,2]"},
		{name: "a verdict of the guardrails", raw: "{\"guard\":[]}\n", l: py, guard: true},
		{name: "two records after the start", raw: "{\"start\":true}\n{\"value\":1}\n{\"value\":2}", l: py, misuse: true},
		{name: "a forged first line", raw: "{\"value\":\"forged\"}\n", l: py, misuse: true},
		{name: "not JSON first", raw: "garbage\n", l: py, misuse: true},
		{name: "a verdict written by the program after the start is not one", raw: "{\"start\":true}\n{\"guard\":[{\"rule\":\"x\"}],\"value\":3}", l: py, value: "3"},
		{name: "shell has no value", raw: "{\"start\":true}\n{\"value\":1}", l: sh},
		// The runners never write a key twice: a record that does is the
		// program's, and would be read one way here and another after.
		{name: "a value with a key twice", raw: "{\"start\":true}\n{\"value\":{\"ok\":true,\"ok\":false}}", l: py, misuse: true},
		{name: "a record with two values", raw: "{\"start\":true}\n{\"value\":1,\"value\":2}", l: py, misuse: true},
		{name: "a tool's code twice", raw: "{\"start\":true}\n{\"error\":{\"type\":\"ToolError\",\"tool_error\":{\"error_code\":\"X\",\"error_code\":\"Y\"}}}", l: py, misuse: true},
		{name: "a first line with a key twice", raw: "{\"start\":true,\"start\":false}\n{\"value\":1}", l: py, misuse: true},
		{name: "the same key in two objects", raw: "{\"start\":true}\n{\"value\":{\"a\":{\"a\":1},\"b\":[{\"a\":1}]}}", l: py, value: `{"a":{"a":1},"b":[{"a":1}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := &Result{}
			verdict, rec, misuse := readChannel([]byte(tc.raw), tc.l, 1<<20, res)
			if (misuse != "") != tc.misuse {
				t.Fatalf("misuse %q", misuse)
			}
			if tc.guard != (verdict != nil && verdict.Guard != nil) {
				t.Errorf("verdict %+v", verdict)
			}
			got := ""
			if rec != nil && rec.Value != nil {
				got = string(rec.Value)
				if rec.Guard != nil || rec.Start {
					t.Errorf("the value's record carries a verdict: %+v", rec)
				}
			}
			if got != tc.value {
				t.Errorf("value %q, want %q", got, tc.value)
			}
		})
	}
}
