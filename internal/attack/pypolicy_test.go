package attack_test

import (
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
	for _, c := range []struct{ name, code string }{
		{"star import", "from os import *\nsystem(" + cmd + ")\n"},
		{"attrgetter", "import os, operator\noperator.attrgetter('sys' + 'tem')(os)(" + cmd + ")\n"},
		{"reduce getattr", "import os, functools\nfunctools.reduce(getattr, ['sys' + 'tem'], os)(" + cmd + ")\n"},
		{"__getattribute__", "import os\nos.__getattribute__('sys' + 'tem')(" + cmd + ")\n"},
		{"asyncio subprocess", "import asyncio\nasync def main():\n    p = await asyncio.create_subprocess_shell(" + cmd + ")\n    await p.wait()\nasyncio.run(main())\n"},
		{"pickle", "import pickle\npickle.loads(" + pickled + ")\n"},
		{"breakpoint", "import sys, io\nsys.stdin = io.StringIO('import os; os.system(" + strings.ReplaceAll(cmd, "'", `\"`) + ")\\nc\\n')\nbreakpoint()\n"},
	} {
		res := run(t, codecell.Exec{Code: c.code, Policy: policy})
		if res.Status != codecell.StatusFailure || res.Error == nil || res.Error.Code != codecell.CodePolicyBlocked {
			t.Errorf("%s: %s", c.name, describe(res))
		}
		for _, f := range res.Files {
			if f.Path == "marker.txt" {
				t.Errorf("%s: the command ran", c.name)
			}
		}
	}
	res := run(t, codecell.Exec{Policy: policy, Code: "import os, operator\ntry:\n    operator.attrgetter('sys' + 'tem')(os)('true')\nexcept PermissionError as e:\n    print(e.event, e.rule)\n'went on'\n"})
	if res.Status != codecell.StatusSuccess || !strings.Contains(res.Stdout, "os.system process.runtime") {
		t.Errorf("a caught refusal: %s", describe(res))
	}
	res = run(t, codecell.Exec{Policy: policy, Code: "import dataclasses, collections, asyncio, json\n@dataclasses.dataclass\nclass P:\n    x: int\nT = collections.namedtuple('T', 'a b')\nasync def f():\n    await asyncio.sleep(0)\n    return json.dumps([P(1).x, T(2, 3).b])\nawait f()\n"})
	if res.Status != codecell.StatusSuccess || string(res.Value) != `"[1, 3]"` {
		t.Errorf("an ordinary program under the policy: %s", describe(res))
	}
}
