package lang

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestCheckNesting(t *testing.T) {
	rep := strings.Repeat
	const deep = MaxNesting + 1
	comma := fmt.Sprintf("a comma expression of more than %d parts", MaxSequence)
	angles := fmt.Sprintf("more than %d < after names without a matching > in one expression (in TypeScript each may open type arguments)", MaxAngles)
	redeclared := fmt.Sprintf("more than %d declarations of names declared before in the same scope (each a syntax error: declare a name once)", MaxRedeclared)
	cases := []struct {
		name, lang, code string
		what             string // "" when the program must pass
		line, col        int
	}{
		// Programs people and models write pass.
		{name: "plain", lang: "javascript", code: "const x = [1, {a: (2 + 3)}];\nconsole.log(x)\n"},
		{name: "nested to the limit", lang: "javascript", code: rep("(", MaxNesting) + "1" + rep(")", MaxNesting)},
		{name: "many siblings", lang: "javascript", code: rep("f((a) => a + 1, [1, 2], {b: 3});\n", 2000)},
		{name: "minified callbacks", lang: "javascript", code: "x" + rep(".map(a=>b=>a+b).filter(c=>!c)", 500)},
		{name: "else if chain", lang: "javascript", code: "if (a) {}" + rep(" else if (a) { x++ }", 2000)},
		{name: "ifs without semicolons", lang: "javascript", code: rep("if (a) b()\n", 2000)},
		{name: "arrows in a list", lang: "javascript", code: "const fs = [" + rep("x => x, ", 2000) + "]"},
		{name: "curried", lang: "typescript", code: "const add = (a: number) => (b: number) => (c: number) => a + b + c"},
		{name: "brackets in strings", lang: "javascript", code: "s = '" + rep("(", 1000) + "' + \"" + rep("[", 1000) + "\" + `" + rep("{", 1000) + "`"},
		{name: "brackets in comments", lang: "javascript", code: "// " + rep("(", 1000) + "\n/* " + rep("{", 1000) + " */ x"},
		{name: "brackets in a regex", lang: "javascript", code: "r = /" + rep(`\(`, 1000) + "/g; q = /[(]/ ;" + rep("s.replace(/[(]/g, '');\n", 500)},
		{name: "division", lang: "javascript", code: rep("a = b / c / (d) / 2;\n", 1000)},
		{name: "template substitutions", lang: "javascript", code: rep("s = `a ${b} c ${`d ${e}`}`;\n", 1000)},
		{name: "negative numbers", lang: "javascript", code: "x = [" + rep("-1, ", 2000) + "]"},
		{name: "double negation", lang: "javascript", code: rep("y = !!x && !x || - -z;\n", 1000)},
		{name: "shell script", lang: "bash", code: rep("if [ -f a ]; then echo \"$(ls \"$(pwd)\")\"; fi\nfor i in 1 2; do (cd /; echo ${i}); done\n", 500)},
		{name: "shell case", lang: "bash", code: "case $x in\n" + rep("a) echo a;;\n", 1000) + "esac\n"},
		{name: "shell quotes", lang: "sh", code: "echo '" + rep("(", 1000) + "' \"" + rep("{", 1000) + "\" \\( # " + rep("(", 1000) + "\n"},
		{name: "assignments without semicolons", lang: "javascript", code: rep("a = b\nc += 1\nd = e ? f : g\nh = 2 ** 3\n", 1000)},
		{name: "assignments on one line", lang: "javascript", code: rep("a = 1; b = c ? d : e; ", 1000) + rep("f(x = 1, y = 2), ", 1000)},
		{name: "comparisons", lang: "javascript", code: "if (" + rep("a <= b && c >= d && e != f && g == h && i === j && k !== l && ", 500) + "m) {}"},
		{name: "optional chaining and nullish", lang: "javascript", code: "x = a" + rep("?.b ?? c", 2000) + "; y = z?.5:1"},
		{name: "optional properties", lang: "typescript", code: "interface A {\n" + rep("  a?: string\n  b?: number;\n", 1000) + "}"},
		{name: "object of defaults", lang: "javascript", code: "var {" + rep("a = 1, ", 2000) + "} = o\nfunction f(" + rep("b = 2, ", 2000) + ") {}"},
		{name: "names declared once in each scope", lang: "javascript", code: rep("function f() { let a = 1; const b = 2; class C {} }\n{ let a; }\nfor (let i = 0; i < 1; i++) {}\n", 2000) +
			"class D { get #p() { return 1 }\nset #p(v) {}\n" + rep("m() { return this.#p }\nx = this.#p; y = a?.#p;\n", 100) + "}\n" + rep("o = {__proto__: null};\n", 1000)},
		{name: "words after keywords", lang: "typescript", code: rep("import type { T } from 'a';\nconst enum E { A }\nexport default class {}\nimport a from 'a'; let x = class extends B {}\n", 1) +
			rep("function g() { import('m'); const [p, q] = r; let {s, t} = u }\n", 1000)},
		{name: "destructuring", lang: "javascript", code: rep("function f() { const {a, b: [c, d = e], ...g} = h; let [i, , j = k ? l : m] = n; }\n", 1000) + "const {" + rep("p = q, ", 1) + "r = q, s = q} = t"},
		{name: "generics and comparisons", lang: "typescript", code: rep("function h() { const m: Map<string, Array<Set<number>>> = new Map<string, Array<Set<number>>>() }\nfor (let i = 0; i < n && j < k; i++) { if (a < b || c <= d || e << 2 > f) g<T>(h) }\n", 2000) +
			"enum E {" + rep("A = 1 << 2, ", 1) + "B, C}\nclass D {" + rep("@d() m() {}\n", 200) + "}\n" + rep("function k() { @e class F { @g x = 1 } }\n", 1000)},
		{name: "python is not read here", lang: "python", code: rep("(", 1000)},
		{name: "a condition of many comparisons", lang: "javascript", code: "if (" + rep("x < y || ", 2000) + "z) {}\nok = " + rep("a < 1 && ", 2000) + "true"},
		{name: "a condition of some comparisons", lang: "typescript", code: "if (" + rep("x < y || ", 60) + "z) {}"},
		{name: "labels in loops", lang: "javascript", code: rep("outer: for (const a of b) {\n  inner: for (const c of d) { if (c) continue outer; else break inner }\n}\n", 1000)},
		{name: "cases", lang: "javascript", code: "switch (x) {\n" + rep("case 1: case 'a': case b: f(); break;\n", 2000) + "default: g()\n}"},
		{name: "keys and types", lang: "typescript", code: rep("{ const o: T = {a: 1, b: c ? d : e, f: {g: h}} }\nfunction k(l: number, m: string): void {}\n", 1000)},
		{name: "long lists", lang: "javascript", code: "f(" + rep("a, ", 5000) + ");\nconst xs = [" + rep("1, ", 50_000) + "], o = {" + rep("k: 1, ", 20_000) + "};\n" +
			"var " + rep("v = 1, ", 5000) + "w;\nfor (let i = 0, " + rep("j = 0, ", 2000) + "k = 0; i < 1; i++) {}\nvar {" + rep("p, ", 3000) + "} = o"},
		{name: "long lists in blocks", lang: "javascript", code: "function g() {\n  return {" + rep("k: 1, ", 3000) + "}\n}\nclass A { m() { return [" + rep("1, ", 3000) + "] } }\n" +
			"switch (x) { case 1: f({" + rep("a: 1, ", 3000) + "}); default: g([" + rep("1, ", 3000) + "]) }\nx = y ? {" + rep("a: 1, ", 2000) + "} : {}"},
		{name: "minified sequences", lang: "javascript", code: rep("function f(a){return a&&("+rep("b=a+1,c(b),", 400)+"d.e=b),b}\n", 100) + rep("a(),", 900) + "b()"},
		{name: "generated data file", lang: "typescript", code: "export const rows: Array<[string, number]> = [\n" + rep("  [\"a, b, c\", 1],\n", 20_000) + "];\nexport enum E {" + rep("A, ", 1) + "B}\nexport default {" + rep("a: 1, ", 5000) + "}"},
		{name: "labels", lang: "javascript", code: rep("outer: for (;;) { inner: for (;;) { break outer } }\n", 500) + "a: b: c: x"},
		{name: "objects after labels and cases", lang: "typescript", code: rep("type T = {\n  a: string; b: {c: number; d: Map<string, number>}\n};\n", 2000)},

		// Programs that nest too deeply are refused where they pass the limit.
		{name: "prefix operators", lang: "javascript", code: rep("!", 300_000) + "1", what: "prefix operators", line: 1, col: deep},
		{name: "unary minus", lang: "javascript", code: "x = " + rep("- ", deep) + "1", what: "prefix operators", line: 1, col: 5 + 2*MaxNesting},
		{name: "typeof", lang: "javascript", code: rep("typeof ", deep) + "x", what: "prefix operators", line: 1, col: 1 + 7*MaxNesting},
		{name: "braces", lang: "javascript", code: rep("{", 6000) + rep("}", 6000), what: "brackets", line: 1, col: deep},
		{name: "parens on lines", lang: "typescript", code: "let x =\n" + rep("(\n", 300) + "1" + rep(")", 300), what: "brackets", line: 1 + MaxNesting, col: 1}, // the = is a level too
		{name: "templates", lang: "javascript", code: "x = " + rep("`${", 200) + "1" + rep("}`", 200), what: "brackets", line: 1},
		{name: "ifs without braces", lang: "javascript", code: rep("if (a) ", 20_000) + "x;", what: "statements without braces or chained arrow functions", line: 1},
		{name: "chained arrows", lang: "typescript", code: "f = " + rep("x => ", 2000) + "1", what: "statements without braces or chained arrow functions", line: 1},
		{name: "chained arrows with parens", lang: "javascript", code: "f = " + rep("(x) => ", 2000) + "1", what: "statements without braces or chained arrow functions", line: 1},
		{name: "labels escaped", lang: "javascript", code: rep(`\u0061: /* */ \u{62}: `, 300) + "1", what: "labels, statements without braces or chained arrow functions", line: 1},
		{name: "labelled loops", lang: "javascript", code: rep("l: for (;;) ", 2000) + "1", what: "statements without braces or chained arrow functions", line: 1},
		{name: "labelled ifs", lang: "javascript", code: rep("l: if (a) ", 2000) + "1", what: "statements without braces or chained arrow functions", line: 1},
		{name: "labels on lines", lang: "typescript", code: rep("a:\n", 2000) + "for (;;) break a", what: "labels, statements without braces or chained arrow functions", line: 1 + MaxNesting},
		{name: "chained assignments", lang: "javascript", code: "x" + rep(" = x", 490_000), what: "chained assignments, conditionals or **", line: 1, col: 1 + 4*MaxNesting + 2},
		{name: "chained assignments on lines", lang: "javascript", code: "x" + rep("\n= x", 2000), what: "chained assignments, conditionals or **", line: 2 + MaxNesting},
		{name: "chained compound assignments", lang: "javascript", code: "x" + rep(" >>>= x", 2000), what: "chained assignments, conditionals or **", line: 1},
		{name: "chained conditionals", lang: "javascript", code: "x = 1" + rep(" ? 1 : 1", 240_000), what: "chained assignments, conditionals or **", line: 1},
		{name: "chained exponents", lang: "typescript", code: "x = 2" + rep(" ** 2", 2000), what: "chained assignments, conditionals or **", line: 1},
		{name: "labels in a row", lang: "javascript", code: rep("a: ", 100_000) + "x", what: "labels, statements without braces or chained arrow functions", line: 1, col: 1 + 3*MaxNesting},
		{name: "labels and ifs", lang: "javascript", code: rep("a: if (x) ", 2000) + "y", what: "statements without braces or chained arrow functions", line: 1},
		{name: "labels and dos", lang: "javascript", code: rep("a: do ", 2000) + "y", what: "labels, statements without braces or chained arrow functions", line: 1},
		{name: "comma expression", lang: "javascript", code: "x = " + rep("a,", 100_000) + "a", what: comma, line: 1, col: 5 + 2*MaxSequence + 1},
		{name: "comma statement on lines", lang: "javascript", code: rep("f(),\n", 100_000) + "f()", what: comma, line: MaxSequence + 1},
		{name: "comma expression in parens", lang: "typescript", code: "const x = (" + rep("1, ", 100_000) + "1)", what: comma, line: 1},
		{name: "comma expression in a condition", lang: "javascript", code: "while (" + rep("a, ", 2000) + "a) {}", what: comma, line: 1},
		{name: "comma expression in a for", lang: "javascript", code: "for (let i = 0; i < 1; " + rep("i++, ", 2000) + "i++) {}", what: comma, line: 1},
		{name: "comma expression in a block", lang: "javascript", code: "function f() {\n" + rep("a, ", 2000) + "a }", what: comma, line: 2},
		{name: "comma expression in a case", lang: "javascript", code: "switch (x) { case 1: { " + rep("a, ", 2000) + "a } }", what: comma, line: 1},
		{name: "comma expression after a label", lang: "javascript", code: "l: {" + rep("a, ", 2000) + "a }", what: comma, line: 1},
		{name: "comma expression in an arrow", lang: "javascript", code: "f = () => {" + rep("a, ", 2000) + "a }", what: comma, line: 1},
		{name: "comma expression in a template", lang: "javascript", code: "s = `${" + rep("a, ", 2000) + "a}`", what: comma, line: 1},
		{name: "comma expression after declarations", lang: "javascript", code: "var a = 1, b = 2;\n" + rep("a, ", 2000) + "a", what: comma, line: 2},
		{name: "comma expression after a declaration without semicolons", lang: "javascript", code: "let a = 1\n" + rep("a, ", 2000) + "a", what: comma, line: 2},
		{name: "let again", lang: "javascript", code: rep("let a;", 100_000), what: redeclared, line: 1, col: 6*(MaxRedeclared+1) + 5},
		{name: "names again in turn", lang: "typescript", code: rep("const a = 1; class B {}\nimport c from 'c'\n", 100), what: redeclared, line: 2*(MaxRedeclared/3+1) + 1},
		{name: "private names again", lang: "javascript", code: "class A {" + rep("#a; ", 1000) + "}", what: redeclared, line: 1},
		{name: "private methods again", lang: "javascript", code: "class A { m() { class B {" + rep("#a() {}\n", 1000) + "} } }", what: redeclared, line: MaxRedeclared + 3},
		{name: "destructured again", lang: "javascript", code: "const {" + rep("a, ", 1000) + "} = x", what: redeclared, line: 1, col: 8 + 3*(MaxRedeclared+1)},
		{name: "destructured again in turn", lang: "javascript", code: rep("let [a, {b: [c]}] = x;\n", 100), what: redeclared, line: MaxRedeclared/2 + 2},
		{name: "enum members again", lang: "typescript", code: "enum E {" + rep("A, ", 1000) + "}", what: redeclared, line: 1, col: 9 + 3*(MaxRedeclared+1)},
		{name: "angles", lang: "typescript", code: "x = " + rep("a<", 100_000) + "a", what: angles, line: 1, col: 5 + 2*MaxAngles + 1},
		{name: "angles in a condition", lang: "typescript", code: "if (" + rep("a < b || ", 1000) + "c) {}", what: angles, line: 1},
		{name: "decorators", lang: "typescript", code: "class A {" + rep("@d m() {}\n", 1000) + "}", what: fmt.Sprintf("a class with more than %d decorators", MaxDecorated), line: MaxDecorated + 1},
		{name: "__proto__ again", lang: "javascript", code: "x = {" + rep("__proto__: 1, ", 1000) + "}", what: redeclared, line: 1},
		{name: "shell subshells", lang: "bash", code: rep("(", 60_000) + "true" + rep(")", 60_000), what: "shell groups, substitutions and compound commands", line: 1, col: deep},
		{name: "shell substitutions in quotes", lang: "sh", code: "echo " + rep(`"$(`, 300) + "x" + rep(`)"`, 300), what: "shell groups, substitutions and compound commands", line: 1},
		{name: "shell arithmetic", lang: "bash", code: "echo $((" + rep("(", 300) + "1" + rep(")", 300) + "))", what: "shell groups, substitutions and compound commands", line: 1},
		{name: "shell ifs", lang: "bash", code: rep("if true; then\n", 300) + "true\n" + rep("fi\n", 300), what: "shell groups, substitutions and compound commands", line: deep},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Lookup(c.lang).CheckNesting(c.code)
			switch {
			case c.what == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.what == "":
				return
			case err == nil:
				t.Fatal("not refused")
			case err.What != c.what || err.Line != c.line || c.col != 0 && err.Column != c.col:
				t.Fatalf("got %v (line %d, column %d, %q); want line %d, column %d, %q", err, err.Line, err.Column, err.What, c.line, c.col, c.what)
			}
		})
	}
}

