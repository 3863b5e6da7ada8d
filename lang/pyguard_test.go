package lang_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/codecell-dev/codecell/guard"
	"github.com/codecell-dev/codecell/lang"
)

// These tests start the Python runner the way the engine does, without a
// sandbox: the value channel is a pipe on descriptor 3 and the tool channel
// is /dev/null on descriptor 4.

const python3 = "/usr/bin/python3"

type pyRun struct {
	rec      lang.Record
	findings []guard.Finding
	stdout   string
	stderr   string
	exit     int
	ws       string // the workspace
	tmp      string // TMPDIR
}

type pyOptions struct {
	policy    *guard.Policy
	checkOnly bool
	// fromSource runs runner.py itself instead of its compiled code.
	fromSource bool
	// files are written into the workspace first.
	files map[string]string
	// homeIsWorkspace sets HOME to the workspace, as the sandbox does;
	// otherwise HOME is a file, where nothing can be written.
	homeIsWorkspace bool
	// pyFlags go to the interpreter, before the runner's own arguments.
	pyFlags []string
}

func needPython(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(python3); err != nil {
		t.Skipf("%s is not installed", python3)
	}
}

func runPython(t *testing.T, code string, o pyOptions) pyRun {
	t.Helper()
	needPython(t)
	dir := t.TempDir()
	ws, runner, tmp := filepath.Join(dir, "ws"), filepath.Join(dir, "runner"), filepath.Join(dir, "tmp")
	for _, d := range []string{ws, runner, tmp} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, data := range o.files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(ws, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var policy []byte
	if o.policy != nil {
		policy = o.policy.RunnerFile()
		if policy == nil {
			t.Fatalf("policy %+v refuses nothing in Python", o.policy)
		}
	}
	prog, err := lang.Lookup("python").Prepare(lang.Source{
		Code: code, Interpreter: python3, ValueFD: 3, ToolFD: 4, ValueLimit: 1 << 20,
		Policy: policy, CheckOnly: o.checkOnly,
	}, lang.View{Workspace: ws, Runner: runner})
	if err != nil {
		t.Fatal(err)
	}
	argv := prog.Argv
	if o.fromSource {
		src, err := os.ReadFile("runner/python.py")
		if err != nil {
			t.Fatal(err)
		}
		prog.Files["runner.py"] = src
		i := slices.Index(argv, "-c")
		if i < 0 {
			t.Fatalf("argv %q does not start the compiled runner", argv)
		}
		argv = append(append(append([]string{}, argv[:i]...), filepath.Join(runner, "runner.py")), argv[i+3:]...)
	}
	for name, data := range prog.Files {
		p := filepath.Join(runner, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	var stdout, stderr bytes.Buffer
	argv = append(append([]string{argv[0]}, o.pyFlags...), argv[1:]...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = ws
	home := os.DevNull
	if o.homeIsWorkspace {
		home = ws
	}
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + home, "TMPDIR=" + tmp, "LANG=C.UTF-8"}
	cmd.ExtraFiles = []*os.File{w, devnull}
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		w.Close()
		t.Fatal(err)
	}
	w.Close()
	data, _ := io.ReadAll(r)
	run := pyRun{ws: ws, tmp: tmp}
	if err := cmd.Wait(); err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatal(err)
		}
		run.exit = exit.ExitCode()
	}
	run.stdout, run.stderr = stdout.String(), stderr.String()
	// The runner's first line is its verdict; a program that started has
	// its record after it.
	if first, rest, ok := bytes.Cut(data, []byte("\n")); ok && string(first) == `{"start":true}` {
		data = rest
	} else {
		data = bytes.TrimSuffix(data, []byte("\n"))
	}
	if len(data) > 0 {
		if err := json.Unmarshal(data, &run.rec); err != nil {
			t.Fatalf("record %q: %v", data, err)
		}
	}
	if run.rec.Guard != nil {
		if err := json.Unmarshal(run.rec.Guard, &run.findings); err != nil {
			t.Fatalf("findings %s: %v", run.rec.Guard, err)
		}
	}
	return run
}

