//go:build linux

// Package tiertest is the test suite that every tier passes, ours or one
// written outside this module, as testing/fstest is for file systems: the
// statuses, the code-mode rules of each language, return values, output
// caps, files, the environment, tool calls, and the limits the tier claims
// to enforce. A tier's tests call Run with the tier, configured as its
// user would configure it, and what it claims:
//
//	func TestMyTier(t *testing.T) {
//		tiertest.Run(t, &mytier.Tier{}, tiertest.Capabilities{Isolating: true})
//	}
package tiertest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/proc"
)

// Capabilities are what a tier claims beyond running programs: the suite
// holds it to each.
type Capabilities struct {
	// Isolating: the program sees none of the host's files and processes.
	Isolating bool
	// Processes: the tier enforces the processes limit.
	Processes bool
	// CPU: the tier enforces the CPU limit.
	CPU bool
	// Network: the tier lets a program reach the hosts a network policy
	// names, and nothing else (codecell.NetworkTier); one without refuses
	// such a policy.
	Network bool
}

// Run runs the whole suite against a tier, configured as its user would,
// holding it to what caps claims. The test binary must call codecell.Init
// first thing in TestMain when the tier re-executes it (the native tier
// does), and the host needs the interpreters the suite's programs use:
// python3, node, bash and sh.
func Run(t *testing.T, tier codecell.Tier, caps Capabilities) {
	s := &suite{tier: tier, caps: caps}
	// A secret in codecell's own environment, which no program may see.
	os.Setenv(secretVar, "hunter2")
	t.Cleanup(func() { os.Unsetenv(secretVar) })
	tests := []struct {
		name string
		fn   func(*testing.T)
	}{
		{"Isolation", s.isolation},
		{"PythonSuccess", s.pythonSuccess},
		{"PythonValues", s.pythonValues},
		{"PythonModuleSemantics", s.pythonModuleSemantics},
		{"PythonAwait", s.pythonAwait},
		{"PythonFailure", s.pythonFailure},
		{"PythonSyntaxError", s.pythonSyntaxError},
		{"PythonExit", s.pythonExit},
		{"JavaScript", s.javascript},
		{"JavaScriptFailure", s.javascriptFailure},
		{"JavaScriptSyntaxError", s.javascriptSyntaxError},
		{"TypeScript", s.typescript},
		{"JavaScriptAsNodeRunsIt", s.javascriptAsNodeRunsIt},
		{"Shells", s.shells},
		{"NonJSONValues", s.nonJSONValues},
		{"ValueTooLarge", s.valueTooLarge},
		{"ArgsAndStdin", s.argsAndStdin},
		{"Environment", s.environment},
		{"Blocked", s.blocked},
		{"MissingInterpreter", s.missingInterpreter},
		{"Timeout", s.timeout},
		{"TimeoutKillsDetachedChildren", s.timeoutKillsDetached},
		{"ExitKillsDetachedChildren", s.exitKillsDetached},
		{"MemoryLimitPython", s.memoryPython},
		{"MemoryLimitJavaScript", s.memoryJavaScript},
		{"Truncation", s.truncation},
		{"Files", s.files},
		{"Cancel", s.cancel},
		{"ProcessLimit", s.processLimit},
		{"CPULimit", s.cpuLimit},
		{"ToolsPython", s.toolsPython},
		{"ToolsPythonAttributes", s.toolsPythonAttributes},
		{"ToolsJavaScript", s.toolsJavaScript},
		{"ToolsPerCallPolicy", s.toolsPerCallPolicy},
		{"ToolsHandles", s.toolsHandles},
		{"ToolsApprovals", s.toolsApprovals},
		{"ToolsShell", s.toolsShell},
		{"ToolsErrors", s.toolsErrors},
		{"ToolsUncaught", s.toolsUncaught},
		{"ToolsLimit", s.toolsLimit},
		{"ToolsPolicy", s.toolsPolicy},
		{"ToolsPartWay", s.toolsPartWay},
		{"ToolsPerExec", s.toolsPerExec},
		{"ToolsUpstream", s.toolsUpstream},
		{"ToolsHung", s.toolsHung},
		{"ToolsTraceTruthful", s.toolsTraceTruthful},
		{"ToolsHugeNames", s.toolsHugeNames},
		{"NothingCarriesOver", s.nothingCarriesOver},
		{"ConcurrentExecsApart", s.concurrentApart},
		{"PythonEndsAsPython", s.pythonEndsAsPython},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t)
		})
	}
}

type suite struct {
	tier codecell.Tier
	caps Capabilities
}

// engine is eng with the tier under test among its tiers.
func (s *suite) engine(eng *codecell.Engine) *codecell.Engine {
	e := *eng
	e.Tiers = append([]codecell.Tier{s.tier}, eng.Tiers...)
	return &e
}

func (s *suite) run(t *testing.T, x codecell.Exec) *codecell.Result {
	t.Helper()
	return s.runEngine(t, &codecell.Engine{}, x)
}

func (s *suite) runEngine(t *testing.T, eng *codecell.Engine, x codecell.Exec) *codecell.Result {
	t.Helper()
	x.Tier = s.tier.Name()
	res, err := s.engine(eng).Run(context.Background(), &x)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Tier != s.tier.Name() && res.Status != codecell.StatusBlocked {
		t.Errorf("tier = %q, want %q", res.Tier, s.tier.Name())
	}
	return res
}

// expect checks the status, and shows the whole Result when it is wrong.
func expect(t *testing.T, res *codecell.Result, want codecell.Status) {
	t.Helper()
	if res.Status != want {
		b, _ := json.MarshalIndent(res, "", "  ")
		t.Fatalf("status = %s, want %s; result:\n%s", res.Status, want, b)
	}
}

func expectValue(t *testing.T, res *codecell.Result, want string) {
	t.Helper()
	if !jsonEqual(res.Value, want) {
		t.Errorf("value = %s, want %s (stderr: %s)", res.Value, want, res.Stderr)
	}
}

