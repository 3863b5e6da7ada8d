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
	// Pandoc's {.python} form: the brace must go before cutting at the
	// first separator, or "{" itself is cut at and nothing is left.
	word = strings.TrimPrefix(word, "{")
	// ":" ends the word in "python:src/main.py", the form models trained on
	// editor tools use to name the file.
	if i := strings.IndexAny(word, " \t{,:"); i >= 0 {
		word = word[:i]
	}
	// The rest of Pandoc's {.python} and the "language-python" class form.
	word = strings.TrimPrefix(strings.TrimSuffix(word, "}"), ".")
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
	text = strings.ReplaceAll(text, "\r\n", "\n")
	// A final newline ends the last line rather than starting an empty one;
	// without this, a block the reply ends inside gets a spurious blank
	// line.
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
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
			if closingFence(lines[j], fence, indent) {
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
	// A fence may open a list item on the marker's own line ("1. ```bash").
	// Missed, its closing fence would be taken for an opening one and the
	// prose after it for an unlabelled block. The item's content, and so
	// the code, is indented to where the fence starts.
	if m := listMarker(trimmed); m > 0 {
		rest := strings.TrimLeft(trimmed[m:], " ")
		indent += len(trimmed) - len(rest)
		trimmed = rest
	}
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

// listMarker returns the length of the list item marker that s starts with,
// "-", "*", "+", "1." or "1)" and a space, or 0 if there is none.
func listMarker(s string) int {
	n := 0
	if len(s) > 0 && strings.IndexByte("-*+", s[0]) >= 0 {
		n = 1
	} else {
		for n < len(s) && n < 9 && s[n] >= '0' && s[n] <= '9' {
			n++
		}
		if n == 0 || n >= len(s) || (s[n] != '.' && s[n] != ')') {
			return 0
		}
		n++
	}
	if n >= len(s) || s[n] != ' ' {
		return 0
	}
	return n + 1
}

// closingFence reports whether line closes a block opened by fence at
// indentation indent. As in CommonMark, the closing fence may be indented by
// at most three spaces more than the block's own indentation: a deeper run
// of backticks is content, such as a fence inside a Python docstring.
func closingFence(line, fence string, indent int) bool {
	t := strings.TrimSpace(line)
	if len(t) < len(fence) || t[0] != fence[0] {
		return false
	}
	if len(line)-len(strings.TrimLeft(line, " \t")) > indent+3 {
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
