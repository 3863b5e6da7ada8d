package lang_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The runner writes a program's value, and its own records, with an encoder
// of its own (_dumps) rather than json's, whose import costs a run more
// than the encoding. What it writes must be what json.dumps writes, byte
// for byte: the value reaches the caller as those bytes.
func TestPythonDumpsIsJSONs(t *testing.T) {
	checkInRunner(t, "the runner's encoder and json.dumps differ", `
import json, random
dumps, Costly = ns["_dumps"], ns["_Costly"]

class S(str):
    def translate(self, *a): return "subclass method ran"
    def isprintable(self): return True
    def __contains__(self, x): return False
    def __radd__(self, x): return "subclass method ran"
    def __str__(self): return "subclass method ran"

class I(int):
    def __repr__(self): return "subclass method ran"

rng = random.Random(1)
def rand_str():
    pools = [range(0, 0x80), range(0, 0x20), range(0x80, 0x800), range(0xd800, 0xe000), range(0x2000, 0x2100), range(0x1f600, 0x1f650)]
    return "".join(chr(rng.choice(rng.choice(pools))) for _ in range(rng.randrange(0, 12)))
def rand_val(depth=0):
    k = rng.randrange(10 if depth < 4 else 6)
    if k == 0: return None
    if k == 1: return rng.choice([True, False])
    if k == 2: return rng.choice([0, -1, 2**63, -2**70, rng.randrange(-10**9, 10**9)])
    if k == 3: return rng.choice([0.0, -0.0, 1.5, 1e300, -1e-300, 5e-324, 0.1, rng.uniform(-1e9, 1e9), 1e16, 123456789.0])
    if k in (4, 5): return rand_str()
    if k in (6, 7): return [rand_val(depth + 1) for _ in range(rng.randrange(4))]
    return {rand_str(): rand_val(depth + 1) for _ in range(rng.randrange(4))}

cases = [None, True, False, 0, 1, -1, 3.25, "", "plain", 'a"b\\c', "\x00\x1f\x7f\b\f\n\r\t", "é中\u2028\xa0",
         [], {}, [[[]]], {"": {"": []}}, {"k": [1, 2.5, "x\ny", None, True]}, S("wrapped"), [S('q"uote')], {S("key"): I(7)}, I(42)]
cases += [rand_val() for _ in range(3000)]
bad = 0
for v in cases:
    try:
        want = json.dumps(v, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError):
        want = None
    try:
        got = dumps(v)
    except TypeError:
        got = "TypeError"
    if isinstance(v, dict) and any(type(k) is not str for k in v):
        want = "TypeError"  # json converts a subclass key; _dumps leaves it to json
    if got != want:
        bad += 1
        print("MISMATCH", ascii(v), ascii(got), ascii(want))
for v in [float("nan"), float("inf"), [float("-inf")]]:
    try:
        dumps(v)
        print("MISMATCH no ValueError for", v); bad += 1
    except ValueError:
        pass
for v in [{1: 2}, (1, 2), {"a": {1, 2}}, b"x", object()]:
    try:
        dumps(v)
        print("MISMATCH no TypeError for", ascii(v)); bad += 1
    except TypeError:
        pass
for v in [list(range(100000)), "\n" * 100000]:
    try:
        dumps(v)
        print("MISMATCH no _Costly for", len(v)); bad += 1
    except Costly:
        pass
print("checked", len(cases), "bad", bad)
`)
}

// checkInRunner runs script with the runner's source loaded as a fork
// server's template loads it, its names in ns, and fails t, saying what,
// unless the script's last line ends " bad 0".
func checkInRunner(t *testing.T, what, script string) {
	t.Helper()
	needPython(t)
	const load = `
import sys
ns = {"__name__": "__codecell_template__", "__builtins__": __builtins__}
exec(compile(open(sys.argv[1]).read(), "runner.py", "exec"), ns)
`
	out, err := exec.Command(python3, "-I", "-c", load+script, "runner/python.py").CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !strings.HasSuffix(string(out), " bad 0\n") {
		t.Fatalf("%s:\n%s", what, out)
	}
}

// A program that returns a value imports neither json nor re for it, nor
// one that fails json (its traceback needs re): their import costs more
// than the program's own start.
func TestPythonValueImportsNoJSON(t *testing.T) {
	needPython(t)
	for _, code := range []string{
		"{'squares': [n * n for n in range(5)], 'text': 'a\"b\\n', 'x': 1.5, 'none': None}",
		"raise ValueError('no')",
		"x = 1",
	} {
		r := runPython(t, code, pyOptions{pyFlags: []string{"-X", "importtime"}})
		for _, line := range strings.Split(r.stderr, "\n") {
			if strings.HasPrefix(line, "import time:") {
				name := strings.TrimSpace(line[strings.LastIndex(line, "|")+1:])
				if name == "json" || name == "re" && !strings.HasPrefix(code, "raise") {
					t.Errorf("%s: the runner imported %s", code, name)
				}
			}
		}
		if !strings.Contains(r.stderr, "import time:") {
			t.Fatalf("%s: no import times on stderr: %s", code, r.stderr)
		}
	}
	r := runPython(t, "{'squares': [n * n for n in range(5)], 'text': 'a\"b\\n', 'x': 1.5, 'none': None}", pyOptions{})
	if got, want := r.value(t), `{"squares":[0,1,4,9,16],"text":"a\"b\n","x":1.5,"none":null}`; got != want {
		t.Errorf("value %s, want %s", got, want)
	}
	if r := runPython(t, "list(range(100000))", pyOptions{}); !strings.HasPrefix(r.value(t), "[0,1,2,") {
		t.Errorf("a large value came back as %.40s", r.value(t))
	}
}