func (r pyRun) value(t *testing.T) string {
	t.Helper()
	if r.exit != 0 || r.rec.Error != nil || r.rec.Guard != nil {
		t.Fatalf("the program did not return: exit %d, error %+v, findings %v, stderr:\n%s", r.exit, r.rec.Error, r.findings, r.stderr)
	}
	return string(r.rec.Value)
}

func blocking(categories ...string) *guard.Policy { return &guard.Policy{Block: categories} }

// Each static rule, at its place in the program. The program never runs.
func TestPythonGuardStatic(t *testing.T) {
	cases := []struct {
		name      string
		policy    *guard.Policy
		code      string
		rule      string
		line, col int
	}{
		{"blocked import", &guard.Policy{BlockedImports: []string{"csv"}}, "import json, csv", "imports.blocked", 1, 14},
		{"blocked submodule from its package", &guard.Policy{BlockedImports: []string{"os.path"}}, "from os import path", "imports.blocked", 1, 16},
		{"import not allowed", &guard.Policy{AllowedImports: []string{"json", "math"}}, "import json\nimport os", "imports.not_allowed", 2, 8},
		{"from import not allowed", &guard.Policy{AllowedImports: []string{"json"}}, "from os.path import join", "imports.not_allowed", 1, 1},
		{"relative import under an allow-list", &guard.Policy{AllowedImports: []string{"json"}}, "from . import x", "imports.relative", 1, 1},
		{"network module from its package", blocking(guard.Network), "from urllib import request", "network.import", 1, 20},
		{"network package", blocking(guard.Network), "import requests", "network.import", 1, 8},
		{"network module as an attribute", blocking(guard.Network), "import urllib\nurllib.request.urlopen('x')", "network.import", 2, 1},
		{"socket", blocking(guard.LowLevelNetwork), "import math\nimport socket as s", "low_level_network.import", 2, 8},
		{"subprocess aliased", blocking(guard.Process), "from subprocess import run as r\nr(['true'])", "process.import", 1, 1},
		{"process pool module", blocking(guard.Process), "import concurrent.futures.process", "process.import", 1, 8},
		{"process pool class", blocking(guard.Process), "from concurrent.futures import ProcessPoolExecutor", "process.pool", 1, 32},
		{"star import", blocking(guard.Filesystem), "from pathlib import *", "filesystem.import", 1, 1},
		{"shutil", blocking(guard.Filesystem), "import shutil", "filesystem.import", 1, 8},
		{"importlib", blocking(guard.ModuleLoading), "import importlib", "module_loading.import", 1, 8},
		{"ctypes", blocking(guard.DynamicEval), "import ctypes", "dynamic_eval.import", 1, 8},
		{"os.system through a module alias", blocking(guard.Process), "import os as o\no.system('true')", "process.system", 2, 1},
		{"os.system imported under another name", blocking(guard.Process), "from os import system as s", "process.system", 1, 16},
		{"os.system called under another name", blocking(guard.Process), "from os import system as s\ns('true')", "process.system", 2, 1},
		{"os.system through an assignment", blocking(guard.Process), "import os\nx = os.system\nx('true')", "process.system", 3, 1},
		{"os.system in posix", blocking(guard.Process), "import posix\nposix.system('true')", "process.system", 2, 1},
		{"os.system by a literal getattr", blocking(guard.Process), "import os\ngetattr(os, 'system')('true')", "process.system", 2, 1},
		{"os.popen", blocking(guard.Process), "import os\nos.popen('true')", "process.popen", 2, 1},
		{"os.fork", blocking(guard.Process), "import os\npid = os.fork()", "process.fork", 2, 7},
		{"os.execv", blocking(guard.Process), "import os\nos.execv('/bin/true', ['true'])", "process.exec", 2, 1},
		{"os.posix_spawn", blocking(guard.Process), "import os\nos.posix_spawn('/bin/true', ['true'], {})", "process.spawn", 2, 1},
		{"os.kill", blocking(guard.Process), "import os\nos.kill(1, 0)", "process.kill", 2, 1},
		{"open", blocking(guard.Filesystem), "data = open('x').read()", "filesystem.open", 1, 8},
		{"open inside a function", blocking(guard.Filesystem), "def f():\n    with open('x') as g:\n        return g.read()", "filesystem.open", 2, 10},
		{"io.open", blocking(guard.Filesystem), "import io\nio.open('x')", "filesystem.open", 2, 1},
		{"os.remove", blocking(guard.Filesystem), "import os\nos.remove('x')", "filesystem.remove", 2, 1},
		{"os.listdir", blocking(guard.Filesystem), "import os\nfor n in os.listdir('.'):\n    print(n)", "filesystem.listdir", 2, 10},
		{"os.makedirs", blocking(guard.Filesystem), "import os\nos.makedirs('a/b')", "filesystem.mkdir", 2, 1},
		{"__import__", blocking(guard.ModuleLoading), "m = __import__('json')", "module_loading.__import__", 1, 5},
		{"importlib.import_module", blocking(guard.ModuleLoading), "import importlib\nimportlib.import_module('json')", "module_loading.import_module", 2, 1},
		{"sys.modules", blocking(guard.ModuleLoading), "import sys\nm = sys.modules['json']", "module_loading.sys_modules", 2, 5},
		{"sys.path.append", blocking(guard.ModuleLoading), "import sys\nsys.path.append('/tmp')", "module_loading.sys_path", 2, 1},
		{"sys.path assigned", blocking(guard.ModuleLoading), "import sys\nsys.path = ['/tmp']", "module_loading.sys_path", 2, 1},
		{"sys.path item assigned", blocking(guard.ModuleLoading), "from sys import path\npath[0] = '/tmp'", "module_loading.sys_path", 2, 1},
		{"literal __import__ of a blocked module", blocking(guard.Process), "m = __import__('subprocess')", "process.import", 1, 5},
		{"eval", blocking(guard.DynamicEval), "eval('1 + 1')", "dynamic_eval.eval", 1, 1},
		{"eval under another name", blocking(guard.DynamicEval), "x = eval\nx('1')", "dynamic_eval.eval", 2, 1},
		{"eval as a default argument", blocking(guard.DynamicEval), "def f(e=eval):\n    return e('1')", "dynamic_eval.eval", 2, 12},
		{"exec", blocking(guard.DynamicEval), "exec('y = 1')", "dynamic_eval.exec", 1, 1},
		{"compile", blocking(guard.DynamicEval), "c = compile('1', 'f', 'eval')", "dynamic_eval.compile", 1, 5},
		{"getattr on builtins", blocking(guard.DynamicEval), "import builtins\ngetattr(builtins, 'len')", "dynamic_eval.getattr", 2, 1},
		{"setattr on builtins under another name", blocking(guard.DynamicEval), "b = __builtins__\nsetattr(b, 'x', 1)", "dynamic_eval.setattr", 2, 1},
		{"getattr on a module with a computed name", blocking(guard.DynamicEval), "import math\nname = 'sq' + 'rt'\ngetattr(math, name)(4)", "dynamic_eval.getattr", 3, 1},
		{"__builtins__ subscript", blocking(guard.DynamicEval), "f = __builtins__['len']", "dynamic_eval.builtins", 1, 5},
		{"__builtins__.__dict__", blocking(guard.DynamicEval), "d = __builtins__.__dict__", "dynamic_eval.builtins", 1, 5},
		{"globals subscript", blocking(guard.DynamicEval), "globals()['x'] = 1", "dynamic_eval.globals", 1, 1},
		{"locals subscript", blocking(guard.DynamicEval), "def f():\n    return locals()['a']", "dynamic_eval.locals", 2, 12},
		{"vars", blocking(guard.DynamicEval), "import math\nvars(math)", "dynamic_eval.vars", 2, 1},
		{"module __dict__", blocking(guard.DynamicEval), "import math\nmath.__dict__['sqrt']", "dynamic_eval.module_dict", 2, 1},
		{"__subclasses__", blocking(guard.DynamicEval), "x = 1\nobject.__subclasses__()", "dynamic_eval.introspection", 2, 1},
		{"__mro__", blocking(guard.DynamicEval), "().__class__.__mro__", "dynamic_eval.introspection", 1, 1},
		{"f_globals", blocking(guard.DynamicEval), "import sys\nsys._getframe().f_globals", "dynamic_eval.introspection", 2, 1},
		{"__globals__ by a literal getattr", blocking(guard.DynamicEval), "def f(): pass\ngetattr(f, '__globals__')", "dynamic_eval.introspection", 2, 1},
		{"columns count characters", blocking(guard.DynamicEval), "s = 'é→'; eval('1')", "dynamic_eval.eval", 1, 11},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			run := runPython(t, c.code, pyOptions{policy: c.policy, checkOnly: true})
			if run.exit != 0 || run.rec.Guard == nil {
				t.Fatalf("exit %d, record %+v, stderr:\n%s", run.exit, run.rec, run.stderr)
			}
			for _, f := range run.findings {
				if f.Rule == c.rule && f.Line == c.line && f.Column == c.col {
					if f.Message == "" || f.Hint == "" {
						t.Errorf("finding without message or hint: %+v", f)
					}
					if cat, _, _ := strings.Cut(c.rule, "."); cat != "imports" && f.Category != cat {
						t.Errorf("category %q, want %q", f.Category, cat)
					}
					return
				}
			}
			t.Errorf("no %s at %d:%d; findings:\n%v", c.rule, c.line, c.col, run.findings)
		})
	}
}

