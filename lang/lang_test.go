package lang

import (
	"strings"
	"testing"
)

func TestForFile(t *testing.T) {
	cases := []struct{ name, code, want string }{
		{"a.py", "", "python"},
		{"a.JS", "", "javascript"},
		{"a.mjs", "", "javascript"},
		{"a.ts", "", "typescript"},
		{"a.sh", "echo", "bash"},
		{"a.sh", "#!/bin/sh\necho", "sh"},
		{"a.bash", "", "bash"},
		{"script", "#!/usr/bin/env python3\nprint(1)", "python"},
		{"script", "#!/usr/bin/env -S node --no-warnings\n", "javascript"},
		{"a.txt", "#!/bin/dash\n", "sh"},
		{"a.txt", "hello", ""},
		{"", "print(1)", ""},
	}
	for _, c := range cases {
		got := ""
		if l := ForFile(c.name, c.code); l != nil {
			got = l.Name
		}
		if got != c.want {
			t.Errorf("ForFile(%q, %q) = %q, want %q", c.name, c.code, got, c.want)
		}
	}
}

func TestLookup(t *testing.T) {
	for alias, want := range map[string]string{"PY": "python", "node": "javascript", "ts": "typescript", "shell": "bash", "sh": "sh"} {
		if l := Lookup(alias); l == nil || l.Name != want {
			t.Errorf("Lookup(%q) = %v, want %s", alias, l, want)
		}
	}
	if Lookup("cobol") != nil {
		t.Error("cobol is not a language codecell runs")
	}
}

// Rewriting imports and exports never moves a line.
func TestRewriteKeepsLines(t *testing.T) {
	src := `import fs from "fs";
import {
  join,
  basename as base,
} from "path";
import type { Stats } from "fs";
import "./side-effect";
import * as os from 'os'
export const x = 1;
export default function f() {}
export { x as y };
console.log(join("a"), base("b"), fs, os)
`
	out := rewriteModuleSyntax(src, true)
	if strings.Count(out, "\n") != strings.Count(src, "\n") {
		t.Fatalf("line count changed:\n%s", out)
	}
	lines := strings.Split(out, "\n")
	want := map[int]string{
		0:  `const __codecell_m1 = await __codecell_import__("fs"); const fs = __codecell_m1.default;`,
		1:  `const __codecell_m2 = await __codecell_import__("path"); const {join, basename: base} = __codecell_m2;`,
		5:  ``,
		6:  `await __codecell_import__("./side-effect");`,
		7:  `const __codecell_m3 = await __codecell_import__("os"); const os = __codecell_m3;`,
		8:  `const x = 1;`,
		9:  `function f() {}`,
		10: ``,
		11: `console.log(join("a"), base("b"), fs, os)`,
	}
	for i, w := range want {
		if lines[i] != w {
			t.Errorf("line %d = %q, want %q", i+1, lines[i], w)
		}
	}
}

func TestReturnFinalExpression(t *testing.T) {
	cases := []struct {
		name, code string
		returns    bool
	}{
		{"expression", "1 + 1", true},
		{"call over lines", "f({\n  a: 1,\n})", true},
		{"declaration", "const a = 1", false},
		{"function", "function f() {}", false},
		{"class", "class A {}", false},
		{"if block", "if (x) {\n  y\n}", false},
		{"for loop", "for (const a of b) {}", false},
		{"template content that looks like code", "const s = `\n  1 + 2\n`", false},
		{"template last", "`a\n  b`", true},
		{"await", "await g()", true},
		{"assignment", "x = 5", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			js, syn, _ := Transpile(c.code, "main.js", false)
			if syn != nil {
				t.Fatalf("syntax error: %v", syn)
			}
			if got := strings.Contains(js, "return ("); got != c.returns {
				t.Errorf("returns = %v, want %v:\n%s", got, c.returns, js)
			}
		})
	}
}

func TestSyntaxErrorPosition(t *testing.T) {
	_, syn, _ := Transpile("const ok = 1;\nconst bad = [1, 2;\n", "main.js", false)
	if syn == nil || syn.Line != 2 || syn.Column != 18 {
		t.Fatalf("syntax error = %+v", syn)
	}
	_, syn, _ = Transpile("let x = {", "main.ts", true)
	if syn == nil || syn.Line != 1 || !strings.Contains(syn.Message, "end of input") || !strings.Contains(syn.Text, "let x = {") {
		t.Fatalf("syntax error = %+v", syn)
	}
	if strings.Contains(syn.Text, "__codecell_main__") {
		t.Errorf("the wrapper shows in the message: %s", syn.Text)
	}
}

// TestWarmDigest: a program that can start warm names its runner's files
// by a digest that follows their contents.
func TestWarmDigest(t *testing.T) {
	v := View{Workspace: "/workspace", Runner: "/run/codecell"}
	for _, name := range []string{"python", "javascript"} {
		prog, err := Lookup(name).Prepare(Source{Code: "1", ValueFD: 3, ToolFD: 4, WarmFD: 5, ValueLimit: 1 << 20}, v)
		if err != nil {
			t.Fatal(err)
		}
		w := prog.Warm
		if w == nil || len(w.Files) != 1 {
			t.Fatalf("%s: warm start %+v", name, w)
		}
		for file, data := range w.Files {
			if want := file + " " + digestOf(data); w.Digest != want {
				t.Errorf("%s: digest %q, want %q", name, w.Digest, want)
			}
		}
		if cold, _ := Lookup(name).Prepare(Source{Code: "1", ValueFD: 3, ToolFD: 4, ValueLimit: 1 << 20}, v); cold.Warm != nil {
			t.Errorf("%s: a warm start without a descriptor to read the job from", name)
		}
	}
}
