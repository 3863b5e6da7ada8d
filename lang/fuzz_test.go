package lang

import (
	"slices"
	"strings"
	"testing"

	"github.com/dop251/goja/parser"
)

// FuzzCheckNesting: the scan reads anything in one pass, and a refusal
// points inside the program.
func FuzzCheckNesting(f *testing.F) {
	for _, s := range []string{
		strings.Repeat("!", 300_000) + "1",
		strings.Repeat("{", 6000) + strings.Repeat("}", 6000),
		strings.Repeat("if (a) ", 2000) + "x;",
		"f = " + strings.Repeat("x => ", 2000) + "1",
		"s = `${`${a}`}` + /[(]/.source + '(' // (",
		"echo \"$(ls '(' \"${x}\")\" # (",
		strings.Repeat("(", 600) + "true" + strings.Repeat(")", 600),
		"\xff\xfe`${",
		"x" + strings.Repeat(" = x", 2000),
		"x = 1" + strings.Repeat(" ? 1 : 1", 2000),
		"a ??= b?.c ?? d?.5:1; e **= 2 ** 3",
		"x = " + strings.Repeat("a,", 2000) + "a",
		strings.Repeat("a: ", 400) + "x",
		"switch (x) { case 1: { a, b } default: {c: 1} }; l: { a, b }; var c = {d: [e, f]}, g",
	} {
		f.Add(uint8(0), s)
		f.Add(uint8(2), s)
	}
	names := []string{"javascript", "typescript", "bash", "sh"}
	f.Fuzz(func(t *testing.T, which uint8, code string) {
		l := Lookup(names[int(which)%len(names)])
		err := l.CheckNesting(code)
		if err == nil {
			return
		}
		lines := strings.Count(code, "\n") + 1
		if err.Line < 1 || err.Line > lines || err.Column < 1 || err.What == "" {
			t.Fatalf("%+v in a program of %d lines", err, lines)
		}
	})
}

// FuzzTranspile: esbuild, as Prepare runs it on a program CheckNesting
// lets through, answers with a module, a syntax error or an output error,
// never a panic, and its output stays within bounds. Inputs are kept small:
// what only size can break is for the worker that runs it (see
// internal/isolate).
func FuzzTranspile(f *testing.F) {
	for _, s := range []string{
		"const x = 1;\nx",
		"import {a} from 'b'\nexport default a\nawait a",
		"let n: number = <number>(1 as any);\nenum E {A}\nn",
		strings.Repeat("{", 200) + "x;" + strings.Repeat("}", 200),
		strings.Repeat("!", 3000) + "1",
		"f = " + strings.Repeat("x => ", 100) + "1",
		"return 1\n}\nfunction g() {",
		"`${`",
		// Top-level namespaces take the two-pass path (lowerNamespaces).
		"namespace N { export const a = 1 }\nN.a",
		"export namespace A { export namespace B { export const k = 2 } }\nmodule M { export const v = 'x' }\ndeclare global { interface W { z: number } }\nA.B.k",
		"namespace N {\nreturn 1\n}",
	} {
		f.Add(false, s)
		f.Add(true, s)
	}
	f.Fuzz(func(t *testing.T, typescript bool, code string) {
		if len(code) > 4096 {
			return
		}
		l := Lookup("javascript")
		if typescript {
			l = Lookup("typescript")
		}
		if l.CheckNesting(code) != nil {
			return
		}
		js, syn, err := Transpile(code, l.DefaultFilename(), typescript)
		if err == nil && syn == nil && len(js) > 64<<20 {
			t.Fatalf("%d bytes of output for %d of input", len(js), len(code))
		}
		if syn != nil && (syn.Line < 1 || syn.Column < 1) {
			t.Fatalf("%+v", syn)
		}
	})
}

// FuzzLiveDeclarations: a live session's cell, as the transpiler leaves
// it, has its declarations made globals without a panic, without moving a
// line, and, when it parsed before, into a program that still parses.
func FuzzLiveDeclarations(f *testing.F) {
	for _, s := range []string{
		"const a = 1, {b, c: [d, ...e]} = f(), [g = 2] = h;\nlet i;\nvar j;\nfunction k() { return a }\nclass L {}\nk()",
		"const os = await import('node:os')\nif (os) return typeof os.EOL\n'no'",
		"let π\nconst s = 'é';\n`${π}${s}`",
		"using x = f()\nfor await (const y of z) {}",
		"class A { #p = 1; static { } }\nconst b = new A()",
		"label: for (;;) { break label }\nconst z = /[/]/g\nz",
	} {
		f.Add(s, false)
		f.Add("type T = number\n"+s, true)
	}
	f.Fuzz(func(t *testing.T, code string, typescript bool) {
		if len(code) > 4096 || Lookup("javascript").CheckNesting(code) != nil {
			return
		}
		js, syn, err := Transpile(code, "main.js", typescript)
		if err != nil || syn != nil {
			return
		}
		out, _, err := liveDeclarations(js)
		if strings.Count(out, "\n") != strings.Count(js, "\n") {
			t.Fatalf("the lines moved:\n%s\n%s", js, out)
		}
		if err == nil && out != js {
			if _, err := parser.ParseFile(nil, "", dynamicImportRE().ReplaceAllString(out, "$$mport$1"), parser.IgnoreRegExpErrors, parser.WithDisableSourceMaps); err != nil {
				t.Fatalf("the rewrite broke the program (%v):\n%s", err, out)
			}
		}
	})
}

// FuzzPlainCell: a cell plainCell takes is taken without a panic, keeps
// its lines, still parses (plainCell checks that), and binds every global
// esbuild's way would bind (at times more: that way leaves a declaration
// it cannot place local to its cell).
func FuzzPlainCell(f *testing.F) {
	for _, s := range plainCells {
		f.Add(s)
	}
	for _, s := range []string{
		"const a = new Map()\nlet b = new K\nvar c = (1 + 2)\nc",
		"x = new A()()\nnew B() + new C()",
		"let {p = new P(), ...q} = r\nconst [s, , t] = u, v = () => new W()",
		"if (a) b\nelse c\nd++",
		"const f = async () => { await g() }\nf",
		"class A { #p = 1; static { } }\nconst b = new A()",
		"// only a comment",
		"/* a */ const x = 1 /* b */ ; /* c */ x /* d */",
		"const é = 'ü'; é\n",
		"x\n++y",
		"a = b\n(c)",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, code string) {
		if len(code) > 4096 || Lookup("javascript").CheckNesting(code) != nil {
			return
		}
		cell, ok := plainCellOf(code, "main.js")
		if !ok {
			return
		}
		program, _, _ := strings.Cut(cell.Code, "\nmodule.exports = ")
		if strings.Count(program, "\n") != strings.Count(code, "\n")+1 {
			t.Fatalf("the lines moved:\n%s\n%s", code, program)
		}
		js, syn, err := Transpile(code, "main.js", false)
		if err != nil || syn != nil {
			return
		}
		_, names, err := liveDeclarations(js)
		if err != nil {
			return
		}
		for _, n := range names {
			if !slices.Contains(cell.Globals, n) {
				t.Fatalf("globals %q, esbuild's way %q:\n%s", cell.Globals, names, code)
			}
		}
	})
}