// What the categories do not refuse is not a finding.
func TestPythonGuardNoFindings(t *testing.T) {
	all := blocking(guard.Categories...)
	cases := []struct {
		name string
		code string
	}{
		{"tool calls", "r = call_tool_sync('search', {'q': 'x'})\nasync def f():\n    return await call_tool('search', {})"},
		{"a local function named open", "def open(x):\n    return x\nopen(1)"},
		{"a parameter named eval", "def f(eval):\n    return eval(1)"},
		{"getattr with a literal name", "import math\ngetattr(math, 'sqrt')(4)"},
		{"reading sys.path", "import sys\nlen(sys.path)"},
		{"a method named system", "class A:\n    def system(self):\n        return 1\nA().system()"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			run := runPython(t, c.code, pyOptions{policy: all, checkOnly: true})
			if run.exit != 0 || string(run.rec.Guard) != "[]" {
				t.Errorf("exit %d, findings %s, stderr:\n%s", run.exit, run.rec.Guard, run.stderr)
			}
		})
	}
}

// A program with findings does not run: the runner exits with status 3.
func TestPythonGuardRefusesBeforeRunning(t *testing.T) {
	code := "open('ran', 'w').close()\nimport subprocess\n"
	run := runPython(t, code, pyOptions{policy: blocking(guard.Process)})
	if run.exit != 3 || len(run.findings) != 1 || run.findings[0].Rule != "process.import" || run.findings[0].Line != 2 {
		t.Fatalf("exit %d, findings %+v, stderr:\n%s", run.exit, run.findings, run.stderr)
	}
	if _, err := os.Stat(filepath.Join(run.ws, "ran")); err == nil {
		t.Error("the program ran")
	}
}

