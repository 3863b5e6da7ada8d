//go:build linux

package native_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/testenv"
	"github.com/codecell-dev/codecell/tier/native"
)

// liveSession is a live session on the native tier, as a service keeps
// one: an Engine, a workspace and the session's interpreters.
type liveSession struct {
	t    *testing.T
	e    *codecell.Engine
	ws   string
	live *codecell.Live
	lim  codecell.Limits
}

func newLiveSession(t *testing.T, e *codecell.Engine) *liveSession {
	t.Helper()
	testenv.RequireNative(t, native.Default.Probe)
	if e == nil {
		e = &codecell.Engine{Tier: native.Name}
	}
	s := &liveSession{t: t, e: e, ws: t.TempDir(), live: e.NewLive()}
	t.Cleanup(s.live.Close)
	return s
}

// cell runs code as the session's next cell.
func (s *liveSession) cell(code string, mod ...func(*codecell.Exec)) *codecell.Result {
	s.t.Helper()
	x := &codecell.Exec{Language: "python", Code: code, Workspace: s.ws, Live: s.live, Limits: s.lim}
	for _, m := range mod {
		m(x)
	}
	res, err := s.e.Run(context.Background(), x)
	if err != nil {
		s.t.Fatal(err)
	}
	return res
}

func value(t *testing.T, res *codecell.Result) any {
	t.Helper()
	var v any
	if len(res.Value) > 0 {
		if err := json.Unmarshal(res.Value, &v); err != nil {
			t.Fatal(err)
		}
	}
	return v
}

func wantKept(t *testing.T, res *codecell.Result, want any) {
	t.Helper()
	if res.Status != codecell.StatusSuccess || res.SessionState != codecell.SessionKept {
		t.Fatalf("status %s, session %q, error %+v, stderr %q", res.Status, res.SessionState, res.Error, res.Stderr)
	}
	if got := value(t, res); want != nil && got != want {
		t.Fatalf("value %v, want %v", got, want)
	}
}

func TestLiveKeepsState(t *testing.T) {
	s := newLiveSession(t, nil)
	res := s.cell("import collections\ncounts = collections.Counter('abracadabra')\ndef most():\n    return counts.most_common(1)[0][0]\nprint('first')\nlen(counts)")
	wantKept(t, res, float64(5))
	if res.Stdout != "first\n" {
		t.Fatalf("stdout %q", res.Stdout)
	}
	if !strings.Contains(res.Isolation.Interpreter, "live session") || res.Isolation.Level != "sandbox" {
		t.Fatalf("isolation %+v", res.Isolation)
	}
	res = s.cell("counts['z'] += 7\nprint('second')\nmost()")
	wantKept(t, res, "z")
	if res.Stdout != "second\n" {
		t.Fatalf("each cell's output is its own: %q", res.Stdout)
	}
	// Top-level await and return keep their code-mode meaning.
	res = s.cell("import asyncio\nawait asyncio.sleep(0)\nif counts['z'] > 1:\n    return 'awaited'\n'no'")
	wantKept(t, res, "awaited")
	// A failure is the cell's, and the session lives on.
	res = s.cell("1/0")
	if res.Status != codecell.StatusFailure || res.SessionState != codecell.SessionKept || !strings.Contains(res.Stderr, "ZeroDivisionError") {
		t.Fatalf("%s %q %q", res.Status, res.SessionState, res.Stderr)
	}
	res = s.cell("import sys\nsys.exit(4)")
	if res.ExitCode != 4 || res.SessionState != codecell.SessionKept {
		t.Fatalf("sys.exit ends the cell, not the session: %d %q", res.ExitCode, res.SessionState)
	}
	wantKept(t, s.cell("counts['z']"), float64(7))
}