func jsonEqual(got json.RawMessage, want string) bool {
	if want == "" {
		return len(got) == 0
	}
	var a, b any
	if json.Unmarshal(got, &a) != nil || json.Unmarshal([]byte(want), &b) != nil {
		return false
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// A tier that claims isolation hides the host's files and processes, and
// its Result says what isolated the run; one that does not says "none".
func (s *suite) isolation(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "host-only")
	if err := os.WriteFile(marker, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	code := fmt.Sprintf("import os\n[os.path.exists(%q), os.path.exists('/proc/%d')]", marker, os.Getpid())
	res := s.run(t, codecell.Exec{Language: "python", Code: code})
	expect(t, res, codecell.StatusSuccess)
	if !s.caps.Isolating {
		if res.Isolation.Level != "none" {
			t.Errorf("a tier that does not isolate says its isolation is %q", res.Isolation.Level)
		}
		return
	}
	expectValue(t, res, "[false, false]")
	if res.Isolation.Level == "none" || res.Isolation.Level == "" {
		t.Errorf("the Result names no isolation: %+v", res.Isolation)
	}
}

func (s *suite) pythonSuccess(t *testing.T) {
	res := s.run(t, codecell.Exec{Language: "python", Code: "print('hello')\n1 + 2\n"})
	expect(t, res, codecell.StatusSuccess)
	if res.Stdout != "hello\n" || res.ExitCode != 0 || res.Error != nil {
		t.Errorf("stdout %q, exit %d, error %v", res.Stdout, res.ExitCode, res.Error)
	}
	expectValue(t, res, "3")
	if res.Language != "python" || res.DurationMS < 0 {
		t.Errorf("language %q duration %d", res.Language, res.DurationMS)
	}
}

func (s *suite) pythonValues(t *testing.T) {
	cases := []struct{ name, code, value string }{
		{"final expression", "x = 2\nx * 21\n", "42"},
		{"top-level return", "for i in range(10):\n    if i == 3:\n        return {'i': i}\nprint('unreached')\n", `{"i": 3}`},
		{"return without value", "return\n", ""},
		{"None is no value", "None\n", ""},
		{"statement last", "x = 5\n", ""},
		{"print last", "print('x')\n", ""},
		{"nested containers", "[{'a': (1, 2)}, None, True, 'ü']\n", `[{"a": [1, 2]}, null, true, "ü"]`},
		{"big int", "2**70\n", "1180591620717411303424"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := s.run(t, codecell.Exec{Language: "python", Code: c.code})
			expect(t, res, codecell.StatusSuccess)
			expectValue(t, res, c.value)
		})
	}
}

func (s *suite) pythonModuleSemantics(t *testing.T) {
	code := `from __future__ import annotations
import json
from math import *
counter = 0
def bump() -> int:
    global counter
    counter += 1
    return counter
class Point:
    def __init__(self, x: int):
        self.x = x
    def twice(self) -> Point:
        return Point(self.x * 2)
bump(); bump()
total: int = 0
for i in range(3):
    total += i
if (n := len([1, 2])) > 1:
    pass
import pickle
def f(): return 7
pickle.loads(pickle.dumps(f))()
assert __name__ == "__main__"
if __name__ == "__main__":
    main_ran = True
{"counter": counter, "pi": round(pi, 3), "total": total, "n": n, "twice": Point(2).twice().x, "main": main_ran}
`
	res := s.run(t, codecell.Exec{Language: "python", Code: code})
	expect(t, res, codecell.StatusSuccess)
	expectValue(t, res, `{"counter": 2, "pi": 3.142, "total": 3, "n": 2, "twice": 4, "main": true}`)
	// The program's own module imports from the workspace; a file named
	// like a standard module does not replace it.
	res = s.run(t, codecell.Exec{Language: "python", Code: "import helper, random\n(helper.twice(21), hasattr(random, 'shuffle'))\n",
		Files: []codecell.File{{Path: "helper.py", Data: []byte("def twice(n):\n    return 2 * n\n")}, {Path: "random.py", Data: []byte("raise SystemExit('shadowed')\n")}}})
	expect(t, res, codecell.StatusSuccess)
	expectValue(t, res, "[42, true]")
}

func (s *suite) pythonAwait(t *testing.T) {
	code := `import asyncio
async def double(v):
    await asyncio.sleep(0.01)
    return v * 2
async def chain(v):
    return await double(await double(v))
results = await asyncio.gather(chain(1), chain(2))
sum(results)
`
	res := s.run(t, codecell.Exec{Language: "python", Code: code})
	expect(t, res, codecell.StatusSuccess)
	expectValue(t, res, "12")

	// A program without top-level await may run its own event loop.
	res = s.run(t, codecell.Exec{Language: "python", Code: "import asyncio\nasync def m():\n    return 5\nasyncio.run(m())\n"})
	expect(t, res, codecell.StatusSuccess)
	expectValue(t, res, "5")
}

func (s *suite) pythonFailure(t *testing.T) {
	code := "print('before')\n\ndef divide(a, b):\n    return a / b\n\ndivide(1, 0)\n"
	res := s.run(t, codecell.Exec{Language: "python", Code: code, Filename: "calc.py"})
	expect(t, res, codecell.StatusFailure)
	if res.Stdout != "before\n" {
		t.Errorf("stdout = %q: output before the exception must survive", res.Stdout)
	}
	if res.ExitCode != 1 || len(res.Value) != 0 {
		t.Errorf("exit %d value %s", res.ExitCode, res.Value)
	}
	e := res.Error
	if e == nil || e.Code != codecell.CodeRuntimeError || e.Kind != codecell.KindSandboxRuntime {
		t.Fatalf("error = %+v", e)
	}
	if !strings.Contains(e.Message, "ZeroDivisionError") || !strings.Contains(e.Message, "line 4") {
		t.Errorf("message %q should name the exception and line 4", e.Message)
	}
	for _, want := range []string{`File "calc.py", line 6, in <module>`, `File "calc.py", line 4, in divide`, "return a / b"} {
		if !strings.Contains(res.Stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, res.Stderr)
		}
	}
	if strings.Contains(res.Stderr, "runner.py") {
		t.Errorf("the traceback shows the runner's frames:\n%s", res.Stderr)
	}
}

