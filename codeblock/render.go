package codeblock

import (
	"fmt"
	"strings"

	"github.com/codecell-dev/codecell"
)

// RenderFailure renders a Result that did not succeed as a short markdown
// message for a model's retry: what happened, the error, the end of the
// program's output, and what to do. It returns "" for a success.
func RenderFailure(res *codecell.Result) string {
	if res == nil || res.Status == codecell.StatusSuccess {
		return ""
	}
	var b strings.Builder
	switch res.Status {
	case codecell.StatusFailure:
		fmt.Fprintf(&b, "**The code failed** (status `failure`, exit code %d).\n", res.ExitCode)
	case codecell.StatusBlocked:
		b.WriteString("**The code was not run** (status `blocked`).\n")
	default:
		fmt.Fprintf(&b, "**The code did not finish** (status `%s`).\n", res.Status)
	}
	if e := res.Error; e != nil {
		fmt.Fprintf(&b, "\nError `%s`: %s\n", e.Code, e.Message)
	}
	if tail := lastLines(res.Stdout, 10); tail != "" && res.Status != codecell.StatusBlocked {
		fmt.Fprintf(&b, "\nLast lines of stdout:\n%s", fenced(tail))
	}
	if tail := lastLines(res.Stderr, 20); tail != "" {
		fmt.Fprintf(&b, "\nLast lines of stderr:\n%s", fenced(tail))
	}
	var hints []string
	if res.Error != nil {
		hints = append(hints, res.Error.Hints...)
	}
	hints = append(hints, advice[res.Status])
	b.WriteString("\nWhat to do:\n")
	for _, h := range hints {
		if h != "" {
			fmt.Fprintf(&b, "- %s\n", h)
		}
	}
	return b.String()
}

var advice = map[codecell.Status]string{
	codecell.StatusFailure:      "Fix the code and send the whole program again in one fenced code block.",
	codecell.StatusTimeout:      "Send a program that finishes sooner: less data, fewer iterations, no waiting on input.",
	codecell.StatusMemoryLimit:  "Send a program that holds less in memory at once.",
	codecell.StatusBlocked:      "Change the request as the error says, then send it again.",
	codecell.StatusSandboxError: "This was not caused by the code; sending it again may work.",
}

// lastLines returns the last n non-empty-trailing lines of s.
func lastLines(s string, n int) string {
	s = strings.TrimRight(s, "\n ")
	if s == "" {
		return ""
	}
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = append([]string{"…"}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// fenced wraps text in a fence longer than any backtick run inside it.
func fenced(text string) string {
	fence := "```"
	for strings.Contains(text, fence) {
		fence += "`"
	}
	return fence + "text\n" + text + "\n" + fence + "\n"
}
