package lang

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxNesting is how deeply a JavaScript, TypeScript or shell program may
// nest: brackets, template substitutions, chained arrow functions and
// statements without braces (if (a) if (b) …) and labels in a row (a: b:
// …), runs of prefix operators
// (!!!x), chains of right-associative operators (x = y = z, a ? b : c ?
// d : e, a ** b ** c), and shell's groups, substitutions and compound commands. Python
// allows 200 nested brackets; code a person or a model writes stays far
// below either. Deeper programs are refused before any parser reads them:
// the parsers recurse once per level, and some print each level indented,
// so that their time and output grow with the square of the depth.
const MaxNesting = 256

// NestingError is a program that nests deeper than MaxNesting.
type NestingError struct {
	Line, Column int // 1-based, where the limit was passed
	// What nests: "brackets", "prefix operators", "statements without
	// braces or chained arrow functions", "shell groups and compound
	// commands".
	What string
}

func (e *NestingError) Error() string {
	return fmt.Sprintf("line %d, column %d: the program nests more than %d levels deep (%s)", e.Line, e.Column, MaxNesting, e.What)
}

// CheckNesting reads a program in one pass, without parsing it, and
// returns where it first nests deeper than MaxNesting, or nil. It knows
// JavaScript, TypeScript and shell; other languages' programs are parsed
// by their own interpreters, in the sandbox, and return nil.
func (l *Language) CheckNesting(code string) *NestingError {
	switch l.Name {
	case "javascript", "typescript":
		return jsNesting(code)
	case "bash", "sh":
		return shellNesting(code)
	}
	return nil
}

func nestingError(code string, off int, what string) *NestingError {
	off = min(off, len(code))
	before := code[:off]
	line := strings.Count(before, "\n") + 1
	col := utf8.RuneCountInString(before[strings.LastIndexByte(before, '\n')+1:]) + 1
	return &NestingError{Line: line, Column: col, What: what}
}

// jsLevel is one open bracket of a JavaScript program: '(', '[', '{', '`'
// (a template's text) or '$' (a template's ${…}). chain counts the
// statements without braces and arrow functions that nest in it without
// a bracket of their own; right the right-associative operators (an
// assignment, a conditional's ?, **) in the expression that runs in it:
// each nests the rest of the expression one level deeper.
type jsLevel struct {
	open  byte
	chain int
	right int
}

// Keywords that nest a statement, or an arrow's body, without a bracket.
var jsChainWords = map[string]bool{"if": true, "for": true, "while": true, "with": true, "do": true, "else": true}

// Keywords that are prefix operators.
var jsPrefixWords = map[string]bool{"typeof": true, "void": true, "delete": true, "await": true, "new": true, "yield": true}

// Keywords after which a / starts a regular expression.
var jsRegexAfter = map[string]bool{
	"return": true, "typeof": true, "instanceof": true, "in": true, "of": true, "new": true, "delete": true,
	"void": true, "throw": true, "case": true, "do": true, "else": true, "yield": true, "await": true,
}