// Check-only mode reports and never runs the program, whatever it finds.
func TestPythonGuardCheckOnly(t *testing.T) {
	code := "open('ran', 'w').close()\nimport os\nos.system('true')\n"
	run := runPython(t, code, pyOptions{policy: blocking(guard.Process), checkOnly: true})
	if run.exit != 0 || len(run.findings) != 1 || run.findings[0].Rule != "process.system" || run.findings[0].Line != 3 {
		t.Fatalf("exit %d, findings %+v, stderr:\n%s", run.exit, run.findings, run.stderr)
	}
	if _, err := os.Stat(filepath.Join(run.ws, "ran")); err == nil {
		t.Error("the program ran in check-only mode")
	}

	run = runPython(t, "open('ran', 'w').close()\n", pyOptions{checkOnly: true})
	if run.exit != 0 || string(run.rec.Guard) != "[]" {
		t.Fatalf("without a policy: exit %d, record %+v", run.exit, run.rec)
	}
	if _, err := os.Stat(filepath.Join(run.ws, "ran")); err == nil {
		t.Error("the program ran in check-only mode")
	}

	run = runPython(t, "x = (\n", pyOptions{policy: blocking(guard.Process), checkOnly: true})
	if run.exit != 1 || run.rec.Error == nil || !run.rec.Error.Syntax || run.rec.Guard != nil {
		t.Fatalf("syntax error: exit %d, record %+v", run.exit, run.rec)
	}
}

