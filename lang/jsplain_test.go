package lang

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// plainCells are cells plainCell prepares itself: each runs, in node, to
// the same value, globals and error line as the cell esbuild prepares.
var plainCells = []string{
	"x = 1\nx + 1",
	"const rows = [1, 2, 3]\nlet total = 0\nfunction add(x) { total += x; return total }\nclass Box { constructor(v) { this.v = v } }\nrows.length",
	"add(5) + new Box(2).v + total",
	"let a, b = 2\na === undefined ? b : 0",
	"const {p, q: [r]} = {p: 1, q: [2]}\np + r",
	"var v\nv === undefined",
	"var w = 3;;\nw",
	"// a comment\nconst s = 'é😀'; s.length /* trailing */",
	"if (true) { 1 }",
	"\n\nthrow new Error('boom')",
	"const q = 1\n  null.foo",
	"const t = 'é😀'; null.bar",
	"const a1 = 1; const b1 = 2; a1 + b1",
	"await Promise.resolve(5)",
	"const os = await import('node:os')\ntypeof os.EOL",
	"import path from 'node:path'\npath.basename('/a/b.txt')",
	"#!/usr/bin/env node\n1 + 1",
	"let z\nz",
	"class C {}\nnew C() instanceof C",
	"function f() { return 1 }\nf() + g()\nfunction g() { return 2 }",
	"for (let i = 0; i < 3; i++) {}\n'done'",
	"`a${1}b`",
	"[1, 2].map((v) => v * 2)",
	"const o = {k: 1}\no",
	"const fn = () => {\n  throw new TypeError('deep')\n}\nfn()",
	"let m = 1\nm++\nm",
	"const big = 10n ** 20n\nString(big)",
	"label: for (const k of [1]) { break label }\n'ok'",
}

func TestPlainCellSameAsTranspiled(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("no node on PATH")
	}
	var plain, long []string
	for _, code := range plainCells {
		p, ok := plainCell(code, "cell.js")
		if !ok {
			t.Fatalf("plainCell refused %q", code)
		}
		js, syn, err := Transpile(code, "cell.js", false)
		if err != nil || syn != nil {
			t.Fatalf("%q: %v %v", code, err, syn)
		}
		out, names, err := liveDeclarations(js)
		if err != nil {
			t.Fatalf("%q: %v", code, err)
		}
		if !reflect.DeepEqual(p.Globals, names) && !(len(p.Globals) == 0 && len(names) == 0) {
			t.Errorf("%q: globals %q, the long way %q", code, p.Globals, names)
		}
		plain = append(plain, globalsFirst(p.Globals)+p.Code)
		long = append(long, globalsFirst(names)+out)
	}
	a, b := runCells(t, node, plain), runCells(t, node, long)
	for i := range plainCells {
		if a[i] != b[i] {
			t.Errorf("%q:\n plain %s\n  long %s", plainCells[i], a[i], b[i])
		}
	}
}

// globalsFirst defines the names as the runner does before a cell, on a
// line of its own before the cell's first line: the cell's source map,
// which starts with its first line, then lines up with the program's line
// numbers once the harness removes that line (see runCells).
func globalsFirst(names []string) string {
	var b strings.Builder
	for _, n := range names {
		b.WriteString("if (!('" + n + "' in globalThis)) globalThis['" + n + "'] = undefined; ")
	}
	return b.String() + "\n"
}

// runCells runs prepared cells one after another in one node, as a live
// session does, and returns what each gave: its value, or its error and
// the user's line it points at.
func runCells(t *testing.T, node string, cells []string) []string {
	t.Helper()
	dir := t.TempDir()
	raw, _ := json.Marshal(cells)
	if err := os.WriteFile(filepath.Join(dir, "cells.json"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	script := `
const __Module = require('module'), __path = require('path'), __util = require('util');
const __cells = JSON.parse(require('fs').readFileSync(process.argv[1], "utf8"));
(async () => {
  for (let i = 0; i < __cells.length; i++) {
    const cells = __cells;
    const where = __path.join(process.argv[2], 'cells', String(i), 'program.js');
    let out;
    try {
      const m = new __Module(where, module);
      m.filename = where;
      const nl = cells[i].indexOf('\n');
      (0, eval)(cells[i].slice(0, nl));
      m._compile(cells[i].slice(nl + 1), where);
      const v = await m.exports(require, (s) => import(s), where, process.argv[2], null, null);
      out = 'value ' + __util.inspect(v);
    } catch (e) {
      const at = /src\/cell\.js:(\d+):(\d+)/.exec(String(e.stack));
      out = 'error ' + e.name + ': ' + e.message + (at ? ' at line ' + at[1] : ' at no line');
    }
    console.log(JSON.stringify(out));
  }
})();
`
	out, err := exec.Command(node, "--enable-source-maps", "-e", script, filepath.Join(dir, "cells.json"), dir).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var s string
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		got = append(got, s)
	}
	if len(got) != len(cells) {
		t.Fatalf("%d answers for %d cells: %s", len(got), len(cells), out)
	}
	return got
}

// Cells plainCell leaves to esbuild: it says so, and Cell still prepares
// them.
func TestPlainCellDeclines(t *testing.T) {
	for _, code := range []string{
		"const = 1",
		"@dec class A {}",
		"let x: number = 1",
		"x = 1 +",
		"using r = f()",
	} {
		if _, ok := plainCell(code, "cell.js"); ok {
			t.Errorf("plainCell took %q", code)
		}
	}
}

// A cell's error points at the line and column node gives for the same
// code run as a script of its own, after edits on its line and characters
// that take two UTF-16 units.
func TestPlainCellColumns(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("no node on PATH")
	}
	for _, code := range []string{
		"const s = '😀'; null.x",
		"let u = 1;   undefined.y",
		"var é = 2\nclass K {}; const k = new K(); k.m()",
		"const a = 1, b = [a]\n  b.c.d",
	} {
		p, ok := plainCell(code, "cell.js")
		if !ok {
			t.Fatalf("refused %q", code)
		}
		got := runCellsAt(t, node, globalsFirst(p.Globals)+p.Code)
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "src"), 0o755); err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(dir, "src", "cell.js")
		if err := os.WriteFile(file, []byte(code), 0o600); err != nil {
			t.Fatal(err)
		}
		out, _ := exec.Command(node, file).CombinedOutput()
		want := regexp.MustCompile(`src/cell\.js:(\d+:\d+)`).FindStringSubmatch(string(out))
		if want == nil {
			t.Fatalf("%q: no position in %s", code, out)
		}
		if got != want[1] {
			t.Errorf("%q: at %s, as a script at %s", code, got, want[1])
		}
	}
}

// runCellsAt runs one prepared cell and returns the line:column its error
// points at.
func runCellsAt(t *testing.T, node, cell string) string {
	t.Helper()
	dir := t.TempDir()
	where := filepath.Join(dir, "cells", "0", "program.js")
	script := `
const Module = require('module');
const [cell, where] = [process.argv[1], process.argv[2]];
const nl = cell.indexOf('\n');
(0, eval)(cell.slice(0, nl));
const m = new Module(where, module);
m.filename = where;
m._compile(cell.slice(nl + 1), where);
m.exports(require, null, where, '', null, null).then(() => console.log('none'), (e) => {
  const at = /src\/cell\.js:(\d+:\d+)/.exec(String(e.stack));
  console.log(at ? at[1] : String(e.stack));
});
`
	out, err := exec.Command(node, "--enable-source-maps", "-e", script, cell, where).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return strings.TrimSpace(string(out))
}