func (s *suite) pythonSyntaxError(t *testing.T) {
	res := s.run(t, codecell.Exec{Language: "python", Code: "x = 1\ny = (\n"})
	expect(t, res, codecell.StatusFailure)
	if res.Error == nil || res.Error.Code != codecell.CodeSyntaxError || !strings.Contains(res.Error.Message, ":2:") {
		t.Errorf("error = %+v", res.Error)
	}
	res = s.run(t, codecell.Exec{Language: "python", Code: "def f():\n    pass\nyield 1\n"})
	expect(t, res, codecell.StatusFailure)
	if res.Error == nil || res.Error.Code != codecell.CodeSyntaxError || !strings.Contains(res.Error.Message, ":3:") {
		t.Errorf("yield at top level: error = %+v", res.Error)
	}
}

func (s *suite) pythonExit(t *testing.T) {
	res := s.run(t, codecell.Exec{Language: "python", Code: "import sys\nprint('x')\nsys.exit(3)\n"})
	expect(t, res, codecell.StatusFailure)
	if res.ExitCode != 3 || res.Error == nil || res.Error.Code != codecell.CodeNonZeroExit {
		t.Errorf("exit %d error %+v", res.ExitCode, res.Error)
	}
	res = s.run(t, codecell.Exec{Language: "python", Code: "import sys\nsys.exit(0)\n"})
	expect(t, res, codecell.StatusSuccess)
}

func (s *suite) javascript(t *testing.T) {
	cases := []struct{ name, code, stdout, value string }{
		{"final expression", "const a = 20;\nconsole.log('hi');\na + 22\n", "hi\n", "42"},
		{"object literal", "({ a: 1, b: [1, 2] })\n", "", `{"a": 1, "b": [1, 2]}`},
		{"multi-line call", "function f(o) { return o.x }\nf({\n  x: 5,\n})\n", "", "5"},
		{"top-level return", "for (let i = 0; i < 10; i++) {\n  if (i === 4) return i * 10\n}\n", "", "40"},
		{"nested await", "const d = async (v) => { await new Promise(r => setTimeout(r, 5)); return v * 2 };\nawait d(await d(1))\n", "", "4"},
		{"promise all", "const xs = await Promise.all([1, 2, 3].map(async (v) => v * v));\nxs\n", "", "[1, 4, 9]"},
		{"imports", "import fs from 'fs';\nimport { join } from 'node:path';\nimport * as os from 'os';\n[typeof fs.readFileSync, join('a', 'b'), typeof os.cpus]\n", "", `["function", "a/b", "function"]`},
		{"require", "const path = require('path');\npath.basename('/x/y.txt')\n", "", `"y.txt"`},
		{"if last: no value", "let x = 1\nif (x) {\n  x = 2\n}\n", "", ""},
		{"declaration last: no value", "function f() {}\n", "", ""},
		{"undefined is no value", "console.log('a')\n", "a\n", ""},
		{"null", "null\n", "", "null"},
		{"template literal last", "const n = 3;\n`n is\n${n}`\n", "", `"n is\n3"`},
		{"returned promise is awaited", "Promise.resolve(7)\n", "", "7"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := s.run(t, codecell.Exec{Language: "javascript", Code: c.code})
			expect(t, res, codecell.StatusSuccess)
			if res.Stdout != c.stdout {
				t.Errorf("stdout = %q, want %q", res.Stdout, c.stdout)
			}
			expectValue(t, res, c.value)
		})
	}
}

func (s *suite) javascriptFailure(t *testing.T) {
	code := "console.log('before');\n\nfunction boom(x) {\n  throw new TypeError('bad ' + x);\n}\nawait Promise.resolve(1);\nboom(1);\n"
	res := s.run(t, codecell.Exec{Language: "javascript", Code: code, Filename: "app.js"})
	expect(t, res, codecell.StatusFailure)
	if res.Stdout != "before\n" || res.ExitCode != 1 {
		t.Errorf("stdout %q exit %d", res.Stdout, res.ExitCode)
	}
	if res.Error == nil || !strings.Contains(res.Error.Message, "TypeError: bad 1") || !strings.Contains(res.Error.Message, "line 4") {
		t.Errorf("error = %+v", res.Error)
	}
	if !strings.Contains(res.Stderr, "app.js:4:") || !strings.Contains(res.Stderr, "app.js:7:") {
		t.Errorf("stack should point at lines 4 and 7 of app.js:\n%s", res.Stderr)
	}
	// An error in the final expression itself (whose value the program
	// returns) is on its own line, not the line before.
	for _, c := range []struct{ lang, file, code string }{
		{"javascript", "last.js", "const a = 1;\nfoo.bar();\n"},
		{"javascript", "last2.js", "let total = 0\nfor (const n of [1, 2]) total += n\nundefinedName + total\n"},
		{"typescript", "last.ts", "const a: number = 1;\n// a comment\nfoo.bar(a);\n"},
	} {
		res = s.run(t, codecell.Exec{Language: c.lang, Code: c.code, Filename: c.file})
		expect(t, res, codecell.StatusFailure)
		want := strings.Count(strings.TrimSpace(c.code), "\n") + 1
		if !strings.Contains(res.Stderr, fmt.Sprintf("%s:%d:", c.file, want)) || res.Error == nil || !strings.Contains(res.Error.Message, fmt.Sprintf("line %d", want)) {
			t.Errorf("%s: the error should be on line %d; error %+v stderr:\n%s", c.file, want, res.Error, res.Stderr)
		}
	}
	// A thrown non-Error is reported too.
	res = s.run(t, codecell.Exec{Language: "javascript", Code: "throw 'plain string'\n"})
	expect(t, res, codecell.StatusFailure)
	if res.Error == nil || !strings.Contains(res.Error.Message, "plain string") {
		t.Errorf("error = %+v", res.Error)
	}
}

func (s *suite) javascriptSyntaxError(t *testing.T) {
	res := s.run(t, codecell.Exec{Language: "javascript", Code: "const a = 1;\nconst b = (;\n"})
	expect(t, res, codecell.StatusFailure)
	if res.Error == nil || res.Error.Code != codecell.CodeSyntaxError || !strings.Contains(res.Error.Message, "main.js:2:") {
		t.Errorf("error = %+v", res.Error)
	}
	if !strings.Contains(res.Stderr, "const b = (;") {
		t.Errorf("stderr should quote the line:\n%s", res.Stderr)
	}
	res = s.run(t, codecell.Exec{Language: "typescript", Code: "let x: number = 1\nfoo(\n"})
	expect(t, res, codecell.StatusFailure)
	if res.Error == nil || res.Error.Code != codecell.CodeSyntaxError || !strings.Contains(res.Error.Message, "main.ts:2:") {
		t.Errorf("unclosed call: error = %+v", res.Error)
	}
}