// A program the policy does not refuse runs as it would without one.
func TestPythonGuardCleanProgramRuns(t *testing.T) {
	code := "import json, math\nprint('hi')\njson.dumps({'r': math.sqrt(16)})"
	run := runPython(t, code, pyOptions{policy: blocking(guard.Categories...)})
	if v := run.value(t); v != `"{\"r\": 4.0}"` || run.stdout != "hi\n" {
		t.Errorf("value %s, stdout %q", v, run.stdout)
	}
}

func TestPythonGuardRunTime(t *testing.T) {
	t.Run("computed __import__ refused", func(t *testing.T) {
		run := runPython(t, "x = 1\n__import__('soc' + 'ket')\n", pyOptions{policy: blocking(guard.LowLevelNetwork)})
		e := run.rec.Error
		if run.exit != 1 || e == nil || e.Type != "ModuleBlockedError" || e.ModuleBlocked != "socket" ||
			e.Rule != "low_level_network.import" || e.Line != 2 {
			t.Fatalf("exit %d, error %+v, stderr:\n%s", run.exit, e, run.stderr)
		}
		if !strings.Contains(e.Message, "call_tool") || !strings.Contains(run.stderr, "ModuleBlockedError: import of socket") {
			t.Errorf("message %q, stderr:\n%s", e.Message, run.stderr)
		}
	})
	t.Run("computed __import__ caught", func(t *testing.T) {
		code := "try:\n    __import__('soc' + 'ket')\n    r = 'imported'\nexcept ImportError as e:\n" +
			"    r = [type(e).__name__, e.module, e.rule, isinstance(e, ModuleBlockedError)]\nr"
		run := runPython(t, code, pyOptions{policy: blocking(guard.LowLevelNetwork)})
		if v := run.value(t); v != `["ModuleBlockedError","socket","low_level_network.import",true]` {
			t.Errorf("value %s", v)
		}
	})
	t.Run("computed import_module refused", func(t *testing.T) {
		code := "import importlib\nimportlib.import_module('sub' + 'process')\n"
		run := runPython(t, code, pyOptions{policy: blocking(guard.Process)})
		e := run.rec.Error
		if e == nil || e.ModuleBlocked != "subprocess" || e.Rule != "process.import" {
			t.Fatalf("exit %d, error %+v, stderr:\n%s", run.exit, e, run.stderr)
		}
	})
	t.Run("import_module under another name", func(t *testing.T) {
		code := "from importlib import import_module as im\nim('multi' + 'processing')\n"
		run := runPython(t, code, pyOptions{policy: blocking(guard.Process)})
		if e := run.rec.Error; e == nil || e.ModuleBlocked != "multiprocessing" {
			t.Fatalf("exit %d, error %+v, stderr:\n%s", run.exit, e, run.stderr)
		}
	})
	t.Run("import in code built from a string", func(t *testing.T) {
		run := runPython(t, "exec('import ' + 'shutil', {})\n", pyOptions{policy: blocking(guard.Filesystem)})
		if e := run.rec.Error; e == nil || e.ModuleBlocked != "shutil" || e.Rule != "filesystem.import" {
			t.Fatalf("exit %d, error %+v, stderr:\n%s", run.exit, e, run.stderr)
		}
	})
	t.Run("module the program wrote", func(t *testing.T) {
		run := runPython(t, "import helper\n", pyOptions{
			policy: blocking(guard.LowLevelNetwork),
			files:  map[string]string{"helper.py": "import json\nimport socket\n"},
		})
		if e := run.rec.Error; e == nil || e.ModuleBlocked != "socket" {
			t.Fatalf("exit %d, error %+v, stderr:\n%s", run.exit, e, run.stderr)
		}
	})
	t.Run("allow-list", func(t *testing.T) {
		p := &guard.Policy{AllowedImports: []string{"json", "math"}}
		run := runPython(t, "import json\nimport os\n", pyOptions{policy: p})
		if run.exit != 3 || len(run.findings) != 1 || run.findings[0].Rule != "imports.not_allowed" || run.findings[0].Line != 2 {
			t.Fatalf("import os: exit %d, findings %+v", run.exit, run.findings)
		}
		code := "import json, math\ns = json.dumps({'pi': round(math.pi, 2)})\n" +
			"try:\n    __import__('o' + 's')\n    r = 'imported'\nexcept ModuleBlockedError as e:\n    r = [e.module, e.rule]\n[s, r]"
		run = runPython(t, code, pyOptions{policy: p})
		if v := run.value(t); v != `["{\"pi\": 3.14}",["os","imports.not_allowed"]]` {
			t.Errorf("value %s", v)
		}
	})
	t.Run("asyncio uses sockets itself", func(t *testing.T) {
		code := "import asyncio, sys\nasync def main():\n    await asyncio.sleep(0.01)\n    return 5\n" +
			"v = asyncio.run(main())\nloaded = 'socket' in sys.modules\n" +
			"try:\n    __import__('soc' + 'ket')\n    r = 'imported'\nexcept ModuleBlockedError:\n    r = 'refused'\n[v, loaded, r]"
		run := runPython(t, code, pyOptions{policy: blocking(guard.LowLevelNetwork)})
		if v := run.value(t); v != `[5,true,"refused"]` {
			t.Errorf("value %s", v)
		}
	})
	t.Run("top-level await", func(t *testing.T) {
		code := "import asyncio\nawait asyncio.sleep(0)\n7"
		run := runPython(t, code, pyOptions{policy: &guard.Policy{AllowedImports: []string{"asyncio"}, Block: []string{guard.LowLevelNetwork}}})
		if v := run.value(t); v != "7" {
			t.Errorf("value %s", v)
		}
	})
}

