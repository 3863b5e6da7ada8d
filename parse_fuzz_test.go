package codecell

import (
	"context"
	"strings"
	"testing"

	"github.com/codecell-dev/codecell/guard"
	"github.com/codecell-dev/codecell/lang"
)

// parserAttacks are programs made to break the parsers the Engine runs on
// the host: each killed or swelled the codecell process before.
var parserAttacks = []struct{ lang, code string }{
	{"javascript", strings.Repeat("!", 300_000) + "1"},
	{"javascript", strings.Repeat("{", 6000) + strings.Repeat("}", 6000)},
	{"javascript", strings.Repeat("if (a) ", 20_000) + "x;"},
	{"typescript", "f = " + strings.Repeat("x => ", 2000) + "1"},
	{"javascript", strings.Repeat("a=", 300_000) + "1"},
	{"typescript", "x = 1" + strings.Repeat(" ** 1", 150_000)},
	{"javascript", "x = " + strings.Repeat("a ? b : ", 100_000) + "c"},
	{"bash", strings.Repeat("(", 60_000) + "true" + strings.Repeat(")", 60_000)},
	{"bash", "true" + strings.Repeat(" && true", 120_000)},
	{"sh", "echo $((" + strings.Repeat("(", 50_000) + "1" + strings.Repeat(")", 50_000) + "))"},
	// Shapes that took a worker seconds to minutes, in time growing with
	// the square of their length, or more.
	{"javascript", "x = " + strings.Repeat("a,", 100_000) + "a"},
	{"javascript", strings.Repeat("a: ", 60_000) + "x"},
	{"javascript", strings.Repeat("let a;", 30_000)},
	{"javascript", "const {" + strings.Repeat("a, ", 60_000) + "} = x"},
	{"typescript", "x = " + strings.Repeat("a<", 100_000) + "a"},
	{"typescript", "enum E {" + strings.Repeat("A, ", 60_000) + "}"},
	{"typescript", "class A {" + strings.Repeat("@d m() {} ", 20_000) + "}"},
	{"javascript", "switch (a) {" + strings.Repeat("case 1: ", 20_000) + "}"},
	{"javascript", "x = a" + strings.Repeat(".b", 20_000)},
	{"javascript", "x = a" + strings.Repeat(".constructor", 60) + "('return 1')()"},
}

var parsedLanguages = []string{"javascript", "typescript", "bash", "sh"}

// FuzzParsers holds the host's parsers, as the Engine runs them, to one
// promise whatever the program: it is read, or refused as too deep or too
// complex, and the process goes on. Failures cost a worker, never this
// process; CheckNesting keeps the common ones from costing even that.
func FuzzParsers(f *testing.F) {
	for _, a := range parserAttacks {
		for i, l := range parsedLanguages {
			if l == a.lang {
				f.Add(uint8(i), a.code)
			}
		}
	}
	f.Add(uint8(0), "const x = [1, 2, 3].map(n => n * 2);\nx")
	f.Add(uint8(1), "import fs from 'fs';\nconst n: number = 1;\nawait fetch('x')\nn")
	f.Add(uint8(2), "for i in 1 2; do echo \"$(curl -s x)\"; done")
	f.Add(uint8(3), "eval \"$x\"; sh -c 'node -e \"require(1)\"'")
	e := &Engine{}
	block := &GuardPolicy{Block: guard.Categories}
	f.Fuzz(func(t *testing.T, which uint8, code string) {
		l := lang.Lookup(parsedLanguages[int(which)%len(parsedLanguages)])
		if n := l.CheckNesting(code); n != nil {
			return
		}
		ctx := context.Background()
		if _, env := e.checkStatic(ctx, l, &Exec{Code: code}, block); env != nil && env.Code != CodeTooComplex {
			t.Fatalf("checking: %+v", env)
		}
		if l.Name == "javascript" || l.Name == "typescript" {
			_, _, err := e.transpiler(ctx)(code, l.DefaultFilename(), l.Name == "typescript")
			if env, ok := err.(*Envelope); err != nil && (!ok || env.Code != CodeTooComplex) {
				t.Fatalf("transpiling: %v", err)
			}
		}
	})
}
