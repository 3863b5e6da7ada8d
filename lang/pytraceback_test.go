package lang_test

import (
	"strings"
	"testing"
)

// A program's failure is reported by Python itself (sys.__excepthook__, no
// import) when its source came from a file, and by the traceback module
// otherwise (a live session's cell). Both must print the same, byte for
// byte, and send the same record: the first is only the cheaper.
func TestPythonFailureReportsAgree(t *testing.T) {
	checkInRunner(t, "Python's report and the traceback module's differ", `
import io, os, tempfile

class NoTools:
    call = call_sync = None

programs = {
    "raise.py": "raise ValueError('no')\n",
    "divide.py": "x = 1\ny = 0\nprint(x / y)\n",
    "calls.py": "def f():\n    return g()\n\ndef g():\n    return {}['k']\n\nf()\n",
    "cause.py": "try:\n    1 / 0\nexcept Exception as e:\n    raise KeyError('x') from e\n",
    "context.py": "try:\n    [][1]\nexcept IndexError:\n    undefined_name\n",
    "recursion.py": "def r(n):\n    return r(n + 1)\n\nr(0)\n",
    "notes.py": "e = ValueError('a')\ne.add_note('a note')\nraise e\n",
    "group.py": "raise ExceptionGroup('g', [ValueError(1), TypeError('two')])\n",
    "badstr.py": "class E(Exception):\n    def __str__(self):\n        raise RuntimeError\n\nraise E()\n",
    "syntax.py": "x = (\n",
    "syntax2.py": "def f(:\n    pass\n",
    "inner.py": "compile('1 +', 'inner', 'exec')\n",
    "stdlib.py": "import json\njson.loads('{')\n",
    "wide.py": "s = 'héllo 中文'\ns.nope()\n",
    "tabs.py": "if True:\n\tx = [1][\t5]\n",
    "await.py": "import asyncio\nawait asyncio.sleep(0)\nraise RuntimeError('after await')\n",
    "interrupt.py": "raise KeyboardInterrupt\n",
    "custom.py": "class Oops(Exception):\n    pass\n\ndef deep(n):\n    if n == 0:\n        raise Oops('bottom')\n    deep(n - 1)\n\ndeep(3)\n",
    "chain3.py": "try:\n    try:\n        int('x')\n    except ValueError as e:\n        raise TypeError('t') from None\nexcept TypeError:\n    raise OSError(2, 'gone')\n",
    "long.py": "value = " + "1 + " * 60 + "None\n",
    "shadow.py": "open('shadow.py', 'w').write('nothing = 0\\n' * 5)\nraise ValueError('the real line')\n",
    "chdir.py": "import os\nos.chdir('/')\nraise ValueError('elsewhere')\n",
    "thread.py": "import threading\nhold = threading.Event()\nthreading.Thread(target=hold.wait, daemon=True).start()\nraise ValueError('with a thread running')\n",
    "nested.py": "try:\n    raise ExceptionGroup('outer', [ExceptionGroup('inner', [KeyError('k')]), ValueError('v')])\nexcept* KeyError as g:\n    raise RuntimeError('handled') from g\n",
}
bad = 0
ws = tempfile.mkdtemp()
src_dir = tempfile.mkdtemp()
os.chdir(ws)  # as the sandbox runs a program: in its workspace
# The report changes the working directory only when no other thread
# runs: one that did would see it change under it.
chdirs = []
real_chdir = os.chdir
def chdir(path):
    if path == src_dir:  # the report's, not this script's own
        chdirs.append((path, threading.active_count()))
    real_chdir(path)
os.chdir = chdir
import threading
for filename, src in programs.items():
    path = os.path.join(src_dir, filename)
    with open(path, "w") as f:
        f.write(src)
    outs = []
    for source in (path, None):
        ns["_SOURCE"] = source
        mod, hooks = ns["_program_module"](ws, filename, NoTools())
        records = []
        saved = sys.stderr
        sys.stderr = io.StringIO()
        try:
            status = ns["_execute"](src, filename, None, False, mod, hooks, 1 << 20, records.append, None)
        finally:
            err, sys.stderr = sys.stderr.getvalue(), saved
            sys.meta_path.remove(hooks)
            if "hold" in mod.__dict__:
                mod.__dict__["hold"].set()
            os.chdir(ws)
        outs.append((status, err, records))
    if filename == "shadow.py":
        outs_shadow = outs[0][1]
    if outs[0] != outs[1]:
        bad += 1
        print("DIFFER", filename)
        print("python's:", ascii(outs[0]))
        print("module's:", ascii(outs[1]))
    elif not outs[0][1].strip() or outs[0][0] != 1:
        bad += 1
        print("NO REPORT", filename, ascii(outs[0]))
if any(n > 1 for _, n in chdirs):
    bad += 1
    print("CHDIR WITH A THREAD RUNNING", chdirs)
if not any(path == src_dir for path, _ in chdirs):
    bad += 1
    print("NO CHDIR", chdirs)
if "raise ValueError('the real line')" not in outs_shadow:
    bad += 1
    print("SHADOWED", ascii(outs_shadow))
print("checked", len(programs), "bad", bad)
`)
}

// A program that fails, or does not compile, imports neither traceback nor
// re to say so, when its source came from a file.
func TestPythonFailureImportsNoTraceback(t *testing.T) {
	needPython(t)
	for _, code := range []string{"raise ValueError('no')", "x = (", "def f():\n    return 1 / 0\n\nf()"} {
		r := runPython(t, code, pyOptions{pyFlags: []string{"-X", "importtime"}})
		if r.exit != 1 || r.rec.Error == nil {
			t.Fatalf("%q: exit %d, record %+v, stderr:\n%s", code, r.exit, r.rec, r.stderr)
		}
		for _, line := range strings.Split(r.stderr, "\n") {
			if strings.HasPrefix(line, "import time:") {
				if name := strings.TrimSpace(line[strings.LastIndex(line, "|")+1:]); name == "traceback" || name == "re" || name == "linecache" {
					t.Errorf("%q: the runner imported %s", code, name)
				}
			}
		}
		if !strings.Contains(r.stderr, "Error") {
			t.Errorf("%q: no report on stderr:\n%s", code, r.stderr)
		}
	}
	r := runPython(t, "def f():\n    return 1 / 0\n\nf()", pyOptions{})
	want := "Traceback (most recent call last):\n  File \"main.py\", line 4, in <module>\n    f()\n  File \"main.py\", line 2, in f\n    return 1 / 0\n           ~~^~~\nZeroDivisionError: division by zero\n"
	if r.stderr != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", r.stderr, want)
	}
	if r.rec.Error == nil || r.rec.Error.Line != 2 {
		t.Errorf("record %+v, want line 2", r.rec.Error)
	}
}