func jsNesting(code string) *NestingError {
	stack := []jsLevel{{}}
	chains := 0     // the sum of the levels' chains
	rights := 0     // the sum of the levels' right-associative operators
	prefix := 0     // prefix operators in a row
	labels := 0     // labels in a row (l1: l2: …)
	regexOK := true // whether a / here starts a regular expression
	depth := func() int { return len(stack) - 1 + chains + rights }
	what := func() string {
		if rights > chains && rights > len(stack)-1 {
			return "chained assignments, conditionals or **"
		}
		if chains > len(stack)-1 {
			return "statements without braces or chained arrow functions"
		}
		return "brackets"
	}
	resetChain := func() {
		chains -= stack[len(stack)-1].chain
		stack[len(stack)-1].chain = 0
	}
	// The end of an expression ends its chain of right-associative
	// operators.
	resetRight := func() {
		rights -= stack[len(stack)-1].right
		stack[len(stack)-1].right = 0
	}
	n := len(code)
	i := 0
	nestRight := func(at, width int) *NestingError {
		stack[len(stack)-1].right++
		rights++
		i += width
		regexOK, prefix = true, 0
		if depth() > MaxNesting {
			return nestingError(code, at, what())
		}
		return nil
	}
	for i < n {
		top := stack[len(stack)-1].open
		if top == '`' {
			// A template's text, up to its end or a substitution.
			for i < n && code[i] != '`' && !(code[i] == '$' && i+1 < n && code[i+1] == '{') {
				if code[i] == '\\' {
					i++
				}
				i++
			}
			if i >= n {
				return nil
			}
			if code[i] == '`' {
				stack = stack[:len(stack)-1]
				i++
				regexOK, prefix = false, 0
				continue
			}
			stack = append(stack, jsLevel{open: '$'})
			i += 2
			regexOK, prefix = true, 0
			if depth() > MaxNesting {
				return nestingError(code, i-2, "brackets")
			}
			continue
		}
		c := code[i]
		if labels > 0 && !isWordByte(c) && c != '\\' && !startsJSSpace(code[i:]) {
			// (a \u escape is a name's)
			labels = 0
		}
		switch {
		case c == '\n' && !regexOK:
			// A line that ends with an operand and a next that starts
			// with one: a new statement (a semicolon is inserted), which
			// ends the expression's chain.
			if t := skipJSSpace(code[i:]); t != "" && (isWordByte(t[0]) || t[0] == '\'' || t[0] == '"' || t[0] == '`') {
				resetRight()
			}
			i++
			continue
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f':
			i++
			continue
		case c == '/' && i+1 < n && code[i+1] == '/':
			for i < n && code[i] != '\n' {
				i++
			}
			continue
		case c == '/' && i+1 < n && code[i+1] == '*':
			end := strings.Index(code[i+2:], "*/")
			if end < 0 {
				return nil
			}
			i += 2 + end + 2
			continue
		case c == '\'' || c == '"':
			i++
			for i < n && code[i] != c && code[i] != '\n' {
				if code[i] == '\\' {
					i++
				}
				i++
			}
			i++
			regexOK, prefix = false, 0
			resetChain()
			continue
		case c == '`':
			resetChain()
			stack = append(stack, jsLevel{open: '`'})
			i++
			prefix = 0
			if depth() > MaxNesting {
				return nestingError(code, i-1, "brackets")
			}
			continue
		case c == '/' && regexOK:
			i++
			class := false
			for i < n && code[i] != '\n' {
				if code[i] == '\\' {
					i += 2
					continue
				}
				if code[i] == '[' {
					class = true
				} else if code[i] == ']' {
					class = false
				} else if code[i] == '/' && !class {
					break
				}
				i++
			}
			i++
			for i < n && isWordByte(code[i]) {
				i++ // flags
			}
			regexOK, prefix = false, 0
			resetChain()
			continue
		case isWordByte(c):
			start := i
			for i < n && isWordByte(code[i]) {
				i++
			}
			word := code[start:i]
			inRun := labels
			labels = 0
			switch {
			case jsChainWords[word]:
				stack[len(stack)-1].chain++
				chains++
				prefix = 0
				if depth() > MaxNesting {
					return nestingError(code, start, "statements without braces or chained arrow functions")
				}
			case jsPrefixWords[word]:
				prefix++
				if prefix > MaxNesting {
					return nestingError(code, start, "prefix operators")
				}
			default:
				prefix = 0
				rest := skipJSSpace(code[i:])
				if strings.HasPrefix(rest, ":") {
					// A label, or an object's key, a conditional's
					// branch, a type annotation, a case (each followed
					// by an operand, which ends the run and the chain).
					// A label is no operand: the statement it labels
					// is in the chain it stands in (l: for (…) l: …).
					// Labels in a row nest each statement in the one
					// before, as if does, and a parser checks each
					// against all those around it.
					if inRun > 0 {
						stack[len(stack)-1].chain++
						chains++
						if depth() > MaxNesting {
							return nestingError(code, start, "statements without braces or chained arrow functions")
						}
					}
					labels = inRun + 1
					i = n - len(rest) + 1
					regexOK = true
					continue
				}
				if !strings.HasPrefix(rest, "=>") {
					// An operand ends a chain: what follows is not nested
					// in the statement before it. The parameter of an
					// arrow is part of the arrow.
					resetChain()
				}
			}
			regexOK = jsRegexAfter[word]
			continue
		case c == '(' || c == '[' || c == '{':
			stack = append(stack, jsLevel{open: c})
			i++
			regexOK, prefix = true, 0
			if depth() > MaxNesting {
				return nestingError(code, i-1, what())
			}
			continue
		case c == ')' || c == ']' || c == '}':
			if len(stack) > 1 {
				chains -= stack[len(stack)-1].chain
				rights -= stack[len(stack)-1].right
				stack = stack[:len(stack)-1]
			}
			i++
			prefix = 0
			regexOK = c == '}'
			if c == '}' {
				// The end of a block ends the statements it was the body
				// of; the end of a template's substitution returns to
				// its text.
				resetChain()
				resetRight()
			}
			continue
		case c == '=' && i+1 < n && code[i+1] == '>':
			stack[len(stack)-1].chain++
			chains++
			i += 2
			regexOK, prefix = true, 0
			if depth() > MaxNesting {
				return nestingError(code, i-2, "statements without braces or chained arrow functions")
			}
			continue
		case c == '=':
			// ==, === and =>'s kin are not assignments; <= and >= (one
			// < or >) and != are comparisons. =, op= and <<=, >>= are.
			run := 1
			for i+run < n && code[i+run] == '=' {
				run++
			}
			prev := byte(0)
			if i > 0 {
				prev = code[i-1]
			}
			comparison := run > 1 || prev == '!' || prev == '=' ||
				(prev == '<' || prev == '>') && !(i > 1 && code[i-2] == prev)
			if comparison {
				i += run
				regexOK, prefix = true, 0
				continue
			}
			if err := nestRight(i, 1); err != nil {
				return err
			}
			continue
		case c == '?':
			if i+1 < n && (code[i+1] == '.' && !(i+2 < n && code[i+2] >= '0' && code[i+2] <= '9') || code[i+1] == '?') {
				// ?. and ?? (??= is an assignment, read next).
				i += 2
				if code[i-1] == '?' && i < n && code[i] == '=' {
					if err := nestRight(i-2, 1); err != nil {
						return err
					}
					continue
				}
				regexOK, prefix = true, 0
				continue
			}
			if err := nestRight(i, 1); err != nil {
				return err
			}
			continue
		case c == '*' && i+1 < n && code[i+1] == '*':
			if i+2 < n && code[i+2] == '=' {
				if err := nestRight(i, 3); err != nil {
					return err
				}
				continue
			}
			if err := nestRight(i, 2); err != nil {
				return err
			}
			continue
		case c == ';' || c == ',':
			resetChain()
			resetRight()
			i++
			regexOK, prefix = true, 0
			continue
		case c == '!' || c == '~' || c == '+' || c == '-':
			if i+1 < n && code[i+1] == c && c != '!' && c != '~' {
				i++ // ++ and --
			}
			i++
			prefix++
			regexOK = true
			if prefix > MaxNesting {
				return nestingError(code, i-1, "prefix operators")
			}
			continue
		default:
			i++
			regexOK, prefix = true, 0
		}
	}
	return nil
}