func (s *suite) typescript(t *testing.T) {
	code := `import { join } from "path";
import type { Stats } from "fs";
interface Point { x: number; y: number }
enum Color { Red = "red", Green = "green" }
type Pair<T> = [T, T];

function norm(p: Point): number {
  return Math.sqrt(p.x * p.x + p.y * p.y);
}
const pair: Pair<number> = [1, 2];
let unused: Stats | undefined;
const v = await Promise.resolve(norm({ x: 3, y: 4 }));
({ v, color: Color.Green, pair, path: join("a", "b") })
`
	res := s.run(t, codecell.Exec{Language: "typescript", Code: code})
	expect(t, res, codecell.StatusSuccess)
	expectValue(t, res, `{"v": 5, "color": "green", "pair": [1, 2], "path": "a/b"}`)

	res = s.run(t, codecell.Exec{Language: "ts", Code: "const f = (n: number): number => {\n  if (n > 1) {\n    throw new Error('too big: ' + n)\n  }\n  return n\n}\nf(5)\n"})
	expect(t, res, codecell.StatusFailure)
	if !strings.Contains(res.Stderr, "main.ts:3:") || res.Error == nil || !strings.Contains(res.Error.Message, "line 3") {
		t.Errorf("the error should be on line 3 of the TypeScript source; error %+v stderr:\n%s", res.Error, res.Stderr)
	}
}

// Ordinary programs that node runs as files run here too, and their
// errors point at the program's own lines.
func (s *suite) javascriptAsNodeRunsIt(t *testing.T) {
	// A shebang line, as a file made executable has.
	res := s.run(t, codecell.Exec{Language: "javascript", Code: "#!/usr/bin/env node\nconsole.log('hi')\n6 * 7\n"})
	expect(t, res, codecell.StatusSuccess)
	expectValue(t, res, "42")
	// Decorators, which node does not parse yet: esbuild writes them out.
	code := "function tag(value: any, ctx: any) { return value }\n@tag\nclass A { x = 1 }\nclass B {\n  @((v: any, c: any) => { throw new Error('in a decorator') })\n  m() {}\n}\n"
	res = s.run(t, codecell.Exec{Language: "typescript", Code: code, Filename: "deco.ts"})
	expect(t, res, codecell.StatusFailure)
	if res.Error == nil || !strings.Contains(res.Error.Message, "in a decorator") || !strings.Contains(res.Stderr, "deco.ts:5:") || strings.Contains(res.Error.Message, "SyntaxError") {
		t.Errorf("a decorator's error should be on line 5 of deco.ts; error %+v stderr:\n%s", res.Error, res.Stderr)
	}
	// TypeScript namespaces, which TypeScript allows only at the top level:
	// their exports stay theirs, the program's own are dropped, and an
	// error inside one is on the user's line.
	code = "export namespace Geo {\n  export const R = 6371;\n  export namespace Units { export const km = 1 }\n  export function scale(x: number): number {\n    if (x < 0) throw new Error('negative');\n    return x * R * Units.km;\n  }\n}\nmodule Legacy { export const v: string = 'ok' }\nexport const two = Geo.scale(2);\nconsole.log(Legacy.v);\ntwo\n"
	res = s.run(t, codecell.Exec{Language: "typescript", Code: code, Filename: "geo.ts"})
	expect(t, res, codecell.StatusSuccess)
	expectValue(t, res, "12742")
	res = s.run(t, codecell.Exec{Language: "typescript", Code: strings.Replace(code, "Geo.scale(2)", "Geo.scale(-1)", 1), Filename: "geo.ts"})
	expect(t, res, codecell.StatusFailure)
	if res.Error == nil || !strings.Contains(res.Error.Message, "negative") || !strings.Contains(res.Stderr, "geo.ts:5:") {
		t.Errorf("an error in a namespace should be on line 5 of geo.ts; error %+v stderr:\n%s", res.Error, res.Stderr)
	}
	// How node ends: the program's 'exit' listeners run and may set the
	// status, and a 'beforeExit' listener that gives the loop more work
	// has it done before the end.
	res = s.run(t, codecell.Exec{Language: "javascript", Code: "let n = 0\nprocess.on('beforeExit', () => { if (n++ < 2) setTimeout(() => console.log('more', n), 1) })\nprocess.on('exit', (c) => { console.log('exit', c); process.exitCode = 4 })\nprocess.exitCode = 3\n"})
	expect(t, res, codecell.StatusFailure)
	if res.ExitCode != 4 || res.Stdout != "more 1\nmore 2\nexit 3\n" {
		t.Errorf("node's end: exit code %d, stdout %q; want 4 and the two rounds of more work, then exit 3", res.ExitCode, res.Stdout)
	}
	res = s.run(t, codecell.Exec{Language: "javascript", Code: "process.on('exit', () => console.log('bye'))\nsetTimeout(() => console.log('later'), 5)\n1\n"})
	expect(t, res, codecell.StatusSuccess)
	if res.ExitCode != 0 || res.Stdout != "later\nbye\n" {
		t.Errorf("node's end: exit code %d, stdout %q; want 0 and later, bye", res.ExitCode, res.Stdout)
	}
	expectValue(t, res, "1")
	// A tool's error thrown where the program called the tool.
	res = s.run(t, codecell.Exec{Language: "javascript", Filename: "calls.js", Code: "async function f() {\n  return await callTool('no-such-tool', {})\n}\nawait f()\n"})
	expect(t, res, codecell.StatusFailure)
	if res.Error == nil || res.Error.Code != "TOOL_NOT_FOUND" || !strings.Contains(res.Error.Message, "line 2") ||
		!strings.Contains(res.Stderr, "calls.js:2:") || !strings.Contains(res.Stderr, "calls.js:4:") {
		t.Errorf("a tool's error should point at lines 2 and 4 of calls.js; error %+v stderr:\n%s", res.Error, res.Stderr)
	}
}

