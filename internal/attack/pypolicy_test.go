package attack_test

import (
	"context"
	"strings"
	"testing"

	"github.com/codecell-dev/codecell"
)

// attackPythonPolicyBypasses: ways around the static checks of a Python
// policy that blocks process and dynamic_eval (each reaches a process by a
// path the syntax tree does not show) are refused when they happen, by the
// runner's audit hook: the Result says SANDBOX_POLICY_BLOCKED and the
// harmless command (it would write a marker file) never ran. A program may
// catch the refusal, and ordinary programs (dataclasses, namedtuples,
// asyncio) still run under the policy.
func attackPythonPolicyBypasses(t *testing.T) {
	requireNative(t)
	policy := codecell.Policy{Guard: &codecell.GuardPolicy{Block: []string{"process", "dynamic_eval"}}}
	cmd := "'echo ran > marker.txt'"
	// The pickle of (posix.system, ("echo ran > marker.txt",)), protocol 4.
	pickled := `b'\x80\x04\x95,\x00\x00\x00\x00\x00\x00\x00\x8c\x05posix\x94\x8c\x06system\x94\x93\x94\x8c\x15echo ran > marker.txt\x94\x85\x94R\x94.'`
	for _, c := range []struct {
		name, code string
		runtime    bool // the static checks cannot see it
	}{
		{"star import", "from os import *\nsystem(" + cmd + ")\n", false},
		{"attrgetter", "import os, operator\noperator.attrgetter('sys' + 'tem')(os)(" + cmd + ")\n", false},
		{"reduce getattr", "import os, functools\nfunctools.reduce(getattr, ['sys' + 'tem'], os)(" + cmd + ")\n", false},
		{"__getattribute__", "import os\nos.__getattribute__('sys' + 'tem')(" + cmd + ")\n", false},
		{"asyncio subprocess", "import asyncio\nasync def main():\n    p = await asyncio.create_subprocess_shell(" + cmd + ")\n    await p.wait()\nasyncio.run(main())\n", true},
		{"pickle", "import pickle\npickle.loads(" + pickled + ")\n", false},
		{"pickle through a name", "import pickle\nload = getattr(pickle, 'loads')\nload(" + pickled + ")\n", false},
		{"breakpoint", "import sys, io\nsys.stdin = io.StringIO('import os; os.system(" + strings.ReplaceAll(cmd, "'", `\"`) + ")\\nc\\n')\nbreakpoint()\n", false},
		{"os by a computed name", "import importlib\nimportlib.import_module('o' + 's').system(" + cmd + ")\n", true},
		{"pickle by a computed name", "import importlib\nimportlib.import_module('pick' + 'le').loads(" + pickled + ")\n", true},
		{"a function that forks, reached through a class", "import os\nclass C:\n    f = os.__dict__\nC.f['fo' + 'rk']()\n", false},
	} {
		x := codecell.Exec{Tier: "native", Language: "python", Code: c.code, Policy: policy}
		res, err := engine.Run(context.Background(), &x)
		if err != nil {
			t.Fatal(err)
		}
		// Refused before running by the static checks, where they see it,
		// else when it happens.
		static := res.Status == codecell.StatusBlocked && res.Error != nil && res.Error.Code == codecell.CodeGuardrailBlocked
		runtime := res.Status == codecell.StatusFailure && res.Error != nil && res.Error.Code == codecell.CodePolicyBlocked
		if !static && !runtime {
			t.Errorf("%s: %s", c.name, describe(res))
		}
		if c.runtime && !runtime {
			t.Errorf("%s: refused by the static checks, not at run time as it should be: %s", c.name, describe(res))
		}
		for _, f := range res.Files {
			if f.Path == "marker.txt" {
				t.Errorf("%s: the command ran", c.name)
			}
		}
	}
	// The audit hooks hold on their own: under a policy that blocks
	// process alone, the static checks let through what reaches a process
	// by data (and exec, which only dynamic_eval refuses), and each is
	// refused when it happens.
	processOnly := codecell.Policy{Guard: &codecell.GuardPolicy{Block: []string{"process"}}}
	for _, c := range []struct{ name, code string }{
		{"star import, by exec", "exec('from os import *\\nsystem(' + repr(" + cmd + ") + ')')\n"},
		{"attrgetter", "import os, operator\noperator.attrgetter('sys' + 'tem')(os)(" + cmd + ")\n"},
		{"reduce getattr", "import os, functools\nfunctools.reduce(getattr, ['sys' + 'tem'], os)(" + cmd + ")\n"},
		{"__getattribute__", "import os\nos.__getattribute__('sys' + 'tem')(" + cmd + ")\n"},
		{"pickle", "import pickle\npickle.loads(" + pickled + ")\n"},
		{"breakpoint", "import sys, io\nsys.stdin = io.StringIO('import os; os.system(" + strings.ReplaceAll(cmd, "'", `\"`) + ")\\nc\\n')\nbreakpoint()\n"},
	} {
		res := run(t, codecell.Exec{Policy: processOnly, Code: c.code})
		if res.Status != codecell.StatusFailure || res.Error == nil || res.Error.Code != codecell.CodePolicyBlocked {
			t.Errorf("%s, the run-time layer alone: %s", c.name, describe(res))
		}
		for _, f := range res.Files {
			if f.Path == "marker.txt" {
				t.Errorf("%s, the run-time layer alone: the command ran", c.name)
			}
		}
	}
	// _posixsubprocess starts processes with no audit event: made from its
	// spec, found by a finder or through importlib.util, it is refused as
	// an import of the program's.
	forkExec := "r, w = os.pipe()\nm.fork_exec([b'/bin/sh', b'-c', b" + cmd + "], [b'/bin/sh'], True, (), None, None, -1, -1, -1, -1, -1, -1, r, w, True, False, -1, None, None, None, -1, None, False)\n"
	for _, c := range []struct{ name, code string }{
		{"a built-in module made from its spec", "import importlib.machinery, importlib.util, os\nspec = importlib.machinery.BuiltinImporter.find_spec('_posix' + 'subprocess')\nm = importlib.util.module_from_spec(spec)\n" + forkExec},
		{"a built-in module found by importlib.util", "import importlib.util, os\nspec = importlib.util.find_spec('_posix' + 'subprocess')\nm = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(m)\n" + forkExec},
	} {
		for _, p := range []codecell.Policy{processOnly, policy} {
			res := run(t, codecell.Exec{Policy: p, Code: c.code})
			if res.Status != codecell.StatusFailure || res.Error == nil || res.Error.Code != codecell.CodeModuleBlocked {
				t.Errorf("%s, under %v: %s", c.name, p.Guard.Block, describe(res))
			}
			for _, f := range res.Files {
				if f.Path == "marker.txt" {
					t.Errorf("%s, under %v: the command ran", c.name, p.Guard.Block)
				}
			}
		}
	}
	// A string annotation evaluated by typing is the program's own eval.
	res := run(t, codecell.Exec{Policy: policy, Code: "import typing\ndef f(x: \"open('marker.txt', 'w').write('ran') or int\"): pass\ntyping.get_type_hints(f)\n"})
	if res.Status != codecell.StatusFailure || res.Error == nil || res.Error.Code != codecell.CodePolicyBlocked || !strings.Contains(res.Error.Message, "dynamic_eval") {
		t.Errorf("a string annotation evaluated: %s", describe(res))
	}
	for _, f := range res.Files {
		if f.Path == "marker.txt" {
			t.Errorf("a string annotation evaluated: it ran")
		}
	}
	res = run(t, codecell.Exec{Policy: policy, Code: "import asyncio\ntry:\n    await asyncio.create_subprocess_shell('true')\nexcept PermissionError as e:\n    print(e.event, e.rule, e.envelope['error_code'], e.envelope['_meta'])\n'went on'\n"})
	if res.Status != codecell.StatusSuccess || !strings.Contains(res.Stdout, "subprocess.Popen process.runtime SANDBOX_POLICY_BLOCKED {'event': 'subprocess.Popen', 'rule': 'process.runtime'}") {
		t.Errorf("a caught refusal: %s", describe(res))
	}
	res = run(t, codecell.Exec{Policy: policy, Code: "import dataclasses, collections, asyncio, json\n@dataclasses.dataclass\nclass P:\n    x: int\nT = collections.namedtuple('T', 'a b')\nasync def f():\n    await asyncio.sleep(0)\n    return json.dumps([P(1).x, T(2, 3).b])\nawait f()\n"})
	if res.Status != codecell.StatusSuccess || string(res.Value) != `"[1, 3]"` {
		t.Errorf("an ordinary program under the policy: %s", describe(res))
	}
}

