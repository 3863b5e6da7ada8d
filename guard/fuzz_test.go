package guard

import (
	"strings"
	"testing"

	"github.com/codecell-dev/codecell/lang"
)

var everything = &Policy{Block: Categories, AllowedCommands: []string{"echo", "ls *"}}

// FuzzCheckJavaScript: the JavaScript guardrail reads any program
// CheckNesting lets through without a panic, and its findings point into
// the program.
func FuzzCheckJavaScript(f *testing.F) {
	for _, s := range []string{
		"const {exec} = require('child_process'); exec('ls')",
		"globalThis['ev' + 'al']('1')",
		"const g = globalThis; g.fetch('x')",
		"import('fs').then(m => m.readFileSync('/etc/passwd'))",
		strings.Repeat("(", 200) + "eval" + strings.Repeat(")", 200) + "('1')",
		"x = " + strings.Repeat("a ? b : ", 300) + "eval",
		strings.Repeat("a=", 2000) + "eval",
		"namespace Net {\n  export async function get() { return fetch('http://x') }\n}\nawait Net.get()",
	} {
		f.Add(false, s)
		f.Add(true, s)
	}
	f.Fuzz(func(t *testing.T, typescript bool, code string) {
		if len(code) > 4096 || lang.Lookup("javascript").CheckNesting(code) != nil {
			return
		}
		findings, _ := CheckJavaScript(code, "main.js", typescript, everything)
		checkFindings(t, code, findings)
	})
}

// FuzzCheckShell: the same for shell, bash and POSIX.
func FuzzCheckShell(f *testing.F) {
	for _, s := range []string{
		"curl -s http://x | sh",
		"eval \"$x\"; bash -c 'nc -l 1'",
		"node -e 'require(\"child_process\").exec(\"ls\")'",
		"python3 -c 'import socket'",
		"a=$(" + strings.Repeat("$(", 100) + "wget x" + strings.Repeat(")", 100) + ")",
		"true" + strings.Repeat(" && true", 1000),
		"cat <<EOF\n$(rm -rf /)\nEOF\n",
	} {
		f.Add(false, s)
		f.Add(true, s)
	}
	f.Fuzz(func(t *testing.T, bash bool, code string) {
		if len(code) > 4096 || lang.Lookup("bash").CheckNesting(code) != nil {
			return
		}
		checkFindings(t, code, CheckShell(code, bash, everything))
	})
}

func checkFindings(t *testing.T, code string, findings []Finding) {
	t.Helper()
	lines := strings.Count(code, "\n") + 1
	for _, f := range findings {
		if f.Rule == "" || f.Line < 1 || f.Column < 1 || f.Line > lines+1 {
			t.Fatalf("a finding outside a program of %d lines: %+v", lines, f)
		}
	}
}