func (s *suite) shells(t *testing.T) {
	res := s.run(t, codecell.Exec{Language: "bash", Code: "arr=(a b c)\necho \"${#arr[@]} ${arr[1]}\"\necho err >&2\n"})
	expect(t, res, codecell.StatusSuccess)
	if res.Stdout != "3 b\n" || res.Stderr != "err\n" || len(res.Value) != 0 {
		t.Errorf("bash: stdout %q stderr %q value %s", res.Stdout, res.Stderr, res.Value)
	}
	res = s.run(t, codecell.Exec{Language: "sh", Code: "set -e\necho one\nfalse\necho two\n"})
	expect(t, res, codecell.StatusFailure)
	if res.Stdout != "one\n" || res.ExitCode != 1 || res.Error.Code != codecell.CodeNonZeroExit {
		t.Errorf("sh: stdout %q exit %d error %+v", res.Stdout, res.ExitCode, res.Error)
	}
	res = s.run(t, codecell.Exec{Language: "bash", Code: "echo start\nnosuchcommand-xyz\nexit 7\n"})
	expect(t, res, codecell.StatusFailure)
	if res.ExitCode != 7 || !strings.Contains(res.Stderr, "line 2") {
		t.Errorf("bash: exit %d stderr %q", res.ExitCode, res.Stderr)
	}
	res = s.run(t, codecell.Exec{Language: "bash", Code: "kill -SEGV $$\n"})
	expect(t, res, codecell.StatusFailure)
	if res.ExitCode != 128+11 || res.Error == nil || res.Error.Code != codecell.CodeKilledBySignal {
		t.Errorf("killed by SIGSEGV: exit %d error %+v", res.ExitCode, res.Error)
	}
}

func (s *suite) nonJSONValues(t *testing.T) {
	res := s.run(t, codecell.Exec{Language: "python", Code: "import datetime\nclass Thing:\n    def __repr__(self): return 'Thing()'\n{'when': datetime.date(2024, 1, 2), 'nan': float('nan'), 'tags': {'b', 'a'}, 'thing': Thing(), 'raw': b'x'}\n"})
	expect(t, res, codecell.StatusSuccess)
	expectValue(t, res, `{"when": "datetime.date(2024, 1, 2)", "nan": "nan", "tags": ["a", "b"], "thing": "Thing()", "raw": "b'x'"}`)
	joined := strings.Join(res.Warnings, "\n")
	for _, want := range []string{"$[when]: date is not JSON", "$[nan]: float nan", "$[tags]: a set became a JSON array", "$[thing]: Thing is not JSON"} {
		if !strings.Contains(joined, want) {
			t.Errorf("warnings lack %q:\n%s", want, joined)
		}
	}
	res = s.run(t, codecell.Exec{Language: "javascript", Code: "const o = { big: 10n, fn() {}, m: new Map([['k', 1]]), inf: Infinity, d: new Date(0) };\no.self = o;\no\n"})
	expect(t, res, codecell.StatusSuccess)
	expectValue(t, res, `{"big": "10", "fn": "[Function: fn]", "m": {"k": 1}, "inf": "Infinity", "d": "1970-01-01T00:00:00.000Z", "self": "[Circular]"}`)
	joined = strings.Join(res.Warnings, "\n")
	for _, want := range []string{"$.big: a BigInt", "$.fn: a function", "$.m: a Map", "$.inf: Infinity", "$.self: a reference cycle"} {
		if !strings.Contains(joined, want) {
			t.Errorf("warnings lack %q:\n%s", want, joined)
		}
	}
	// A function is described the same way in an object and in an array.
	res = s.run(t, codecell.Exec{Language: "javascript", Code: "function f() {}\n({ a: [f], o: { f }, s: Symbol('t') })\n"})
	expect(t, res, codecell.StatusSuccess)
	expectValue(t, res, `{"a": ["[Function: f]"], "o": {"f": "[Function: f]"}, "s": "Symbol(t)"}`)
	res = s.run(t, codecell.Exec{Language: "javascript", Code: "({ p: Promise.resolve(1) })\n"})
	expect(t, res, codecell.StatusSuccess)
	if !strings.Contains(strings.Join(res.Warnings, "\n"), "Promise") {
		t.Errorf("an un-awaited promise should be named in a warning: %v", res.Warnings)
	}
}

func (s *suite) valueTooLarge(t *testing.T) {
	lim := codecell.Limits{Value: 1000}
	for _, x := range []codecell.Exec{
		{Language: "python", Code: "'x' * 5000\n", Limits: lim},
		{Language: "javascript", Code: "'x'.repeat(5000)\n", Limits: lim},
	} {
		res := s.run(t, x)
		expect(t, res, codecell.StatusSuccess)
		if len(res.Value) != 0 || !strings.Contains(strings.Join(res.Warnings, "\n"), "over the") {
			t.Errorf("%s: value %d bytes, warnings %v", x.Language, len(res.Value), res.Warnings)
		}
	}
}

func (s *suite) argsAndStdin(t *testing.T) {
	res := s.run(t, codecell.Exec{Language: "python", Code: "import sys\nprint(sys.argv[1:], sys.stdin.read().upper())\n",
		Args: []string{"a", "b c"}, Stdin: strings.NewReader("input text")})
	expect(t, res, codecell.StatusSuccess)
	if res.Stdout != "['a', 'b c'] INPUT TEXT\n" {
		t.Errorf("python: %q", res.Stdout)
	}
	res = s.run(t, codecell.Exec{Language: "javascript", Code: "process.argv.slice(2)\n", Args: []string{"x", "y"}})
	expect(t, res, codecell.StatusSuccess)
	expectValue(t, res, `["x", "y"]`)
	res = s.run(t, codecell.Exec{Language: "bash", Code: "echo \"$1|$2\"; read line; echo \"got $line\"\n", Args: []string{"p", "q"}, Stdin: strings.NewReader("hello\n")})
	expect(t, res, codecell.StatusSuccess)
	if res.Stdout != "p|q\ngot hello\n" {
		t.Errorf("bash: %q", res.Stdout)
	}
	// No stdin: reading gets end of file at once, not a hang.
	res = s.run(t, codecell.Exec{Language: "python", Code: "import sys\nrepr(sys.stdin.read())\n", Limits: codecell.Limits{Timeout: 10 * time.Second}})
	expect(t, res, codecell.StatusSuccess)
	expectValue(t, res, `"''"`)
}

