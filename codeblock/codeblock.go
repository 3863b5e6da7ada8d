// Package codeblock takes fenced code blocks out of a model's reply, and
// renders a failed Result as a short markdown message the model can act on
// in its retry.
package codeblock

import (
	"strings"

	"github.com/codecell-dev/codecell/lang"
)

// Block is one fenced code block.
type Block struct {
	// Language is the canonical language (python, javascript, typescript,
	// bash, sh), or "" when the block is unlabelled or labelled with
	// something codecell does not run (json, text, console, …).
	Language string
	// Info is the fence's info string as written, such as "python" or
	// "ts title=main.ts".
	Info string
	Code string
	// Line is the 1-based line of the opening fence.
	Line int
	// Closed is false when the text ended inside the block, as a reply cut
	// off mid-code does.
	Closed bool
}

// Unlabelled reports whether the fence had no info string.
func (b Block) Unlabelled() bool { return b.Info == "" }

// labels that name a language codecell runs under another name, and labels
// that look like a language but hold something else (prompts, output).
var (
	extraLabels = map[string]string{
		"es6": "javascript", "ecmascript": "javascript", "shellscript": "bash",
	}
	notCode = map[string]bool{
		"console": true, "pycon": true, "shell-session": true, "terminal": true, "output": true,
		"text": true, "txt": true, "plaintext": true, "json": true, "jsonc": true, "yaml": true, "yml": true,
		"toml": true, "markdown": true, "md": true, "diff": true, "log": true, "html": true, "xml": true,
		"css": true, "sql": true, "jsx": true, "tsx": true,
	}
)

// Normalize maps a fence label to a language codecell runs, or "".
func Normalize(info string) string {
	word := strings.ToLower(strings.TrimSpace(info))
	if i := strings.IndexAny(word, " \t{,"); i >= 0 {
		word = word[:i]
	}
	// Pandoc's {.python} and "language-python" class forms.
	word = strings.TrimPrefix(strings.Trim(word, "{}"), ".")
	word = strings.TrimPrefix(word, "language-")
	if word == "" || notCode[word] {
		return ""
	}
	if l, ok := extraLabels[word]; ok {
		return l
	}
	if l := lang.Lookup(word); l != nil {
		return l.Name
	}
	return ""
}

// Extract returns the fenced code blocks of a markdown text, in order. It
// follows CommonMark's fences: three or more backticks or tildes, indented
// by at most three spaces (or more, inside list items, whose indentation is
// removed from the code), closed by a fence of the same character at least
// as long. A block the text ends inside runs to the end.
func Extract(text string) []Block {
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	var blocks []Block
	for i := 0; i < len(lines); i++ {
		indent, fence, info, ok := openingFence(lines[i])
		if !ok {
			continue
		}
		b := Block{Info: info, Language: Normalize(info), Line: i + 1}
		var code []string
		j := i + 1
		for ; j < len(lines); j++ {
			if closingFence(lines[j], fence) {
				b.Closed = true
				break
			}
			code = append(code, dedent(lines[j], indent))
		}
		b.Code = strings.Join(code, "\n")
		if len(code) > 0 {
			b.Code += "\n"
		}
		blocks = append(blocks, b)
		i = j
	}
	return blocks
}

// openingFence parses a line that opens a fenced block.
func openingFence(line string) (indent int, fence, info string, ok bool) {
	trimmed := strings.TrimLeft(line, " \t")
	indent = len(line) - len(trimmed)
	if len(trimmed) < 3 || (trimmed[0] != '`' && trimmed[0] != '~') {
		return 0, "", "", false
	}
	c := trimmed[0]
	n := 0
	for n < len(trimmed) && trimmed[n] == c {
		n++
	}
	if n < 3 {
		return 0, "", "", false
	}
	info = strings.TrimSpace(trimmed[n:])
	if c == '`' && strings.ContainsRune(info, '`') {
		return 0, "", "", false // inline code such as ```a``` in prose
	}
	return indent, trimmed[:n], info, true
}

func closingFence(line, fence string) bool {
	t := strings.TrimSpace(line)
	if len(t) < len(fence) || t[0] != fence[0] {
		return false
	}
	return strings.Trim(t, fence[:1]) == ""
}

// dedent removes up to n leading spaces, as CommonMark does for the lines of
// an indented fence.
func dedent(line string, n int) string {
	i := 0
	for i < n && i < len(line) && (line[i] == ' ' || line[i] == '\t') {
		i++
	}
	return line[i:]
}