// The output of a transform is bounded: 16 times the program, or 1 MiB.
func TestTranspileOutputBounded(t *testing.T) {
	// 200 nested blocks, each holding a statement, and enough of them to
	// make the indentation weigh: well within the nesting limit, but the
	// output grows with depth times lines.
	inner := strings.Repeat("{", 200) + "x;" + strings.Repeat("}", 200) + "\n"
	code := strings.Repeat(inner, 30)
	if err := Lookup("javascript").CheckNesting(code); err != nil {
		t.Fatal(err)
	}
	_, syn, err := Transpile(code, "main.js", false)
	if syn != nil {
		t.Fatal(syn)
	}
	oe, ok := err.(*OutputError)
	if !ok {
		t.Fatalf("err = %v, want an *OutputError", err)
	}
	if oe.Limit != 1<<20 || oe.Size <= oe.Limit {
		t.Fatalf("%+v", oe)
	}
	// A plain program of the same size is well within.
	if _, syn, err := Transpile(strings.Repeat("x = [1, 2, 3].map(a => a * 2);\n", len(code)/30), "main.js", false); syn != nil || err != nil {
		t.Fatal(syn, err)
	}
}

// Reading a program on the host costs time in proportion to its size:
// programs of the largest size codecell takes, shaped to make esbuild's
// time grow faster than their length, are refused by CheckNesting or read
// in a small multiple of the time an ordinary program of that size takes.
func TestReadCostProportional(t *testing.T) {
	if testing.Short() {
		t.Skip("reads programs of 200,000 characters")
	}
	const size = 200_000
	fill := func(unit string) string { return strings.Repeat(unit, size/len(unit)) }
	js, ts := Lookup("javascript"), Lookup("typescript")
	read := func(code string, typescript bool) (time.Duration, bool) {
		l := js
		if typescript {
			l = ts
		}
		best := time.Duration(1 << 62)
		refused := false
		for range 2 {
			start := time.Now()
			if l.CheckNesting(code) != nil {
				refused = true
			} else {
				Transpile(code, "main.ts", typescript)
			}
			best = min(best, time.Since(start))
		}
		return best, refused
	}
	ordinary, _ := read(fill("x1 = f(a, b) + g[c] * 2;\nif (x1 > 3) { console.log('hi', x1) }\n"), false)
	for _, c := range []struct {
		name, code string
		ts         bool
	}{
		{"comma expression", "x = " + fill("a,"), false},
		{"comma expressions just short of the limit", fill("x = (" + strings.Repeat("a, ", MaxSequence-1) + "a);\n"), false},
		{"parenthesised comma expression", "x = (" + fill("1, ") + "1)", true},
		{"labels", fill("a: "), false},
		{"let again", fill("let a;"), false},
		{"imports again", fill("import a from 'a';\n"), false},
		{"destructured again", "const {" + fill("a, ") + "} = x", false},
		{"private names again", "class A {" + fill("#a; ") + "}", false},
		{"__proto__ again", "x = {" + fill("__proto__: 1, ") + "}", false},
		{"cases again", "switch (a) {" + fill("case 1: ") + "}", false},
		{"members", "x = a" + fill(".b"), false},
		{"calls", "x = a" + fill("()"), false},
		{"duplicate class members", "class A {" + fill("m() {} ") + "}", true},
		{"duplicate keys", "x = {" + fill("a: 1, ") + "}", false},
		{"union type", "type T = " + fill("'a' | ") + "'a'", true},
		{"regular expressions", fill("x = /a(b)+[c]/g;\n"), false},
		{"angles", "x = " + fill("a<"), true},
		{"angles just short of the limit", fill("x = " + strings.Repeat("a<", MaxAngles) + "a;\n"), true},
		{"enum members again", "enum E {" + fill("A, ") + "}", true},
		{"decorators", "class A {" + fill("@d m() {} ") + "}", true},
		{"decorators just short of the limit", fill("x = class {" + strings.Repeat("@d m() {} ", MaxDecorated-6) + "};\n"), true},
		{"templates", "x = `" + fill("${a}") + "`", false},
	} {
		d, refused := read(c.code, c.ts)
		t.Logf("%s: %v (refused %v), %.1f times an ordinary program (%v)", c.name, d, refused, float64(d)/float64(ordinary), ordinary)
		if d > 40*ordinary {
			t.Errorf("%s: %v, more than 40 times an ordinary program of the same size (%v)", c.name, d, ordinary)
		}
	}
}