const secretVar = "CODECELL_CONFORMANCE_SECRET"

func (s *suite) environment(t *testing.T) {
	if os.Getenv(secretVar) == "" {
		t.Fatal("the secret is not set in codecell's environment")
	}
	res := s.run(t, codecell.Exec{Language: "python", Code: "import os\ndict(os.environ)\n", Env: map[string]string{"GREETING": "hi"}})
	expect(t, res, codecell.StatusSuccess)
	var env map[string]string
	if err := json.Unmarshal(res.Value, &env); err != nil {
		t.Fatal(err)
	}
	for k, v := range env {
		if strings.Contains(v, "hunter2") || k == secretVar {
			t.Errorf("the host's variable leaked: %s=%s", k, v)
		}
	}
	if env["GREETING"] != "hi" || env["LANG"] != "C.UTF-8" || env["PATH"] == "" || env["HOME"] == "" {
		t.Errorf("environment = %v", env)
	}
	for k := range env {
		switch k {
		case "GREETING", "LANG", "PATH", "HOME", "PWD", "LC_CTYPE":
		default:
			t.Errorf("unexpected variable %s in the program's environment", k)
		}
	}
}

func (s *suite) blocked(t *testing.T) {
	cases := []struct {
		name string
		x    codecell.Exec
		code string
	}{
		{"empty", codecell.Exec{Language: "python", Code: ""}, codecell.CodeEmptyCode},
		{"blank", codecell.Exec{Language: "python", Code: "  \n\t\n"}, codecell.CodeEmptyCode},
		{"unknown language", codecell.Exec{Language: "cobol", Code: "DISPLAY 'X'."}, codecell.CodeUnknownLanguage},
		{"no language", codecell.Exec{Code: "print(1)"}, codecell.CodeUnknownLanguage},
		{"too large", codecell.Exec{Language: "python", Code: strings.Repeat("x = 1\n", 3000)}, codecell.CodeCodeTooLarge},
		{"too deep", codecell.Exec{Language: "javascript", Code: strings.Repeat("[", 300) + strings.Repeat("]", 300)}, codecell.CodeTooDeep},
		{"labels in a row", codecell.Exec{Language: "javascript", Code: strings.Repeat("l: ", 300) + "1"}, codecell.CodeTooDeep},
		{"too deep for shell", codecell.Exec{Language: "bash", Code: strings.Repeat("(", 300) + "true" + strings.Repeat(")", 300)}, codecell.CodeTooDeep},
		{"too complex", codecell.Exec{Language: "typescript", Code: "a" + strings.Repeat(".b", 300_000), Limits: codecell.Limits{CodeSize: 1_000_000}}, codecell.CodeTooComplex},
		{"bad env", codecell.Exec{Language: "python", Code: "1", Env: map[string]string{"A=B": "c"}}, codecell.CodeInvalidRequest},
		{"huge env", codecell.Exec{Language: "python", Code: "1", Env: map[string]string{"BIG": strings.Repeat("x", 300<<10)}}, codecell.CodeInvalidRequest},
		{"file outside", codecell.Exec{Language: "python", Code: "1", Files: []codecell.File{{Path: "../escape.txt", Data: []byte("x")}}}, codecell.CodeInvalidRequest},
		{"absolute file", codecell.Exec{Language: "python", Code: "1", Files: []codecell.File{{Path: "/tmp/escape.txt", Data: []byte("x")}}}, codecell.CodeInvalidRequest},
		{"bad filename", codecell.Exec{Language: "python", Code: "1", Filename: "../x.py"}, codecell.CodeInvalidRequest},
		{"negative timeout", codecell.Exec{Language: "python", Code: "1", Limits: codecell.Limits{Timeout: -time.Second}}, codecell.CodeInvalidRequest},
		{"negative memory", codecell.Exec{Language: "python", Code: "1", Limits: codecell.Limits{Memory: -1}}, codecell.CodeInvalidRequest},
		{"missing workspace", codecell.Exec{Language: "python", Code: "1", Workspace: "/nonexistent/codecell-ws"}, codecell.CodeInvalidRequest},
	}
	if !s.caps.Network {
		cases = append(cases, struct {
			name string
			x    codecell.Exec
			code string
		}{"network allow-list", codecell.Exec{Language: "python", Code: "1", Policy: codecell.Policy{Network: &codecell.NetworkPolicy{Allow: []string{"example.com"}}}}, codecell.CodePolicyUnsupported})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := s.run(t, c.x)
			expect(t, res, codecell.StatusBlocked)
			if res.Error == nil || res.Error.Code != c.code || res.Error.Message == "" || len(res.Error.Hints) == 0 {
				t.Errorf("error = %+v, want code %s with a message and hints", res.Error, c.code)
			}
			if res.ExitCode != -1 || res.Stdout != "" {
				t.Errorf("a blocked program must not have run: exit %d stdout %q", res.ExitCode, res.Stdout)
			}
		})
	}
	// An unknown tier is refused by the engine, whichever tier is under test.
	res, err := (&codecell.Engine{}).Run(context.Background(), &codecell.Exec{Language: "python", Code: "1", Tier: "nosuch"})
	if err != nil || res.Status != codecell.StatusBlocked || res.Error.Code != codecell.CodeUnknownTier {
		t.Errorf("unknown tier: %+v %v", res, err)
	}
}

func (s *suite) missingInterpreter(t *testing.T) {
	eng := &codecell.Engine{Interpreters: map[string]string{"python": "/nonexistent/bin/python3"}}
	res := s.runEngine(t, eng, codecell.Exec{Language: "python", Code: "print(1)\n"})
	expect(t, res, codecell.StatusSandboxError)
	if res.Error == nil || res.Error.Kind != codecell.KindInternal || !strings.Contains(res.Error.Message, "/nonexistent/bin/python3") {
		t.Errorf("error = %+v", res.Error)
	}
}

