package lang

import (
	"slices"
	"strings"
	"testing"
)

func TestLiveDeclarations(t *testing.T) {
	for _, c := range []struct {
		code, ts string
		names    []string
		has      []string
	}{
		{code: "const a = 1, {b, c: [d, ...e]} = f(), [g = 2] = h;\nlet i;\nvar j;\nfunction k() { return a }\nclass L {}\nk()",
			names: []string{"a", "b", "d", "e", "g", "i", "j", "k", "L"},
			has:   []string{"( a = 1, { b, c: [d, ...e] } = f(), [g = 2] = h);", "( i = void 0);", "( j);", "globalThis.k = k;", "L = class L {\n  };"}},
		{code: "const x = await import('node:os')\nfor (let n = 0; n < 2; n++) {}\nx.EOL",
			names: []string{"x"}, has: []string{"( x = await import(\"node:os\"));", "for (let n = 0;"}},
		{code: "type T = {a: number}\nconst t: T = {a: 1}\nt.a", ts: "ts", names: []string{"t"}, has: []string{"( t = { a: 1 });"}},
		{code: "const π = 3.14\nconst s = 'é';\n`${π}${s}`", names: []string{"π", "s"}, has: []string{"( s = \"é\");"}},
	} {
		js, syn, err := Transpile(c.code, "main.js", c.ts != "")
		if err != nil || syn != nil {
			t.Fatalf("%q: %v %v", c.code, err, syn)
		}
		out, names, err := liveDeclarations(js)
		if err != nil {
			t.Fatalf("%q: %v\n%s", c.code, err, js)
		}
		if !slices.Equal(names, c.names) {
			t.Errorf("%q: names %q, want %q", c.code, names, c.names)
		}
		for _, h := range c.has {
			if !strings.Contains(out, h) {
				t.Errorf("%q: no %q in\n%s", c.code, h, out)
			}
		}
		if strings.Count(out, "\n") != strings.Count(js, "\n") {
			t.Errorf("%q: the lines moved", c.code)
		}
	}
}
