//go:build linux

package tiertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"sync/atomic"
	"testing"
	"time"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/barrier"
)

// testTools is a toolbox of Go tools for one test, with a gauge of how many
// calls ran at once.
type testTools struct {
	box      *codecell.Toolbox
	inFlight atomic.Int32
	peak     atomic.Int32
}

func newTestTools(t *testing.T) *testTools {
	tt := &testTools{box: &codecell.Toolbox{}}
	type addIn struct {
		A float64 `json:"a" jsonschema:"the first number"`
		B float64 `json:"b" jsonschema:"the second number"`
	}
	add, err := codecell.Func("add", "Adds two numbers.", func(ctx context.Context, in addIn) (float64, error) {
		return in.A + in.B, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	type slowIn struct {
		MS int `json:"ms"`
	}
	type slowOut struct {
		Peak int32 `json:"peak"`
	}
	slow, err := codecell.Func("slow", "Sleeps, and says how many calls ran at once.", func(ctx context.Context, in slowIn) (slowOut, error) {
		n := tt.inFlight.Add(1)
		defer tt.inFlight.Add(-1)
		for {
			p := tt.peak.Load()
			if n <= p || tt.peak.CompareAndSwap(p, n) {
				break
			}
		}
		select {
		case <-time.After(time.Duration(in.MS) * time.Millisecond):
		case <-ctx.Done():
			return slowOut{}, ctx.Err()
		}
		return slowOut{Peak: tt.peak.Load()}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range []codecell.Tool{add, slow,
		{Name: "fail", Description: "Always fails.", Call: func(context.Context, json.RawMessage) (json.RawMessage, error) {
			return nil, errors.New("the disk is on fire")
		}},
		{Name: "quota", Description: "Fails with an envelope of its own.", Call: func(context.Context, json.RawMessage) (json.RawMessage, error) {
			env := codecell.Errorf(codecell.KindUpstream, "RATE_LIMITED", "slow down")
			env.Retryable = true
			return nil, env
		}},
		{Name: "big", Description: "Returns 2 MiB.", Call: func(context.Context, json.RawMessage) (json.RawMessage, error) {
			return json.Marshal(strings.Repeat("x", 2<<20))
		}},
		{Name: "panics", Description: "Panics.", Call: func(context.Context, json.RawMessage) (json.RawMessage, error) {
			panic("a bug in a tool")
		}},
		{Name: "math.mul", Description: "Multiplies, under a dotted name.", Call: func(_ context.Context, p json.RawMessage) (json.RawMessage, error) {
			var in struct{ A, B float64 }
			if err := json.Unmarshal(p, &in); err != nil {
				return nil, err
			}
			return json.Marshal(in.A * in.B)
		}},
	} {
		if err := tt.box.Add(tool); err != nil {
			t.Fatal(err)
		}
	}
	return tt
}

func (s *suite) runTools(t *testing.T, tt *testTools, x codecell.Exec) *codecell.Result {
	t.Helper()
	return s.runEngine(t, &codecell.Engine{Tools: tt.box}, x)
}

func callNames(res *codecell.Result) []string {
	var out []string
	for _, c := range res.ToolCalls {
		name := c.Name
		if !c.OK {
			name += ":" + c.ErrorCode
		}
		out = append(out, name)
	}
	return out
}

func (s *suite) toolsPython(t *testing.T) {
	tt := newTestTools(t)
	code := `import asyncio, json
total = 0
for i in range(3):
    total = await call_tool("add", {"a": total, "b": i + 1})
slow = await asyncio.gather(*(call_tool("slow", {"ms": 400}) for _ in range(4)))
product = await call_tool("math.mul", {"A": 6, "B": 7})
try:
    await call_tool("fail", {})
except RuntimeError as e:
    failed = json.loads(str(e))
try:
    await call_tool("quota")
except ToolError as e:
    quota = e.envelope
{"total": total, "peak": max(r["peak"] for r in slow), "product": product,
 "failed": [failed["error_kind"], failed["error_code"]], "quota": [quota["error_code"], quota["retryable"]],
 "sync": call_tool_sync("add", {"a": 1, "b": 1})}
`
	res := s.runTools(t, tt, codecell.Exec{Language: "python", Code: code})
	expect(t, res, codecell.StatusSuccess)
	var v struct {
		Total, Product, Sync float64
		Peak                 int
		Failed               []string
		Quota                []any
	}
	if err := json.Unmarshal(res.Value, &v); err != nil {
		t.Fatalf("value %s: %v", res.Value, err)
	}
	if v.Total != 6 || v.Product != 42 || v.Sync != 2 || v.Peak < 3 {
		t.Errorf("value %s: want total 6, product 42, sync 2, and the 4 gathered calls in flight at once (peak >= 3)", res.Value)
	}
	if strings.Join(v.Failed, " ") != "tool TOOL_FAILED" || v.Quota[0] != "RATE_LIMITED" || v.Quota[1] != true {
		t.Errorf("envelopes: failed %v, quota %v", v.Failed, v.Quota)
	}
	want := "add add add slow slow slow slow math.mul fail:TOOL_FAILED quota:RATE_LIMITED add"
	if got := strings.Join(callNames(res), " "); got != want {
		t.Errorf("trace:\n got %s\nwant %s", got, want)
	}
	for _, c := range res.ToolCalls {
		if c.DurationMS < 0 || (c.Name == "slow" && c.DurationMS < 300) {
			t.Errorf("call %+v: a slow call lasted 400 ms", c)
		}
	}
}

// Python calls a tool as an attribute too, awaitable, with keywords or a
// dict; a name that is not a Python name is written with _ for - (or as an
// item), and that spelling is the tool's own under the policy: a tool denied
// is denied however it is spelled.
func (s *suite) toolsPythonAttributes(t *testing.T) {
	tt := newTestTools(t)
	if err := tt.box.Add(codecell.Tool{Name: "get-sum", Description: "Adds, under a name with a dash.", Call: func(_ context.Context, p json.RawMessage) (json.RawMessage, error) {
		var in struct{ A, B float64 }
		if err := json.Unmarshal(p, &in); err != nil {
			return nil, err
		}
		return json.Marshal(in.A + in.B)
	}}); err != nil {
		t.Fatal(err)
	}
	code := `import asyncio
def code(f):
    try:
        f()
        return "ok"
    except TypeError as e:
        return "TypeError"
async def denied(call):
    try:
        await call
        return "ok"
    except ToolError as e:
        return e.envelope["error_code"]
a = await tools.add(a=1, b=2)
b = await tools.math.mul({"A": 2}, B=3)
c = await tools["math.mul"]({"A": 4, "B": 5})
d = await tools.get_sum(a=10, b=1)
e = await tools["get-sum"](a=20, b=2)
both = await asyncio.gather(tools.add(a=1, b=1), tools.math["mul"](A=3, B=3))
[a, b, c, d, e, both, repr(tools.math.mul), code(lambda: tools(1)), code(lambda: tools.add(1, 2)),
 await denied(tools.slow(ms=1)), await denied(tools.get_sum(a=1, b=1))]
`
	eng := &codecell.Engine{Tools: tt.box, Policy: codecell.Policy{Tools: codecell.ToolPolicy{Deny: []string{"slow"}}}}
	res := s.runEngine(t, eng, codecell.Exec{Language: "python", Code: code})
	expect(t, res, codecell.StatusSuccess)
	expectValue(t, res, `[3, 6, 20, 11, 22, [2, 9], "<tool math.mul>", "TypeError", "TypeError", "TOOL_NOT_ALLOWED", "ok"]`)
	// get-sum denied: its spelling get_sum is refused as well.
	eng.Policy.Tools.Deny = []string{"get-sum"}
	res = s.runEngine(t, eng, codecell.Exec{Language: "python", Code: "try:\n    await tools.get_sum(a=1, b=1)\nexcept ToolError as e:\n    r = e.envelope\n[r['error_code'], r['message']]\n"})
	expect(t, res, codecell.StatusSuccess)
	expectValue(t, res, `["TOOL_NOT_ALLOWED", "the tool \"get-sum\" (called as \"get_sum\") is not allowed for this program"]`)
	// JavaScript's attributes take the same spelling.
	eng.Policy.Tools.Deny = nil
	res = s.runEngine(t, eng, codecell.Exec{Language: "javascript", Code: "await tools.get_sum({ a: 2, b: 3 })\n"})
	expect(t, res, codecell.StatusSuccess)
	expectValue(t, res, "5")
	// The trace names the tool called, not the spelling that reached it.
	if len(res.ToolCalls) != 1 || res.ToolCalls[0].Name != "get-sum" {
		t.Errorf("tool_calls %+v, want one call of get-sum", res.ToolCalls)
	}
}

func (s *suite) toolsJavaScript(t *testing.T) {
	tt := newTestTools(t)
	code := `const sums = [];
for (let i = 0; i < 3; i++) sums.push(await tools.add({ a: i, b: 10 }));
const slow = await Promise.all([1, 2, 3, 4].map(() => callTool('slow', { ms: 400 })));
const product = await tools.math.mul({ A: 3, B: 5 });
let envelope, message;
try { await tools.fail({}) } catch (e) { envelope = e.envelope; message = e.message }
({ sums, peak: Math.max(...slow.map((r) => r.peak)), product, code: envelope.error_code, parsed: JSON.parse(message).error_code })
`
	res := s.runTools(t, tt, codecell.Exec{Language: "javascript", Code: code})
	expect(t, res, codecell.StatusSuccess)
	var v struct {
		Sums         []float64
		Peak         int
		Product      float64
		Code, Parsed string
	}
	if err := json.Unmarshal(res.Value, &v); err != nil {
		t.Fatalf("value %s: %v", res.Value, err)
	}
	if len(v.Sums) != 3 || v.Sums[2] != 12 || v.Product != 15 || v.Peak < 3 || v.Code != "TOOL_FAILED" || v.Parsed != "TOOL_FAILED" {
		t.Errorf("value %s", res.Value)
	}
	// TypeScript gets the same bridge.
	res = s.runTools(t, tt, codecell.Exec{Language: "typescript", Code: "const n: number = await tools.add({ a: 1, b: 2 }) as number;\nn * 2\n"})
	expect(t, res, codecell.StatusSuccess)
	expectValue(t, res, "6")
}

func (s *suite) toolsShell(t *testing.T) {
	tt := newTestTools(t)
	code := `set -e
sum=0
for i in 1 2 3; do sum=$(codecell-tool add "{\"a\": $sum, \"b\": $i}"); done
echo "sum=$sum"
codecell-tool math.mul '{"A": 2,
  "B": 21}'
if codecell-tool fail '{}' 2>err.json; then echo "should have failed"; exit 1; fi
cat err.json
codecell-tool 'no such' 2>/dev/null || echo "bad name: $?"
`
	res := s.runTools(t, tt, codecell.Exec{Language: "bash", Code: code})
	expect(t, res, codecell.StatusSuccess)
	lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
	if len(lines) != 4 || lines[0] != "sum=6" || lines[1] != "42" || !strings.Contains(lines[2], `"error_code":"TOOL_FAILED"`) || lines[3] != "bad name: 2" {
		t.Errorf("stdout:\n%s\nstderr:\n%s", res.Stdout, res.Stderr)
	}
	var env codecell.Envelope
	if err := json.Unmarshal([]byte(lines[2]), &env); err != nil || env.Kind != codecell.KindTool {
		t.Errorf("the envelope on stderr is not an envelope: %q (%v)", lines[2], err)
	}
	// sh (dash) too, with calls from three shells served at once: the gate
	// holds each call until all three are in.
	pass := barrier.New(3)
	err := tt.box.Add(codecell.Tool{Name: "gate", Description: "Returns its params once three calls are in at once.", Call: func(ctx context.Context, p json.RawMessage) (json.RawMessage, error) {
		if err := pass(ctx); err != nil {
			return nil, err
		}
		return p, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	res = s.runTools(t, tt, codecell.Exec{Language: "sh", Code: "for i in 1 2 3; do codecell-tool gate \"{\\\"i\\\": $i}\" > out$i & done\nwait\ncat out1 out2 out3\n"})
	expect(t, res, codecell.StatusSuccess)
	if res.Stdout != "{\"i\":1}\n{\"i\":2}\n{\"i\":3}\n" {
		t.Errorf("three shells at once: stdout %q stderr %q", res.Stdout, res.Stderr)
	}
}

func (s *suite) toolsErrors(t *testing.T) {
	tt := newTestTools(t)
	code := `import json
def outcome(name, params):
    try:
        call_tool_sync(name, params)
        return "ok"
    except ToolError as e:
        return [e.envelope["error_kind"], e.envelope["error_code"], e.envelope.get("hints", []), e.envelope["retryable"]]
{"unknown": outcome("ad", {"a": 1, "b": 2}),
 "bad_params": outcome("add", {"a": "one"}),
 "big": outcome("big", {}),
 "panics": outcome("panics", {}),
 "timeout": outcome("slow", {"ms": 5000}),
 "after": call_tool_sync("add", {"a": 2, "b": 2})}
`
	res := s.runTools(t, tt, codecell.Exec{Language: "python", Code: code, Limits: codecell.Limits{ToolTimeout: time.Second}})
	expect(t, res, codecell.StatusSuccess)
	var v map[string]json.RawMessage
	if err := json.Unmarshal(res.Value, &v); err != nil {
		t.Fatal(err)
	}
	check := func(key, kind, code string, retryable bool, hint string) {
		var got []any
		if err := json.Unmarshal(v[key], &got); err != nil || len(got) != 4 {
			t.Errorf("%s: %s", key, v[key])
			return
		}
		hints, _ := json.Marshal(got[2])
		if got[0] != kind || got[1] != code || got[3] != retryable || !strings.Contains(string(hints), hint) {
			t.Errorf("%s: got %s, want %s %s retryable %v with a hint containing %q", key, v[key], kind, code, retryable, hint)
		}
	}
	check("unknown", "tool", "TOOL_NOT_FOUND", false, `did you mean \"add\"?`)
	check("bad_params", "validation", "TOOL_BAD_PARAMS", false, "codecell tools")
	check("big", "limit", "TOOL_RESULT_TOO_LARGE", false, "narrower query")
	check("panics", "tool", "TOOL_FAILED", false, "")
	check("timeout", "timeout", "TOOL_TIMEOUT", true, "")
	if string(v["after"]) != "4" {
		t.Errorf("a call after the failures: %s", v["after"])
	}
}

// A tool's failure the program does not catch ends it with the tool's
// envelope: its code, whether a retry can help, its hints; the traceback
// or stack on stderr points at the program's own lines.
func (s *suite) toolsUncaught(t *testing.T) {
	tt := newTestTools(t)
	for _, c := range []struct {
		x     codecell.Exec
		trace []string
	}{
		{codecell.Exec{Language: "python", Filename: "app.py", Code: "x = 1\ndef f():\n    call_tool_sync('quota', {})\nf()\n"},
			[]string{`"app.py", line 4`, `"app.py", line 3, in f`}},
		{codecell.Exec{Language: "javascript", Filename: "app.js", Code: "const x = 1;\nasync function f() {\n  await callTool('quota', {});\n}\nawait f();\n"},
			[]string{"app.js:3:", "app.js:5:"}},
		{codecell.Exec{Language: "typescript", Filename: "app.ts", Code: "const x: number = 1;\nasync function f(): Promise<void> {\n  await callTool('quota', {});\n}\nawait f();\n"},
			[]string{"app.ts:3:", "app.ts:5:"}},
	} {
		res := s.runTools(t, tt, c.x)
		expect(t, res, codecell.StatusFailure)
		if res.Error == nil || res.Error.Code != "RATE_LIMITED" || !res.Error.Retryable || !strings.Contains(res.Error.Message, "slow down") || !strings.Contains(res.Error.Message, "line 3") {
			t.Errorf("%s: error %+v", c.x.Language, res.Error)
		}
		for _, want := range c.trace {
			if !strings.Contains(res.Stderr, want) {
				t.Errorf("%s: stderr does not point at %s:\n%s", c.x.Language, want, res.Stderr)
			}
		}
	}
	// A ToolError the program catches has the stack of its call: the
	// program's frames, not node's.
	res := s.runTools(t, tt, codecell.Exec{Language: "javascript", Filename: "app.js",
		Code: "let stack;\ntry {\n  await callTool('quota', {});\n} catch (e) {\n  stack = e.stack;\n}\nstack\n"})
	expect(t, res, codecell.StatusSuccess)
	var stack string
	if err := json.Unmarshal(res.Value, &stack); err != nil || !strings.HasPrefix(stack, "ToolError: ") || !strings.Contains(stack, "app.js:3:") || strings.Contains(stack, "node:") {
		t.Errorf("a caught ToolError's stack: %s", res.Value)
	}
}

func (s *suite) toolsLimit(t *testing.T) {
	tt := newTestTools(t)
	code := `results = []
for i in range(8):
    try:
        results.append(call_tool_sync("add", {"a": i, "b": 0}))
    except ToolError as e:
        results.append(e.envelope["error_code"])
results
`
	res := s.runTools(t, tt, codecell.Exec{Language: "python", Code: code, Limits: codecell.Limits{ToolCalls: 5}})
	expect(t, res, codecell.StatusSuccess)
	expectValue(t, res, `[0, 1, 2, 3, 4, "TOOL_CALL_LIMIT", "TOOL_CALL_LIMIT", "TOOL_CALL_LIMIT"]`)
	if len(res.ToolCalls) != 8 || res.ToolCalls[5].ErrorKind != codecell.KindLimit {
		t.Errorf("trace %v", callNames(res))
	}
}

func (s *suite) toolsPolicy(t *testing.T) {
	tt := newTestTools(t)
	code := `def outcome(name):
    try:
        call_tool_sync(name, {"a": 1, "b": 1})
        return "ok"
    except ToolError as e:
        return e.envelope["error_code"]
[outcome("add"), outcome("fail"), outcome("math.mul"), outcome("slow")]
`
	eng := &codecell.Engine{Tools: tt.box, Policy: codecell.Policy{Tools: codecell.ToolPolicy{Deny: []string{"slow"}}}}
	res := s.runEngine(t, eng, codecell.Exec{Language: "python", Code: code,
		Policy: codecell.Policy{Tools: codecell.ToolPolicy{Allow: []string{"add", "math.*", "slow"}}}})
	expect(t, res, codecell.StatusSuccess)
	// fail: not in the Exec's allow list; slow: allowed by the Exec, denied
	// by the Engine.
	expectValue(t, res, `["ok", "TOOL_NOT_ALLOWED", "ok", "TOOL_NOT_ALLOWED"]`)
}

// A program that fails part-way still reports the calls it made, and one
// that dies with a call in flight ends at once, the call cancelled.
func (s *suite) toolsPartWay(t *testing.T) {
	tt := newTestTools(t)
	res := s.runTools(t, tt, codecell.Exec{Language: "python", Code: "await call_tool('add', {'a': 1, 'b': 2})\nawait call_tool('add', {'a': 3, 'b': 4})\nraise ValueError('after two calls')\n"})
	expect(t, res, codecell.StatusFailure)
	if got := strings.Join(callNames(res), " "); got != "add add" {
		t.Errorf("trace after a failure: %s", got)
	}
	start := time.Now()
	res = s.runTools(t, tt, codecell.Exec{Language: "python", Code: "import os, threading\nthreading.Thread(target=lambda: call_tool_sync('slow', {'ms': 20000})).start()\nimport time\ntime.sleep(0.5)\nos._exit(0)\n"})
	expect(t, res, codecell.StatusSuccess)
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("the run waited %s for a call its program abandoned", d)
	}
	if len(res.ToolCalls) != 1 || res.ToolCalls[0].OK {
		t.Errorf("the abandoned call: %+v", res.ToolCalls)
	}
}

// Exec.Tools adds tools for one Exec only.
func (s *suite) toolsPerExec(t *testing.T) {
	hello := codecell.Tool{Name: "hello", Call: func(context.Context, json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`"hi"`), nil
	}}
	res := s.run(t, codecell.Exec{Language: "javascript", Code: "await tools.hello()\n", Tools: []codecell.Tool{hello}})
	expect(t, res, codecell.StatusSuccess)
	expectValue(t, res, `"hi"`)
	res = s.run(t, codecell.Exec{Language: "javascript", Code: "await tools.hello()\n"})
	expect(t, res, codecell.StatusFailure)
	if res.Error == nil || res.Error.Code != "TOOL_NOT_FOUND" {
		t.Errorf("without the Exec's tool: %+v", res.Error)
	}
}

// toolsUpstream: programs call a published MCP server (from npm) and a Go
// tool at once, and build a value from both; an upstream server that
// crashes mid-call is started again on the next call, and codecell goes on.
// fakeSource is a tool source whose tools are listed when asked, as an
// upstream MCP server's are: "everything" answers as the MCP reference
// server does, "t" fails in the ways an upstream server fails.
type fakeSource struct {
	name  string
	tools map[string]func(json.RawMessage) (json.RawMessage, error)
}

func (f *fakeSource) Name() string { return f.name }

func (f *fakeSource) Tools(context.Context) ([]codecell.Tool, error) {
	var out []codecell.Tool
	for name, fn := range f.tools {
		out = append(out, codecell.Tool{Name: name, Description: "a tool of " + f.name, Call: func(_ context.Context, p json.RawMessage) (json.RawMessage, error) {
			return fn(p)
		}})
	}
	return out, nil
}

func (s *suite) toolsUpstream(t *testing.T) {
	tt := newTestTools(t)
	everything := &fakeSource{name: "everything", tools: map[string]func(json.RawMessage) (json.RawMessage, error){
		"get-sum": func(p json.RawMessage) (json.RawMessage, error) {
			var in struct{ A, B float64 }
			if err := json.Unmarshal(p, &in); err != nil {
				return nil, err
			}
			return json.Marshal(fmt.Sprintf("The sum of %v and %v is %v.", in.A, in.B, in.A+in.B))
		},
		"echo": func(p json.RawMessage) (json.RawMessage, error) {
			var in struct{ Message string }
			if err := json.Unmarshal(p, &in); err != nil {
				return nil, err
			}
			return json.Marshal("Echo: " + in.Message)
		},
	}}
	lost := codecell.Errorf(codecell.KindUpstream, codecell.CodeUpstreamUnavailable, "MCP server \"t\" exited during t.crash (exit status 3)")
	lost.Retryable = true
	server := &fakeSource{name: "t", tools: map[string]func(json.RawMessage) (json.RawMessage, error){
		"echo":  func(p json.RawMessage) (json.RawMessage, error) { return p, nil },
		"crash": func(json.RawMessage) (json.RawMessage, error) { return nil, lost },
		"fail": func(json.RawMessage) (json.RawMessage, error) {
			return nil, codecell.Errorf(codecell.KindTool, codecell.CodeToolFailed, "fail always fails")
		},
	}}
	for _, src := range []codecell.ToolSource{everything, server} {
		if err := tt.box.AddSource(src); err != nil {
			t.Fatal(err)
		}
	}
	py := `import asyncio
text, local = await asyncio.gather(
    call_tool("everything.get-sum", {"a": 20, "b": 22}),
    call_tool("add", {"a": 20, "b": 22}),
)
{"upstream": text, "local": local, "agree": str(int(local)) in text}
`
	res := s.runTools(t, tt, codecell.Exec{Language: "python", Code: py})
	expect(t, res, codecell.StatusSuccess)
	expectValue(t, res, `{"upstream": "The sum of 20 and 22 is 42.", "local": 42, "agree": true}`)
	if got := strings.Join(callNames(res), " "); got != "everything.get-sum add" {
		t.Errorf("trace: %s", got)
	}

	js := `const [echo, sum] = await Promise.all([
  tools.everything.echo({ message: "codecell" }),
  tools.add({ a: 1, b: 2 }),
]);
const structured = await callTool("t.echo", { text: "structured" });
({ echo, sum, structured })
`
	res = s.runTools(t, tt, codecell.Exec{Language: "javascript", Code: js})
	expect(t, res, codecell.StatusSuccess)
	expectValue(t, res, `{"echo": "Echo: codecell", "sum": 3, "structured": {"text": "structured"}}`)

	crash := `import json
def outcome(name, params):
    try:
        return call_tool_sync(name, params)
    except ToolError as e:
        return [e.envelope["error_kind"], e.envelope["error_code"], e.envelope["retryable"]]
[outcome("t.crash", {}), outcome("t.echo", {"text": "back"}), outcome("t.fail", {}), outcome("everything.nope", {})]
`
	res = s.runTools(t, tt, codecell.Exec{Language: "python", Code: crash})
	expect(t, res, codecell.StatusSuccess)
	expectValue(t, res, `[["upstream", "UPSTREAM_UNAVAILABLE", true], {"text": "back"}, ["tool", "TOOL_FAILED", false], ["tool", "TOOL_NOT_FOUND", false]]`)
}

// toolsPerCallPolicy: rules on a call's arguments allow or refuse it
// (TOOL_DENIED, which the program may catch), each layer narrowing; rates
// bound the calls per execution and per session (TOOL_RATE_LIMITED); the
// trace says which rule decided each call.
func (s *suite) toolsPerCallPolicy(t *testing.T) {
	tt := newTestTools(t)
	eng := &codecell.Engine{Tools: tt.box, Policy: codecell.Policy{Tools: codecell.ToolPolicy{
		Rules: []codecell.ToolRule{
			{Tool: "add", Args: map[string]string{"a": "1*"}, Action: "allow"},
			{Tool: "math.*", Args: map[string]string{"A": "0"}, Action: "deny"},
		},
		Rates: []codecell.ToolRate{{Tool: "math.mul", PerExec: 2, PerSession: 3}},
	}}}
	code := `async def code(call):
    try:
        await call
        return "ok"
    except ToolError as e:
        return e.envelope["error_code"]
[await code(tools.add(a=1, b=2)), await code(tools.add(a=15, b=2)), await code(tools.add(a=2, b=2)),
 await code(tools.add(b=2)), await code(tools.math.mul(A=0, B=1)),
 await code(tools.math.mul(A=2, B=1)), await code(tools.math.mul(A=2, B=1)), await code(tools.math.mul(A=2, B=1))]
`
	usage := &codecell.ToolUsage{}
	res := s.runEngine(t, eng, codecell.Exec{Language: "python", Code: code, ToolUsage: usage})
	expect(t, res, codecell.StatusSuccess)
	expectValue(t, res, `["ok", "ok", "TOOL_DENIED", "TOOL_DENIED", "TOOL_DENIED", "ok", "ok", "TOOL_RATE_LIMITED"]`)
	var rules []string
	for _, c := range res.ToolCalls {
		rules = append(rules, c.ErrorCode+"|"+c.Rule)
	}
	want := []string{
		`|config: allow add with a="1*"`, `|config: allow add with a="1*"`,
		`TOOL_DENIED|config: no rule for add matches these arguments`, `TOOL_DENIED|config: no rule for add matches these arguments`,
		`TOOL_DENIED|config: deny math.* with A="0"`,
		`|`, `|`, `TOOL_RATE_LIMITED|rate: math.mul at most 2 per execution`,
	}
	if strings.Join(rules, "\n") != strings.Join(want, "\n") {
		t.Errorf("trace rules:\n%s\nwant:\n%s", strings.Join(rules, "\n"), strings.Join(want, "\n"))
	}
	// The session's third call is its last: the next execution of the
	// same session gets one.
	res = s.runEngine(t, eng, codecell.Exec{Language: "javascript", ToolUsage: usage, Code: `const out = [];
for (let i = 0; i < 2; i++) {
  try { await tools.math.mul({ A: 1, B: 1 }); out.push("ok") } catch (e) { out.push(e.envelope.error_code) }
}
out
`})
	expect(t, res, codecell.StatusSuccess)
	expectValue(t, res, `["ok","TOOL_RATE_LIMITED"]`)
	if usage.Calls("math.mul") != 3 {
		t.Errorf("the session counted %d calls of math.mul, want 3", usage.Calls("math.mul"))
	}
	// The execution's own layer narrows: it may refuse what the
	// configuration allows, never allow what it refuses.
	res = s.runEngine(t, eng, codecell.Exec{Language: "python", Policy: codecell.Policy{Tools: codecell.ToolPolicy{
		Rules: []codecell.ToolRule{{Tool: "add", Args: map[string]string{"b": "9"}, Action: "allow"}}}},
		Code: "async def code(call):\n    try:\n        return await call\n    except ToolError as e:\n        return e.envelope['error_code']\n" +
			"[await code(tools.add(a=1, b=9)), await code(tools.add(a=1, b=8)), await code(tools.add(a=2, b=9))]\n"})
	expect(t, res, codecell.StatusSuccess)
	expectValue(t, res, `[10, "TOOL_DENIED", "TOOL_DENIED"]`)
	// A rule that cannot be read is a refusal that says what to write.
	res = s.runEngine(t, eng, codecell.Exec{Language: "python", Code: "1", Policy: codecell.Policy{Tools: codecell.ToolPolicy{
		Rules: []codecell.ToolRule{{Tool: "add", Action: "maybe"}}}}})
	if res.Error == nil || res.Error.Code != codecell.CodeInvalidRequest || !strings.Contains(res.Error.Message, `"deny" or "ask"`) {
		t.Errorf("a rule with action maybe: %+v", res.Error)
	}
}

// toolsHandles: a result over the limit for one result is kept on the host
// when the program asks for a handle, and read in pages, whole, as JSON or
// into a file, from Python and JavaScript; reading a handle is not a tool
// call; the handles of a run are bounded together.
func (s *suite) toolsHandles(t *testing.T) {
	tt := newTestTools(t)
	var log strings.Builder
	for i := range 60000 {
		level := "INFO"
		if i%1000 == 7 {
			level = "ERROR"
		}
		fmt.Fprintf(&log, "%s line %d: é\n", level, i)
	}
	logText := log.String() // about 1.4 MiB, over the 1 MiB default
	if err := tt.box.Add(codecell.Tool{Name: "logs", Call: func(context.Context, json.RawMessage) (json.RawMessage, error) {
		return json.Marshal(logText)
	}}); err != nil {
		t.Fatal(err)
	}
	if err := tt.box.Add(codecell.Tool{Name: "rows", Call: func(context.Context, json.RawMessage) (json.RawMessage, error) {
		rows := make([]map[string]any, 30000)
		for i := range rows {
			rows[i] = map[string]any{"id": i, "name": fmt.Sprintf("row %d", i)}
		}
		return json.Marshal(rows)
	}}); err != nil {
		t.Fatal(err)
	}
	py := `try:
    await call_tool("logs")
    plain = "ok"
except ToolError as e:
    plain = [e.envelope["error_code"], any("handle" in h for h in e.envelope["hints"])]
h = await call_tool("logs", {}, {"as": "handle"})
errors, pages = 0, 0
async for page in h.pages(length=65536):
    pages += 1
text = await h.text()
errors = sum(1 for line in text.splitlines() if line.startswith("ERROR"))
saved = await h.save("logs.txt")
with open("logs.txt", encoding="utf-8") as f:
    same = f.read() == text
rows = await call_tool("rows", {}, {"as": "handle"})
data = await rows.json()
try:
    await h._channel.read("h99", 0, 10)
    missing = "read"
except ToolError as e:
    missing = e.envelope["error_code"]
[plain, h.type, h.size == len(text.encode()), pages > 10, errors, saved == h.size, same, rows.type, len(data), data[-1]["name"], missing]
`
	res := s.runTools(t, tt, codecell.Exec{Language: "python", Code: py})
	expect(t, res, codecell.StatusSuccess)
	expectValue(t, res, `[["TOOL_RESULT_TOO_LARGE", true], "text", true, true, 60, true, true, "json", 30000, "row 29999", "TOOL_NO_SUCH_HANDLE"]`)
	if len(res.ToolCalls) != 3 {
		t.Errorf("%d tool calls in the trace, want 3: reading a handle is not a call", len(res.ToolCalls))
	}
	js := `const h = await callTool('logs', {}, { as: 'handle' });
let n = 0;
for await (const page of h.pages(100000)) n++;
const text = await h.text();
const errors = text.split('\n').filter((l) => l.startsWith('ERROR')).length;
await h.save('logs.txt');
const same = require('fs').readFileSync('logs.txt', 'utf8') === text;
const first = await h.read(0, 10);
const rows = await tools.rows({}, { as: 'handle' });
let bad;
try { await callTool('logs', {}, { as: 'value' }) } catch (e) { bad = e.name }
({ type: h.type, n: n > 5, errors, same, first: first.data, next: first.next, rows: (await rows.json()).length, bad })
`
	res = s.runTools(t, tt, codecell.Exec{Language: "javascript", Code: js})
	expect(t, res, codecell.StatusSuccess)
	expectValue(t, res, `{"type":"text","n":true,"errors":60,"same":true,"first":"INFO line ","next":10,"rows":30000,"bad":"TypeError"}`)
	// The handles of one run share one bound.
	res = s.runTools(t, tt, codecell.Exec{Language: "python", Limits: codecell.Limits{ToolHandles: 2 << 20}, Code: `a = await call_tool("logs", {}, {"as": "handle"})
try:
    await call_tool("logs", {}, {"as": "handle"})
    second = "kept"
except ToolError as e:
    second = e.envelope["error_code"]
[a.size > 0, second]
`})
	expect(t, res, codecell.StatusSuccess)
	expectValue(t, res, `[true, "TOOL_RESULT_TOO_LARGE"]`)
}

// toolsApprovals: a rule that says ask holds the call until the Exec's
// Approver answers; approved, it goes on; refused, or with no one to ask,
// it fails with TOOL_DENIED, which the program handles; the trace records
// who decided.
func (s *suite) toolsApprovals(t *testing.T) {
	tt := newTestTools(t)
	eng := &codecell.Engine{Tools: tt.box, Policy: codecell.Policy{Tools: codecell.ToolPolicy{
		Rules: []codecell.ToolRule{{Tool: "add", Action: "ask"}},
	}}}
	var asked []codecell.ApprovalRequest
	approver := func(_ context.Context, r codecell.ApprovalRequest) (codecell.Approval, error) {
		asked = append(asked, r)
		var args struct{ A float64 }
		if json.Unmarshal(r.Arguments, &args) == nil && args.A == 1 {
			return codecell.Approval{Approved: true, By: "tester"}, nil
		}
		return codecell.Approval{By: "tester", Reason: "not that one"}, nil
	}
	code := `out = [await tools.add(a=1, b=2)]
try:
    await tools.add(a=5, b=2)
except ToolError as e:
    out.append([e.envelope["error_code"], e.envelope["message"]])
out
`
	res := s.runEngine(t, eng, codecell.Exec{Language: "python", Code: code, Approver: approver})
	expect(t, res, codecell.StatusSuccess)
	expectValue(t, res, `[3, ["TOOL_DENIED", "the call to add was not approved by tester: not that one"]]`)
	if len(asked) != 2 || asked[0].Tool != "add" || asked[0].Rule != "config: ask add" || asked[0].ExecID != res.ID || asked[0].Deadline.IsZero() {
		t.Errorf("asked %+v", asked)
	}
	if len(res.ToolCalls) != 2 || res.ToolCalls[0].Approval == nil || !res.ToolCalls[0].Approval.Approved || res.ToolCalls[0].Approval.By != "tester" ||
		res.ToolCalls[1].Approval == nil || res.ToolCalls[1].Approval.Approved || res.ToolCalls[1].Approval.Reason != "not that one" {
		t.Errorf("trace %+v", res.ToolCalls)
	}
	// No answer: refused before the run's time is up, with time left for
	// the program to go on.
	// The run's own time starts before its sandbox does (a container's
	// start takes part of it): the approver is measured against what was
	// left when the call came.
	type wait struct{ left, given time.Duration }
	waited := make(chan wait, 1)
	var runStart time.Time
	silent := func(ctx context.Context, r codecell.ApprovalRequest) (codecell.Approval, error) {
		start := time.Now()
		left := runStart.Add(3 * time.Second).Sub(start)
		<-ctx.Done()
		waited <- wait{left, time.Since(start)}
		return codecell.Approval{}, ctx.Err()
	}
	runStart = time.Now()
	res = s.runEngine(t, eng, codecell.Exec{Language: "python", Limits: codecell.Limits{Timeout: 3 * time.Second}, Approver: silent,
		Code: "try:\n    await tools.add(a=1, b=2)\nexcept ToolError as e:\n    r = e.envelope['error_code']\nr\n"})
	expect(t, res, codecell.StatusSuccess)
	expectValue(t, res, `"TOOL_DENIED"`)
	if len(res.ToolCalls) != 1 || res.ToolCalls[0].Approval == nil || res.ToolCalls[0].Approval.Reason != "no answer in time" {
		t.Errorf("trace %+v", res.ToolCalls)
	}
	if w := <-waited; w.given < w.left/2 {
		t.Errorf("the approver was given %v of the %v the run had left", w.given, w.left)
	}
	// No one to ask: refused, and said so.
	res = s.runEngine(t, eng, codecell.Exec{Language: "javascript", Code: "let r;\ntry { await tools.add({a: 1, b: 1}) } catch (e) { r = e.envelope.error_code + ': ' + e.envelope.message }\nr\n"})
	expect(t, res, codecell.StatusSuccess)
	expectValue(t, res, `"TOOL_DENIED: the call to add needs a person's approval (config: ask add), and this run has no one to ask"`)
}