func (s *suite) timeout(t *testing.T) {
	start := time.Now()
	res := s.run(t, codecell.Exec{Language: "python", Code: "import time\nprint('started')\nwhile True:\n    time.sleep(0.01)\n",
		Limits: codecell.Limits{Timeout: time.Second}})
	expect(t, res, codecell.StatusTimeout)
	if res.Stdout != "started\n" {
		t.Errorf("output before the timeout must survive: %q", res.Stdout)
	}
	if res.Error == nil || res.Error.Code != codecell.CodeTimeout || res.Error.Kind != codecell.KindTimeout {
		t.Errorf("error = %+v", res.Error)
	}
	// Not a timing assertion: a bound that only a hang would cross.
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("a 1s timeout took %s to end the run", d)
	}
	res = s.run(t, codecell.Exec{Language: "javascript", Code: "while (true) {}\n", Limits: codecell.Limits{Timeout: time.Second}})
	expect(t, res, codecell.StatusTimeout)
}

// marker returns a unique word to find the test's processes by.
func marker(t *testing.T) string {
	sum := sha256.Sum256([]byte(t.Name() + time.Now().String()))
	return "ccmark" + hex.EncodeToString(sum[:6])
}

// processesWith lists the host's processes whose command line holds word.
func processesWith(word string) []string {
	var found []string
	for _, p := range proc.List() {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.PID))
		if err == nil && strings.Contains(string(b), word) && p.State != 'Z' {
			found = append(found, fmt.Sprintf("%d %q", p.PID, strings.ReplaceAll(string(b), "\x00", " ")))
		}
	}
	return found
}

// detachCode starts three sleepers that try to outlive the program: one in a
// new session, one double-forked, one under nohup.
func detachCode(word string) string {
	return fmt.Sprintf(`import os, subprocess, time
subprocess.Popen(["bash", "-c", "exec -a %[1]s-a sleep 300"], start_new_session=True)
subprocess.Popen(["bash", "-c", "( bash -c 'exec -a %[1]s-b sleep 300' & ) &"])
subprocess.Popen(["bash", "-c", "nohup bash -c 'exec -a %[1]s-c sleep 300' >/dev/null 2>&1 &"])
deadline = time.time() + 10
seen = 0
while time.time() < deadline:
    seen = 0
    for p in os.listdir("/proc"):
        try:
            seen += p.isdigit() and open("/proc/%%s/cmdline" %% p, "rb").read().startswith(b"%[1]s")
        except OSError:
            pass
    if seen >= 3:
        break
    time.sleep(0.01)
print(seen, flush=True)
`, word)
}