// The runner run from its source behaves as its compiled code does.
func TestPythonGuardFromSource(t *testing.T) {
	run := runPython(t, "import os\nos.system('true')\n", pyOptions{policy: blocking(guard.Process), fromSource: true})
	if run.exit != 3 || len(run.findings) != 1 || run.findings[0].Rule != "process.system" {
		t.Fatalf("exit %d, findings %+v, stderr:\n%s", run.exit, run.findings, run.stderr)
	}
	run = runPython(t, "__import__('sub' + 'process')\n", pyOptions{policy: blocking(guard.Process), fromSource: true})
	if e := run.rec.Error; e == nil || e.ModuleBlocked != "subprocess" {
		t.Fatalf("exit %d, error %+v, stderr:\n%s", run.exit, e, run.stderr)
	}
	if v := runPython(t, "1 + 1", pyOptions{fromSource: true}).value(t); v != "2" {
		t.Errorf("value %s", v)
	}
}

// Without a policy the runner's command is what it always was.
func TestPythonPolicyArgv(t *testing.T) {
	py := lang.Lookup("python")
	view := lang.View{Workspace: "/ws", Runner: "/run"}
	plain, err := py.Prepare(lang.Source{Code: "1", ValueFD: 3, ToolFD: 4}, view)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range plain.Argv {
		if strings.HasPrefix(a, "--") {
			t.Errorf("argv without a policy has %q: %q", a, plain.Argv)
		}
	}
	if _, ok := plain.Files["policy"]; ok {
		t.Error("a policy file without a policy")
	}
	policy := []byte("block process\n")
	guarded, err := py.Prepare(lang.Source{Code: "1", ValueFD: 3, ToolFD: 4, Policy: policy, CheckOnly: true}, view)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(guarded.Files["policy"], policy) {
		t.Errorf("policy file %q", guarded.Files["policy"])
	}
	i := slices.Index(guarded.Argv, "--policy")
	if i < 0 || guarded.Argv[i+1] != "/run/policy" || !slices.Contains(guarded.Argv, "--check-only") {
		t.Errorf("argv %q", guarded.Argv)
	}
	if n := len(guarded.Argv) - len(plain.Argv); n != 3 {
		t.Errorf("the options added %d arguments: %q", n, guarded.Argv)
	}
}