func isWordByte(c byte) bool {
	return c == '_' || c == '$' || c >= 0x80 || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// startsJSSpace reports whether s starts with white space or a comment.
func startsJSSpace(s string) bool {
	return s != "" && (s[0] == ' ' || s[0] == '\t' || s[0] == '\n' || s[0] == '\r' || s[0] == '\v' || s[0] == '\f' ||
		strings.HasPrefix(s, "//") || strings.HasPrefix(s, "/*"))
}

// skipJSSpace skips white space and comments.
func skipJSSpace(s string) string {
	for {
		t := strings.TrimLeft(s, " \t\r\n\v\f")
		switch {
		case strings.HasPrefix(t, "//"):
			if j := strings.IndexByte(t, '\n'); j >= 0 {
				s = t[j:]
				continue
			}
			return ""
		case strings.HasPrefix(t, "/*"):
			if j := strings.Index(t[2:], "*/"); j >= 0 {
				s = t[2+j+2:]
				continue
			}
			return ""
		}
		return t
	}
}

// Shell words that open and close compound commands.
var (
	shellOpenWords  = map[string]bool{"if": true, "while": true, "until": true, "for": true, "case": true, "select": true}
	shellCloseWords = map[string]bool{"fi": true, "done": true, "esac": true}
	// Words after which a command starts.
	shellLeadWords = map[string]bool{"then": true, "do": true, "else": true, "elif": true, "!": true, "time": true}
)

func shellNesting(code string) *NestingError {
	// Levels: '(' a subshell, command or arithmetic substitution; '{' a
	// group or parameter expansion; '"' a double-quoted string; '`' a
	// backquoted substitution; 'k' a compound command.
	stack := []byte{0}
	push := func(c byte, at int) *NestingError {
		stack = append(stack, c)
		if len(stack)-1 > MaxNesting {
			return nestingError(code, at, "shell groups, substitutions and compound commands")
		}
		return nil
	}
	pop := func(c byte) {
		if len(stack) > 1 && stack[len(stack)-1] == c {
			stack = stack[:len(stack)-1]
		}
	}
	n := len(code)
	i := 0
	command := true // at the start of a command
	for i < n {
		c := code[i]
		if stack[len(stack)-1] == '"' {
			switch {
			case c == '\\':
				i += 2
			case c == '"':
				pop('"')
				i++
			case c == '`':
				if err := push('`', i); err != nil {
					return err
				}
				i++
				command = true
			case c == '$' && i+1 < n && (code[i+1] == '(' || code[i+1] == '{'):
				if err := push(code[i+1], i); err != nil {
					return err
				}
				i += 2
				command = code[i-1] == '('
			default:
				i++
			}
			continue
		}
		switch c {
		case ' ', '\t', '\r':
			i++
		case '\n', ';', '&', '|':
			i++
			command = true
		case '\\':
			i += 2
			command = false
		case '\'':
			if j := strings.IndexByte(code[i+1:], '\''); j >= 0 {
				i += j + 2
			} else {
				i = n
			}
			command = false
		case '"':
			if err := push('"', i); err != nil {
				return err
			}
			i++
			command = false
		case '`':
			if stack[len(stack)-1] == '`' {
				pop('`')
				command = false
			} else {
				if err := push('`', i); err != nil {
					return err
				}
				command = true
			}
			i++
		case '$':
			if i+1 < n && (code[i+1] == '(' || code[i+1] == '{') {
				if err := push(code[i+1], i); err != nil {
					return err
				}
				command = code[i+1] == '('
				i += 2
			} else {
				i++
				command = false
			}
		case '(', '{':
			if err := push(c, i); err != nil {
				return err
			}
			i++
			command = true
		case ')':
			pop('(')
			i++
			command = false
		case '}':
			pop('{')
			i++
			command = false
		case '#':
			if i == 0 || strings.IndexByte(" \t\n;&|()", code[i-1]) >= 0 {
				for i < n && code[i] != '\n' {
					i++
				}
			} else {
				i++
			}
		default:
			start := i
			for i < n && strings.IndexByte(" \t\r\n;&|()<>'\"`$\\{}", code[i]) < 0 {
				i++
			}
			if i == start {
				i++ // < or >
				command = false
				continue
			}
			word := code[start:i]
			switch {
			case command && shellOpenWords[word]:
				if err := push('k', start); err != nil {
					return err
				}
			case command && shellCloseWords[word]:
				pop('k')
				command = false
			case command && shellLeadWords[word]:
			default:
				command = false
			}
		}
	}
	return nil
}