func (s *suite) timeoutKillsDetached(t *testing.T) {
	word := marker(t)
	res := s.run(t, codecell.Exec{Language: "python", Code: detachCode(word) + "time.sleep(300)\n",
		Limits: codecell.Limits{Timeout: 3 * time.Second}})
	expect(t, res, codecell.StatusTimeout)
	if strings.TrimSpace(res.Stdout) != "3" {
		t.Fatalf("the program should have seen its 3 sleepers start; stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	if left := processesWith(word); len(left) > 0 {
		t.Errorf("processes outlived the Exec: %v", left)
	}
}

func (s *suite) exitKillsDetached(t *testing.T) {
	word := marker(t)
	res := s.run(t, codecell.Exec{Language: "python", Code: detachCode(word)})
	expect(t, res, codecell.StatusSuccess)
	if strings.TrimSpace(res.Stdout) != "3" {
		t.Fatalf("the program should have seen its 3 sleepers start; stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	if left := processesWith(word); len(left) > 0 {
		t.Errorf("processes outlived the Exec: %v", left)
	}
}

func (s *suite) memoryPython(t *testing.T) {
	// Grows in steps, so the limit is met however it is enforced.
	code := "print('start', flush=True)\nchunks = []\nfor i in range(64):\n    chunks.append(bytearray(32 * 1024 * 1024))\nprint('survived')\n"
	res := s.run(t, codecell.Exec{Language: "python", Code: code, Limits: codecell.Limits{Memory: 256 << 20}})
	expect(t, res, codecell.StatusMemoryLimit)
	if res.Stdout != "start\n" || res.Error == nil || res.Error.Code != codecell.CodeMemoryLimit {
		t.Errorf("stdout %q error %+v", res.Stdout, res.Error)
	}
}

func (s *suite) memoryJavaScript(t *testing.T) {
	code := "const keep = [];\nfor (let i = 0; i < 4096; i++) keep.push(new Array(1 << 20).fill(i + 0.5));\nconsole.log('survived');\n"
	res := s.run(t, codecell.Exec{Language: "javascript", Code: code, Limits: codecell.Limits{Memory: 256 << 20}})
	expect(t, res, codecell.StatusMemoryLimit)
}

func (s *suite) truncation(t *testing.T) {
	lim := codecell.Limits{Stdout: 1000, Stderr: 500}
	res := s.run(t, codecell.Exec{Language: "python", Limits: lim,
		Code: "import sys\nfor i in range(100000):\n    print(f'line {i:06d}')\nsys.stderr.write('é' * 20000)\nprint('THE END')\n"})
	expect(t, res, codecell.StatusSuccess)
	if !res.StdoutTruncated || !res.StderrTruncated {
		t.Fatalf("truncated flags: stdout %v stderr %v", res.StdoutTruncated, res.StderrTruncated)
	}
	if !strings.HasPrefix(res.Stdout, "line 000000\nline 000001\n") || !strings.HasSuffix(res.Stdout, "line 099999\nTHE END\n") {
		t.Errorf("stdout should keep its head and its tail:\n%s", res.Stdout)
	}
	if !strings.Contains(res.Stdout, "characters truncated") {
		t.Errorf("stdout should say what was dropped:\n%s", res.Stdout)
	}
	head, _, _ := strings.Cut(res.Stdout, "\n[…")
	_, tail, _ := strings.Cut(res.Stdout, "truncated …]\n")
	if n := len([]rune(head)) + len([]rune(tail)); n != 1000 {
		t.Errorf("stdout keeps %d characters, want 1000", n)
	}
	head, _, _ = strings.Cut(res.Stderr, "\n[…")
	if strings.Trim(head, "é") != "" || len([]rune(head)) != 400 {
		t.Errorf("stderr head should be 400 whole characters, is %q", head)
	}
	if len(res.Warnings) == 0 || !strings.Contains(strings.Join(res.Warnings, "\n"), "stdout was 1200008 characters") {
		t.Errorf("warnings should give the full size: %v", res.Warnings)
	}
	res = s.run(t, codecell.Exec{Language: "javascript", Code: "process.stdout.write('x'.repeat(999))\n", Limits: lim})
	if res.StdoutTruncated || len(res.Stdout) != 999 {
		t.Errorf("999 characters fit in 1000: truncated %v len %d", res.StdoutTruncated, len(res.Stdout))
	}
}

func (s *suite) files(t *testing.T) {
	ws := t.TempDir()
	mustWrite(t, filepath.Join(ws, "keep.txt"), "unchanged")
	mustWrite(t, filepath.Join(ws, "edit.txt"), "old")
	mustWrite(t, filepath.Join(ws, "gone.txt"), "bye")
	code := `import os, time
time.sleep(0.01)
with open("edit.txt", "w") as f:
    f.write("new content")
os.remove("gone.txt")
os.makedirs("out/deep")
with open("out/deep/result.csv", "w") as f:
    f.write("a,b\n1,2\n")
os.symlink("/etc/passwd", "link")
with open("input.json") as f:
    data = f.read()
data
`
	res := s.run(t, codecell.Exec{Language: "python", Code: code, Workspace: ws,
		Files: []codecell.File{{Path: "input.json", Data: []byte(`{"k": 1}`)}}})
	expect(t, res, codecell.StatusSuccess)
	expectValue(t, res, `"{\"k\": 1}"`)
	want := []codecell.FileChange{
		{Path: "edit.txt", Change: codecell.Modified, Size: 11, SHA256: sha("new content"), MIME: "text/plain; charset=utf-8"},
		{Path: "gone.txt", Change: codecell.Deleted, Size: 3},
		{Path: "link", Change: codecell.Created, Size: 11, Symlink: "/etc/passwd"},
		{Path: "out/deep/result.csv", Change: codecell.Created, Size: 8, SHA256: sha("a,b\n1,2\n"), MIME: "text/plain; charset=utf-8"},
	}
	if len(res.Files) != len(want) {
		t.Fatalf("files = %+v, want %+v", res.Files, want)
	}
	for i := range want {
		if res.Files[i] != want[i] {
			t.Errorf("files[%d] = %+v, want %+v", i, res.Files[i], want[i])
		}
	}
	// The caller's workspace is the caller's: it stays.
	if b, err := os.ReadFile(filepath.Join(ws, "out/deep/result.csv")); err != nil || string(b) != "a,b\n1,2\n" {
		t.Errorf("workspace file after the run: %q %v", b, err)
	}
}

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func mustWrite(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (s *suite) cancel(t *testing.T) {
	word := marker(t)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		// Cancel once the program is surely running.
		for i := 0; i < 1000 && len(processesWith(word)) == 0; i++ {
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
	}()
	res, err := s.engine(&codecell.Engine{}).Run(ctx, &codecell.Exec{Tier: s.tier.Name(), Language: "bash",
		Code: fmt.Sprintf("exec -a %s sleep 300\n", word)})
	if err == nil {
		t.Fatalf("a cancelled run returned a Result and no error: %+v", res)
	}
	if left := processesWith(word); len(left) > 0 {
		t.Errorf("processes outlived the cancelled Exec: %v", left)
	}
}

// processLimit: a program that forks as many children as it can, bounded
// at 200 and 10 seconds, gets no more than the limit where the tier enforces
// one, and leaves nothing behind either way.
func (s *suite) processLimit(t *testing.T) {
	if !s.caps.Processes {
		t.Skip("this tier does not enforce the processes limit")
	}
	word := marker(t)
	code := fmt.Sprintf(`import os, subprocess, errno
started, refused = 0, 0
children = []
for i in range(200):
    try:
        children.append(subprocess.Popen(["bash", "-c", "exec -a %s sleep 10"]))
        started += 1
    except OSError as e:
        if e.errno in (errno.EAGAIN, errno.ENOMEM):
            refused += 1
            break
        raise
{"started": started, "refused": refused}
`, word)
	res := s.run(t, codecell.Exec{Language: "python", Code: code, Limits: codecell.Limits{Processes: 24, Timeout: 20 * time.Second}})
	expect(t, res, codecell.StatusSuccess)
	var got struct{ Started, Refused int }
	if err := json.Unmarshal(res.Value, &got); err != nil {
		t.Fatalf("value %s: %v", res.Value, err)
	}
	if got.Refused == 0 || got.Started >= 24 {
		t.Errorf("started %d children and none was refused, with a limit of 24 processes", got.Started)
	}
	if left := processesWith(word); len(left) > 0 {
		t.Errorf("processes outlived the Exec: %v", left)
	}
}

// cpuLimit: a program that spins for a second and a half of wall-clock time
// under a limit of a quarter of a core gets about that share of a core.
// The check is a ratio the program measures itself (CPU time over wall
// time), not a duration: throttling shows as a ratio far below one whatever
// the machine's speed, and only a missing limit brings it near one.
func (s *suite) cpuLimit(t *testing.T) {
	if !s.caps.CPU {
		t.Skip("this tier does not enforce the CPU limit")
	}
	code := "import time\nstart, cpu0 = time.monotonic(), time.process_time()\n" +
		"while time.monotonic() - start < 1.5:\n    pass\n" +
		"(time.process_time() - cpu0) / (time.monotonic() - start)\n"
	res := s.run(t, codecell.Exec{Language: "python", Code: code, Limits: codecell.Limits{CPU: 0.25, Timeout: 20 * time.Second}})
	expect(t, res, codecell.StatusSuccess)
	var share float64
	if err := json.Unmarshal(res.Value, &share); err != nil {
		t.Fatalf("value %s: %v", res.Value, err)
	}
	if share > 0.5 {
		t.Errorf("the program used %.2f of a core under a limit of 0.25", share)
	}
	if !strings.Contains(res.Isolation.Limits.CPU, "0.25") {
		t.Errorf("isolation.limits.cpu = %q", res.Isolation.Limits.CPU)
	}
}