func needMatplotlib(t *testing.T) {
	t.Helper()
	needPython(t)
	if out, err := exec.Command(python3, "-I", "-c", "import matplotlib").CombinedOutput(); err != nil {
		t.Skipf("%s cannot import matplotlib: %v: %s", python3, err, out)
	}
}

func isPNG(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")) {
		t.Errorf("%s is not a PNG", filepath.Base(path))
	}
}

func TestPythonMatplotlib(t *testing.T) {
	needMatplotlib(t)
	check := func(t *testing.T, run pyRun, want ...string) {
		t.Helper()
		if run.exit != 0 || run.rec.Error != nil {
			t.Fatalf("exit %d, error %+v, stderr:\n%s", run.exit, run.rec.Error, run.stderr)
		}
		if run.stderr != "" {
			t.Errorf("stderr:\n%s", run.stderr)
		}
		entries, _ := os.ReadDir(run.ws)
		var got []string
		for _, e := range entries {
			got = append(got, e.Name())
		}
		if !slices.Equal(got, want) {
			t.Errorf("workspace holds %q, want %q", got, want)
		}
		for _, name := range want {
			data, _ := os.ReadFile(filepath.Join(run.ws, name))
			switch {
			case string(data) == "mine" || name == "matplotlibrc":
			case strings.HasSuffix(name, ".svg"):
				if !bytes.Contains(data, []byte("<svg")) {
					t.Errorf("%s is not an SVG", name)
				}
			default:
				isPNG(t, filepath.Join(run.ws, name))
			}
		}
		// The configuration directory made for the run is gone.
		if left, _ := os.ReadDir(run.tmp); len(left) != 0 {
			t.Errorf("left in TMPDIR: %v", left)
		}
	}
	t.Run("show", func(t *testing.T) {
		run := runPython(t, "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()\nlen(plt.get_fignums())", pyOptions{})
		check(t, run, "figure-1.png")
		if string(run.rec.Value) != "0" {
			t.Errorf("show() left %s figures open", run.rec.Value)
		}
	})
	t.Run("home is the workspace", func(t *testing.T) {
		// Only the figure: no configuration or font caches (fontconfig's,
		// when fc-list has none it can use, go to XDG_CACHE_HOME).
		code := "import os\nimport matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()\n" +
			"[os.environ[k].startswith(os.environ['TMPDIR'] + '/') for k in ('MPLCONFIGDIR', 'XDG_CACHE_HOME')]"
		run := runPython(t, code, pyOptions{homeIsWorkspace: true})
		check(t, run, "figure-1.png")
		if string(run.rec.Value) != "[true,true]" {
			t.Errorf("MPLCONFIGDIR and XDG_CACHE_HOME under TMPDIR: %s", run.rec.Value)
		}
	})
	t.Run("without show", func(t *testing.T) {
		run := runPython(t, "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\n", pyOptions{})
		check(t, run, "figure-1.png")
	})
	t.Run("two figures", func(t *testing.T) {
		code := "from matplotlib import pyplot as plt\nplt.plot([1, 2])\nplt.show()\nfig, ax = plt.subplots()\nax.bar([1, 2], [3, 4])\n"
		check(t, runPython(t, code, pyOptions{}), "figure-1.png", "figure-2.png")
	})
	t.Run("next free name", func(t *testing.T) {
		code := "import matplotlib.pyplot as plt\nfig = plt.figure()\nfig.gca().plot([1, 2])\nfig.show()\n"
		run := runPython(t, code, pyOptions{files: map[string]string{"figure-1.png": "mine"}})
		check(t, run, "figure-1.png", "figure-2.png")
		if data, _ := os.ReadFile(filepath.Join(run.ws, "figure-1.png")); string(data) != "mine" {
			t.Error("figure-1.png was overwritten")
		}
	})
	t.Run("under a policy", func(t *testing.T) {
		code := "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()\n"
		check(t, runPython(t, code, pyOptions{policy: blocking(guard.Categories...)}), "figure-1.png")
		p := &guard.Policy{AllowedImports: []string{"matplotlib"}}
		check(t, runPython(t, code, pyOptions{policy: p}), "figure-1.png")
	})
	t.Run("saved by the program", func(t *testing.T) {
		// A figure the program saved is not saved again at the end; one it
		// changed after saving is.
		code := "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.savefig('mine.png')\n" +
			"fig, ax = plt.subplots()\nax.plot([1])\nfig.savefig('second.png')\nax.plot([2])\n"
		check(t, runPython(t, code, pyOptions{}), "figure-1.png", "mine.png", "second.png")
	})
	t.Run("backend", func(t *testing.T) {
		run := runPython(t, "import matplotlib\nmatplotlib.get_backend()", pyOptions{})
		if v := run.value(t); strings.ToLower(v) != `"agg"` || run.stderr != "" {
			t.Errorf("backend %s, stderr:\n%s", v, run.stderr)
		}
	})
	t.Run("backend chosen by the program", func(t *testing.T) {
		// Its figures are saved in the format its backend writes.
		code := "import matplotlib\nmatplotlib.use('svg')\nimport matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()\nmatplotlib.get_backend()"
		run := runPython(t, code, pyOptions{})
		check(t, run, "figure-1.svg")
		if v := run.value(t); v != `"svg"` {
			t.Errorf("backend %s", v)
		}
	})
	t.Run("backend of a matplotlibrc", func(t *testing.T) {
		for name, files := range map[string]map[string]string{
			"in the workspace": {"matplotlibrc": "backend: svg\n"},
			"in HOME":          {".config/matplotlib/matplotlibrc": "backend: svg  # mine\n"},
		} {
			t.Run(name, func(t *testing.T) {
				code := "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nimport matplotlib\nmatplotlib.get_backend()"
				run := runPython(t, code, pyOptions{files: files, homeIsWorkspace: true})
				if v := run.value(t); v != `"svg"` {
					t.Errorf("backend %s, stderr:\n%s", v, run.stderr)
				}
				if _, err := os.Stat(filepath.Join(run.ws, "figure-1.svg")); err != nil {
					t.Error(err)
				}
			})
		}
	})
	t.Run("saving turned off", func(t *testing.T) {
		// The program (or its environment) turns saving off: show() keeps
		// the figure open, and nothing is written.
		code := "import os\nos.environ['CODECELL_SAVE_FIGURES'] = '0'\nimport matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()\nlen(plt.get_fignums())"
		run := runPython(t, code, pyOptions{})
		check(t, run)
		if v := run.value(t); v != "1" {
			t.Errorf("open figures after show(): %s", v)
		}
	})
}