func TestLiveFilesBothWays(t *testing.T) {
	s := newLiveSession(t, nil)
	res := s.cell("open('made.txt', 'w').write('by a cell')\nf = open('kept-open.txt', 'w')\nf.write('line 1\\n')\nf.flush()")
	wantKept(t, res, nil)
	if len(res.Files) != 2 || res.Files[0].Path != "kept-open.txt" || res.Files[1].Path != "made.txt" || res.Files[1].Change != codecell.Created {
		t.Fatalf("files %+v", res.Files)
	}
	if b, err := os.ReadFile(filepath.Join(s.ws, "made.txt")); err != nil || string(b) != "by a cell" {
		t.Fatalf("the session's workspace has %q, %v", b, err)
	}
	// What changes in the session's workspace between cells (an upload)
	// is there for the next one; the open file is still the cell's.
	if err := os.WriteFile(filepath.Join(s.ws, "uploaded.txt"), []byte("from the host"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(s.ws, "made.txt"))
	res = s.cell("import os\nf.write('line 2\\n')\nf.close()\n[open('uploaded.txt').read(), os.path.exists('made.txt')]",
		func(x *codecell.Exec) { x.Files = []codecell.File{{Path: "given.txt", Data: []byte("g")}} })
	wantKept(t, res, nil)
	if v := value(t, res).([]any); v[0] != "from the host" || v[1] != false {
		t.Fatalf("value %v", v)
	}
	if b, _ := os.ReadFile(filepath.Join(s.ws, "kept-open.txt")); string(b) != "line 1\nline 2\n" {
		t.Fatalf("kept-open.txt is %q", b)
	}
	wantKept(t, s.cell("open('given.txt').read()"), "g")
}

func TestLiveInterruptKeepsState(t *testing.T) {
	s := newLiveSession(t, nil)
	wantKept(t, s.cell("total = 0"), nil)
	res := s.cell("import time\nfor i in range(600):\n    total += 1\n    time.sleep(0.1)", func(x *codecell.Exec) { x.Limits.Timeout = time.Second })
	if res.Status != codecell.StatusTimeout || res.SessionState != codecell.SessionKept {
		t.Fatalf("status %s, session %q, %+v", res.Status, res.SessionState, res.Error)
	}
	if !strings.Contains(res.Stderr, "KeyboardInterrupt") {
		t.Fatalf("stderr %q", res.Stderr)
	}
	res = s.cell("total")
	wantKept(t, res, nil)
	if n := value(t, res).(float64); n < 1 || n >= 600 {
		t.Fatalf("total %v: the loop ran some, not all", n)
	}
}

func TestLiveLostAndRestarted(t *testing.T) {
	s := newLiveSession(t, nil)
	s.lim = codecell.Limits{Memory: 128 << 20}
	wantKept(t, s.cell("x = 1"), nil)
	// A cell that ignores the interrupt loses the interpreter.
	res := s.cell("import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    time.sleep(1)",
		func(x *codecell.Exec) { x.Limits.Timeout = 500 * time.Millisecond })
	if res.Status != codecell.StatusTimeout || res.SessionState != codecell.SessionLost || len(res.Warnings) == 0 {
		t.Fatalf("status %s, session %q, warnings %q", res.Status, res.SessionState, res.Warnings)
	}
	res = s.cell("'x' in globals()")
	wantKept(t, res, false)
	// So does one over the memory limit; the next cell has a fresh one.
	wantKept(t, s.cell("x = 2"), nil)
	res = s.cell("hog = []\nwhile True:\n    hog.append(bytearray(8 << 20))")
	if res.Status != codecell.StatusMemoryLimit || res.SessionState != codecell.SessionLost {
		t.Fatalf("status %s, session %q, %+v %q", res.Status, res.SessionState, res.Error, res.Stderr)
	}
	wantKept(t, s.cell("'x' in globals()"), false)
	wantKept(t, s.cell("x = 3"), nil)
	s.live.Restart()
	wantKept(t, s.cell("'x' in globals()"), false)
}

// Two live sessions share nothing: a variable, a module patch, a thread,
// a file, a process of one are not the other's to see.
func TestLiveSessionsApart(t *testing.T) {
	a := newLiveSession(t, nil)
	b := newLiveSession(t, a.e)
	wantKept(t, a.cell(`import json, threading, subprocess, os
json.dumps = lambda *a, **k: 'patched'
secret = 'a'
stop = threading.Event()
threading.Thread(target=stop.wait, name='a-thread', daemon=True).start()
open('a-only.txt', 'w').write('a')
sleeper = subprocess.Popen(['sleep', '60'])
os.getpid()`), nil)
	res := b.cell(`import json, threading, os
procs = [open(f'/proc/{p}/cmdline', 'rb').read() for p in os.listdir('/proc') if p.isdigit()]
['secret' in globals(), json.dumps(1), [t.name for t in threading.enumerate()], os.path.exists('a-only.txt'), any(b'sleep' in c for c in procs)]`)
	wantKept(t, res, nil)
	v := value(t, res).([]any)
	if v[0] != false || v[1] != "1" || len(v[2].([]any)) != 1 || v[3] != false || v[4] != false {
		t.Fatalf("session b sees session a's state: %v", v)
	}
	wantKept(t, a.cell("stop.set()\nsleeper.kill()\nsleeper.wait()"), nil)
	// The patch is session a's json, not its runner's: values still come.
	res = a.cell("[json.dumps(1), {'n': 1}]")
	wantKept(t, res, nil)
	if v := value(t, res).([]any); v[0] != "patched" || v[1].(map[string]any)["n"] != float64(1) {
		t.Fatalf("value %v", v)
	}
}

// A DataFrame, the object a notebook most often holds, is there for the
// next cell.
func TestLiveDataFrame(t *testing.T) {
	s := newLiveSession(t, nil)
	if res := s.cell("import pandas"); res.Status != codecell.StatusSuccess {
		t.Skipf("no pandas for %s here: %s", "/usr/bin/python3", res.Stderr)
	}
	wantKept(t, s.cell("import numpy as np, pandas as pd\nrng = np.random.default_rng(1)\ndf = pd.DataFrame({'city': rng.choice(['Oslo', 'Lima', 'Pune'], 200_000), 't': rng.normal(15, 8, 200_000)})\nlen(df)"), float64(200000))
	res := s.cell("df.groupby('city')['t'].count().sum()")
	wantKept(t, res, float64(200000))
	vars, err := s.live.Variables(context.Background(), "python")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, v := range vars {
		if v.Name == "df" && v.Type == "pandas.core.frame.DataFrame" {
			found = true
		}
	}
	if !found {
		t.Fatalf("variables %+v", vars)
	}
}

func TestLiveToolsEveryCell(t *testing.T) {
	e := &codecell.Engine{Tier: native.Name, Tools: &codecell.Toolbox{}}
	err := e.Tools.Add(codecell.Tool{Name: "add", Description: "adds", Call: func(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
		var in struct{ A, B int }
		if err := json.Unmarshal(params, &in); err != nil {
			return nil, err
		}
		return json.Marshal(in.A + in.B)
	}})
	if err != nil {
		t.Fatal(err)
	}
	s := newLiveSession(t, e)
	res := s.cell("r = await call_tool('add', {'A': 1, 'B': 2})\nr")
	wantKept(t, res, float64(3))
	res = s.cell("r + await tools.add(A=r, B=4)")
	wantKept(t, res, float64(10))
	if len(res.ToolCalls) != 1 || !res.ToolCalls[0].OK {
		t.Fatalf("tool calls %+v", res.ToolCalls)
	}
}

func TestLiveJavaScript(t *testing.T) {
	s := newLiveSession(t, nil)
	js := func(x *codecell.Exec) { x.Language = "javascript" }
	ts := func(x *codecell.Exec) { x.Language = "typescript" }
	wantKept(t, s.cell("const rows = [1, 2, 3]\nlet total = 0\nfunction add(x) { total += x; return total }\nclass Box { constructor(v) { this.v = v } }\nrows.length", js), float64(3))
	// TypeScript cells share the JavaScript ones' interpreter.
	wantKept(t, s.cell("const n: number = add(5)\nn + rows.length + new Box(1).v", ts), float64(9))
	wantKept(t, s.cell("total", js), float64(5))
	// A cell run again declares its names again, as a notebook's does.
	wantKept(t, s.cell("const rows = 'again'\nrows", js), "again")
	wantKept(t, s.cell("const os = await import('node:os')\nconsole.log('eol', JSON.stringify(os.EOL))\nif (total > 1) return typeof os.EOL\n'no'", js), "string")
	// Interrupted where it spins, and where it waits: kept either way.
	for _, code := range []string{"total += 1\nwhile (true) {}", "total += 1\nawait new Promise((r) => setTimeout(r, 60000))"} {
		res := s.cell(code, js, func(x *codecell.Exec) { x.Limits.Timeout = time.Second })
		if res.Status != codecell.StatusTimeout || res.SessionState != codecell.SessionKept {
			t.Fatalf("%q: status %s, session %q, %q", code, res.Status, res.SessionState, res.Stderr)
		}
	}
	wantKept(t, s.cell("total", js), float64(7))
	// An error names the cell's own line, and its message the file.
	res := s.cell("const q = new Map()\n\nq.get('k').length", js, func(x *codecell.Exec) { x.Filename = "step.js" })
	if res.Status != codecell.StatusFailure || res.Error == nil || res.Error.Meta["line"] != 3 || !strings.Contains(res.Stderr, "step.js:3:") {
		t.Fatalf("%s %+v %q", res.Status, res.Error, res.Stderr)
	}
	res = s.cell("const = 1", js)
	if res.Status != codecell.StatusFailure || res.Error == nil || res.Error.Code != codecell.CodeSyntaxError {
		t.Fatalf("%s %+v", res.Status, res.Error)
	}
	// A cell's error names its lines, its final expression's included,
	// with none of node's frames or the session's own.
	res = s.cell("function g() {\n  throw new Error('in g')\n}\nconst x = 1\ng(x)\n", js)
	if res.Status != codecell.StatusFailure || !strings.Contains(res.Stderr, "main.js:2:") || !strings.Contains(res.Stderr, "main.js:5:") ||
		strings.Contains(res.Stderr, "node:") || strings.Contains(res.Stderr, "codecell-cell") {
		t.Fatalf("%s %q", res.Status, res.Stderr)
	}
	vars, err := s.live.Variables(context.Background(), "javascript")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, v := range vars {
		seen[v.Name] = v.Type + " " + v.Repr
	}
	if !strings.HasPrefix(seen["total"], "number 7") || !strings.HasPrefix(seen["add"], "function") || seen["os"] == "" {
		t.Fatalf("variables %q", seen)
	}
	// Python's interpreter is another, in a sandbox of its own.
	wantKept(t, s.cell("'total' in globals()"), false)
}

// A cell that replaces the globals the runner uses (Promise, JSON, or their
// functions) breaks its own code only: the runner kept its own from its
// start, and the next cells run and answer as before.
func TestLiveJavaScriptGlobalsReplaced(t *testing.T) {
	s := newLiveSession(t, nil)
	js := func(x *codecell.Exec) { x.Language = "javascript" }
	wantKept(t, s.cell("globalThis.Promise = function () {}\nJSON.stringify = () => 'x'\nJSON.parse = () => ({})\n1", js), float64(1))
	res := s.cell("({ a: [1, 2], b: 'c' })", js)
	wantKept(t, res, nil)
	if got := fmt.Sprint(value(t, res)); got != "map[a:[1 2] b:c]" {
		t.Fatalf("value %s after the globals were replaced", got)
	}
	wantKept(t, s.cell("console.log('still')\nawait (async () => 3)()", js), float64(3))
	// So do node's functions the runner writes its answers and the end of
	// a cell's output with.
	wantKept(t, s.cell("require('fs').writeSync = () => 0\n4", js), float64(4))
	for i := 0; i < 2; i++ {
		res := s.cell("console.log('after')\n5", js)
		wantKept(t, res, float64(5))
		if res.Stdout != "after\n" || len(res.Warnings) > 0 {
			t.Fatalf("stdout %q, warnings %q", res.Stdout, res.Warnings)
		}
	}
	// (console.log writes through the socket's write: its output is gone)
	wantKept(t, s.cell("require('net').Socket.prototype.write = function () { return true }\n6", js, func(x *codecell.Exec) { x.Limits.Timeout = 20 * time.Second }), float64(6))
	wantKept(t, s.cell("7", js), float64(7))
}

// A live session under guardrails: each cell is checked before it reaches
// the interpreter (a refusal keeps the session), and the session's policy
// holds at run time in the interpreter for every cell.
func TestLiveGuardrails(t *testing.T) {
	e := &codecell.Engine{Tier: native.Name, Policy: codecell.Policy{Guard: &codecell.GuardPolicy{
		Block: []string{"process"}, BlockedImports: []string{"csv"}}}}
	s := newLiveSession(t, e)
	wantKept(t, s.cell("kept = 'yes'"), nil)
	res := s.cell("import csv\nkept = 'no'")
	if res.Status != codecell.StatusBlocked || len(res.Findings) == 0 || res.SessionState != codecell.SessionKept {
		t.Fatalf("static: %s %+v %q", res.Status, res.Findings, res.SessionState)
	}
	// What the static check cannot see is refused when it happens.
	res = s.cell("name = 'c' + 'sv'\nm = __import__(name)")
	if res.Status != codecell.StatusFailure || !strings.Contains(res.Stderr, "ModuleBlockedError") {
		t.Fatalf("import at run time: %s %q", res.Status, res.Stderr)
	}
	res = s.cell("import os\nfn = getattr(os, 'sys' + 'tem')\nfn('true')")
	if res.Status == codecell.StatusSuccess || !strings.Contains(res.Stderr, "PolicyBlockedError") || !strings.Contains(res.Isolation.Runtime, "audit hook") {
		t.Fatalf("a process at run time: %s %q %q", res.Status, res.Stderr, res.Isolation.Runtime)
	}
	wantKept(t, s.cell("kept"), "yes")
	// JavaScript cells are checked on the host.
	res = s.cell("const cp = require('child_process')\ncp.execSync('true')", func(x *codecell.Exec) { x.Language = "javascript" })
	if res.Status != codecell.StatusBlocked || res.SessionState != codecell.SessionKept {
		t.Fatalf("javascript: %s %+v", res.Status, res.Findings)
	}
}

// A cell that writes on the control socket itself breaks the protocol: it
// loses its interpreter, nothing hangs, and the next cell has a fresh one.
func TestLiveForgedAnswer(t *testing.T) {
	s := newLiveSession(t, nil)
	wantKept(t, s.cell("x = 1"), nil)
	res := s.cell("import os\nos.write(3, b'done 999 0 5\\n{}')\nimport time\ntime.sleep(30)", func(x *codecell.Exec) { x.Limits.Timeout = 20 * time.Second })
	if res.SessionState != codecell.SessionLost || res.Status == codecell.StatusSuccess {
		t.Fatalf("status %s, session %q", res.Status, res.SessionState)
	}
	wantKept(t, s.cell("'x' in globals()"), false)
}
