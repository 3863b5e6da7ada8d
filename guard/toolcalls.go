// Package guard checks programs before they run. The sandbox is the
// boundary; these checks give a model earlier and clearer feedback.
package guard

import (
	"regexp"

	"github.com/codecell-dev/codecell/internal/lazyre"

	"github.com/codecell-dev/codecell/lang"
)

var callSites = map[string]func() *regexp.Regexp{
	"python":     lazyre.New(`\bcall_tool(?:_sync)?\s*\(|\btools(?:\s*\.\s*[A-Za-z_]\w*|\s*\[[^\]\n]+\])+\s*\(`),
	"javascript": lazyre.New(`\bcallTool\s*\(|\btools(?:\s*\.\s*[A-Za-z_$][\w$]*|\s*\[[^\]\n]+\])+\s*\(`),
	"bash":       lazyre.New(`\bcodecell-tool\b`),
}

// CountToolCalls counts the places in a program's text that call a tool:
// call_tool(, call_tool_sync( and tools.<name>( in Python; callTool( and tools.<name>( in
// JavaScript and TypeScript; codecell-tool in shell. It reads the text, not
// the program's flow: a call inside a loop counts once, and one in a comment
// counts too. The run-time limit on calls holds whatever this says; this
// count only refuses, before anything runs, a program that plainly needs
// more calls than it may make.
func CountToolCalls(language, code string) int {
	re := callSites[family(language)]
	if re == nil {
		return 0
	}
	return len(re().FindAllStringIndex(code, -1))
}

// family is the checks' name for a language's name or alias: python,
// javascript (TypeScript too) or bash (sh too); "" when unknown.
func family(language string) string {
	l := lang.Lookup(language)
	if l == nil {
		return ""
	}
	switch l.Name {
	case "typescript":
		return "javascript"
	case "sh":
		return "bash"
	}
	return l.Name
}