// The standard fallback for a missing module (an import in a try whose
// handlers catch ImportError, ModuleNotFoundError or Exception) is left to
// the run-time hook, whose refusal the program catches; the same import
// outside such a try is refused before running.
func TestPythonCatchableImportIdiom(t *testing.T) {
	p := &guard.Policy{AllowedImports: []string{"json"}}
	code := "try:\n    from collections import Counter\nexcept ImportError:\n    Counter = None\n" +
		"try:\n    import numpy\nexcept ModuleNotFoundError:\n    numpy = None\n" +
		"try:\n    import csv\nexcept (ValueError, Exception):\n    csv = None\n" +
		"[Counter is None, numpy is None, csv is None]\n"
	run := runPython(t, code, pyOptions{policy: p})
	if got := run.value(t); got != "[true,true,true]" {
		t.Fatalf("value %s", got)
	}
	run = runPython(t, "try:\n    import csv\nexcept ValueError:\n    pass\n", pyOptions{policy: p, checkOnly: true})
	if len(run.findings) != 1 || run.findings[0].Rule != "imports.not_allowed" {
		t.Fatalf("an import in a try that does not catch ImportError: %+v", run.findings)
	}
	run = runPython(t, "def f():\n    import csv\ntry:\n    f\nexcept ImportError:\n    pass\n", pyOptions{policy: p, checkOnly: true})
	if len(run.findings) != 1 {
		t.Fatalf("an import in a function defined outside the try: %+v", run.findings)
	}
}