// attackNodePermissions: under a policy that blocks process, a JavaScript
// program that reaches child_process by a way the static checks cannot
// follow (eval of a built name, which dynamic_eval would refuse, but this
// policy does not block) is refused by node's permission model when it
// starts the process: SANDBOX_POLICY_BLOCKED, no marker, and the Result
// says which runtime layer applied.
func attackNodePermissions(t *testing.T) {
	requireNative(t)
	policy := codecell.Policy{Guard: &codecell.GuardPolicy{Block: []string{"process"}}}
	res := run(t, codecell.Exec{Language: "javascript", Policy: policy,
		Code: "const r = eval('req' + 'uire');\nr('child_' + 'process').execSync('echo ran > marker.txt');\n"})
	if res.Status != codecell.StatusFailure || res.Error == nil || res.Error.Code != codecell.CodePolicyBlocked {
		t.Errorf("child_process under the permission model: %s", describe(res))
	}
	for _, f := range res.Files {
		if f.Path == "marker.txt" {
			t.Error("the command ran")
		}
	}
	if !strings.Contains(res.Isolation.Runtime, "node permission model") {
		t.Errorf("isolation.runtime = %q", res.Isolation.Runtime)
	}
	// Ordinary programs still run under it, requiring built-in modules.
	res = run(t, codecell.Exec{Language: "javascript", Policy: policy, Code: "const path = require('path');\npath.join('a', 'b')\n"})
	if res.Status != codecell.StatusSuccess || string(res.Value) != `"a/b"` {
		t.Errorf("an ordinary program under the permission model: %s", describe(res))
	}
}
