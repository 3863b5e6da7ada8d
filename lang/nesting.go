package lang

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxNesting is how deeply a JavaScript, TypeScript or shell program may
// nest: brackets, template substitutions, chained arrow functions and
// statements without braces (if (a) if (b) …), runs of prefix operators
// (!!!x), chains of right-associative operators (x = y = z, a ? b : c ?
// d : e, a ** b ** c), and shell's groups, substitutions and compound commands. Python
// allows 200 nested brackets; code a person or a model writes stays far
// below either. Deeper programs are refused before any parser reads them:
// the parsers recurse once per level, and some print each level indented,
// so that their time and output grow with the square of the depth.
const MaxNesting = 256

// MaxSequence is how many expressions a JavaScript or TypeScript comma
// expression (a, b, c) may join. esbuild reads a comma expression as a
// chain of pairs, each nested in the next, and simplifies the chain once
// per pair, so that its time grows with the square of the length: 10,000
// parts take seconds. Minified code joins tens or hundreds; array and
// object literals, arguments, parameters and declarations are lists, not
// comma expressions, and have no such limit.
const MaxSequence = 1000

// MaxRedeclared is how many declarations in one JavaScript or TypeScript
// scope may repeat a name declared there before (let a; let a, two
// #a fields, two __proto__ properties). Each is a syntax error, and esbuild
// places each error, and a note on the first declaration, by scanning the
// program between the two: thousands of them take time with the square of
// the program's length, to report an error the first one already shows.
const MaxRedeclared = 64

// MaxAngles is how many < may follow a name in one TypeScript expression
// without a > to match them. Each may open type arguments (f<T>(x)), which
// esbuild finds out by reading ahead, so that a<b<c<… takes time growing
// faster than its length: 4,000 of them take a second, and a program of
// runs of a few hundred, minutes. (In JavaScript a < is a comparison,
// read once: a condition of many comparisons is not refused there.)
const MaxAngles = 64

// MaxDecorated is how many decorators one class body may hold. esbuild
// writes a class's decorators as calls, in time with the square of their
// number.
const MaxDecorated = 256

// NestingError is a program that nests deeper than MaxNesting.
type NestingError struct {
	Line, Column int // 1-based, where the limit was passed
	// What nests: "brackets", "prefix operators", "statements without
	// braces or chained arrow functions", "shell groups and compound
	// commands"; or, when Complex, what makes it too costly to read:
	// "a comma expression of more than 1000 parts".
	What string
	// Complex is set when the program is refused for its cost to read,
	// not for its depth.
	Complex bool
}

func (e *NestingError) Error() string {
	if e.Complex {
		return fmt.Sprintf("line %d, column %d: the program has %s", e.Line, e.Column, e.What)
	}
	return fmt.Sprintf("line %d, column %d: the program nests more than %d levels deep (%s)", e.Line, e.Column, MaxNesting, e.What)
}

// CheckNesting reads a program in one pass, without parsing it, and
// returns where it first nests deeper than MaxNesting, or nil. It knows
// JavaScript, TypeScript and shell; other languages' programs are parsed
// by their own interpreters, in the sandbox, and return nil.
func (l *Language) CheckNesting(code string) *NestingError {
	switch l.Name {
	case "javascript", "typescript":
		return jsNesting(code, l.Name == "typescript")
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

// complexError is a program that is too costly to read, though it does
// not nest too deeply (NestingError.Complex).
func complexError(code string, off int, what string) *NestingError {
	e := nestingError(code, off, what)
	e.Complex = true
	return e
}

// jsLevel is one open bracket of a JavaScript program: '(', '[', '{', '`'
// (a template's text) or '$' (a template's ${…}). chain counts the
// statements without braces and arrow functions that nest in it without
// a bracket of their own; right the right-associative operators (an
// assignment, a conditional's ?, **) in the expression that runs in it:
// each nests the rest of the expression one level deeper. seq is set when
// a comma in it joins a comma expression (a statement, a condition, a
// parenthesised expression) rather than a list (arguments, elements, an
// object's properties); commas counts the commas of the current one, and
// decl is set in a declaration (var a = 1, b = 2), whose commas are a list.
type jsLevel struct {
	open   byte
	chain  int
	right  int
	seq    bool
	decl   bool
	commas int
	// caseOpen is set between a case (or default) and its colon.
	caseOpen bool
	// names counts the names declared in the level (a block or a class
	// body), and redeclared the declarations of a name declared before.
	names      map[string]int
	redeclared int
	// classNext is set between class and its body; classBody in the body.
	classNext, classBody bool
	// pattern is set in a destructuring pattern of a let or a const,
	// whose names are declared in the level scope.
	pattern bool
	scope   int
	// angles counts the < after names in the current expression that no
	// > matched; decorated the decorators of a class body.
	angles, decorated int
	// enumNext is set between enum and its body; enumBody in the body.
	enumNext, enumBody bool
}

// declare counts a declaration of name in l, of which allowed may be in
// one scope, and reports whether l has more than MaxRedeclared too many.
func (l *jsLevel) declare(name string, allowed int) bool {
	if l.names == nil {
		l.names = map[string]int{}
	}
	l.names[name]++
	if l.names[name] > allowed {
		l.redeclared++
	}
	return l.redeclared > MaxRedeclared
}

// Keywords that declare the name that follows them in the block they are in.
var jsDeclareWords = map[string]bool{"let": true, "const": true, "class": true, "import": true}

// Words after a declaring keyword that are not the name it declares.
var jsNotNames = map[string]bool{
	"enum": true, "type": true, "from": true, "of": true, "in": true, "extends": true, "implements": true,
	"function": true, "async": true, "await": true, "yield": true, "static": true, "as": true, "default": true,
}

// Keywords that nest a statement, or an arrow's body, without a bracket.
var jsChainWords = map[string]bool{"if": true, "for": true, "while": true, "with": true, "do": true, "else": true}

// Keywords after which ( opens an expression, not arguments.
var jsParenWords = map[string]bool{"if": true, "while": true, "for": true, "with": true, "switch": true, "catch": true}

// Keywords after which { opens a block, whose commas join comma
// expressions; after other words it opens a class body, an import or
// export list or an enum.
var jsBlockWords = map[string]bool{"else": true, "try": true, "finally": true, "do": true, "static": true, "namespace": true, "module": true, "global": true}

// Keywords that are prefix operators.
var jsPrefixWords = map[string]bool{"typeof": true, "void": true, "delete": true, "await": true, "new": true, "yield": true}

// Keywords after which a / starts a regular expression.
var jsRegexAfter = map[string]bool{
	"return": true, "typeof": true, "instanceof": true, "in": true, "of": true, "new": true, "delete": true,
	"void": true, "throw": true, "case": true, "do": true, "else": true, "yield": true, "await": true,
}

func jsNesting(code string, ts bool) *NestingError {
	stack := []jsLevel{{seq: true}}
	chains := 0     // the sum of the levels' chains
	rights := 0     // the sum of the levels' right-associative operators
	prefix := 0     // prefix operators in a row
	regexOK := true // whether a / here starts a regular expression
	// The last token: 0 at the start, 'w' a word (lastWord), 'L' a label's
	// or a case's colon, 'A' an arrow's =>, 's' a string, a number or a
	// regular expression, else its punctuation.
	last, lastWord := byte(0), ""
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
	// The end of a statement ends its comma expression and its declaration.
	endStatement := func() {
		resetRight()
		stack[len(stack)-1].commas = 0
		stack[len(stack)-1].decl = false
		stack[len(stack)-1].angles = 0
	}
	n := len(code)
	i := 0
	nestRight := func(at, width int) *NestingError {
		stack[len(stack)-1].right++
		rights++
		i += width
		regexOK, prefix, last = true, 0, '='
		stack[len(stack)-1].caseOpen = false
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
				regexOK, prefix, last = false, 0, 's'
				continue
			}
			stack = append(stack, jsLevel{open: '$', seq: true})
			i += 2
			regexOK, prefix, last = true, 0, '$'
			if depth() > MaxNesting {
				return nestingError(code, i-2, "brackets")
			}
			continue
		}
		c := code[i]
		switch {
		case c == '\n' && !regexOK:
			// A line that ends with an operand and a next that starts
			// with one: a new statement (a semicolon is inserted), which
			// ends the expression's chain.
			if t := skipJSSpace(code[i:]); t != "" && (isWordByte(t[0]) || t[0] == '\'' || t[0] == '"' || t[0] == '`') {
				endStatement()
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
			regexOK, prefix, last = false, 0, 's'
			resetChain()
			continue
		case c == '`':
			resetChain()
			stack = append(stack, jsLevel{open: '`'})
			i++
			prefix, last = 0, '`'
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
			regexOK, prefix, last = false, 0, 's'
			resetChain()
			continue
		case isWordByte(c) || isUnicodeEscape(code[i:]):
			start := i
			for i < n {
				if isUnicodeEscape(code[i:]) {
					// \u0061 or \u{61}: a name's letter, written as an escape.
					i += 2
					if i < n && code[i] == '{' {
						if end := strings.IndexByte(code[i:], '}'); end >= 0 {
							i += end
						}
					}
					i++
					continue
				}
				if !isWordByte(code[i]) {
					break
				}
				i++
			}
			if i > n {
				i = n
			}
			word := code[start:i]
			top := &stack[len(stack)-1]
			redeclared := false
			switch {
			case last == 'w' && jsDeclareWords[lastWord] && !jsNotNames[word]:
				redeclared = top.declare(word, 1)
			case last == '#' && top.classBody && !(start >= 2 && code[start-2] == '.'):
				// A getter and a setter share a private name.
				redeclared = top.declare("#"+word, 2)
			case top.enumBody && (last == '{' || last == ','):
				redeclared = top.declare(word, 1)
			case word == "__proto__" && isLabelColon(code[i:]):
				redeclared = top.declare(word, 1)
			case top.pattern && (last == '{' || last == '[' || last == ',' || last == ':' || last == '.') && patternNameEnd(code[i:]):
				redeclared = stack[top.scope].declare(word, 1)
			}
			if redeclared {
				return complexError(code, start, fmt.Sprintf("more than %d declarations of names declared before in the same scope (each a syntax error: declare a name once)", MaxRedeclared))
			}
			switch word {
			case "class":
				top.classNext = true
			case "enum":
				top.enumNext = true
			}
			labelAt := last == 0 || last == ';' || last == '}' || last == ')' || last == 'L' ||
				last == 'w' && (lastWord == "do" || lastWord == "else")
			last, lastWord = 'w', word
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
			case labelAt && isLabelColon(code[i:]):
				// A label nests the statement it names, as if does;
				// labels in a row nest as deeply as there are labels.
				stack[len(stack)-1].chain++
				chains++
				prefix = 0
				if depth() > MaxNesting {
					return nestingError(code, start, "labels, statements without braces or chained arrow functions")
				}
				i += strings.IndexByte(code[i:], ':') + 1
				regexOK, last = true, 'L'
				continue
			default:
				prefix = 0
				if !strings.HasPrefix(skipJSSpace(code[i:]), "=>") {
					// An operand ends a chain: what follows is not nested
					// in the statement before it. The parameter of an
					// arrow is part of the arrow.
					resetChain()
				}
				switch word {
				case "var", "let", "const":
					stack[len(stack)-1].decl = true
				case "case", "default":
					stack[len(stack)-1].caseOpen = true
				}
			}
			regexOK = jsRegexAfter[word]
			continue
		case c == '(' || c == '[' || c == '{':
			// Whether its commas join a comma expression: a ( that
			// follows an operand opens arguments or parameters, one that
			// follows an operator or a keyword an expression; a { opens a
			// block after a statement, an arrow or a label, else an
			// object, a class or a list of names.
			seq := false
			switch c {
			case '(':
				seq = regexOK || last == 'w' && jsParenWords[lastWord]
			case '{':
				seq = last == 0 || last == ')' || last == '}' || last == ';' || last == '{' || last == 'L' || last == 'A' ||
					last == 'w' && jsBlockWords[lastWord]
			}
			parent := &stack[len(stack)-1]
			parent.caseOpen = false
			body := c == '{' && parent.classNext
			enum := c == '{' && parent.enumNext
			if c == '{' {
				parent.classNext, parent.enumNext = false, false
			}
			level := jsLevel{open: c, seq: seq && !body && !enum, classBody: body, enumBody: enum}
			switch {
			case c == '(':
			case last == 'w' && (lastWord == "let" || lastWord == "const"):
				level.pattern, level.scope = true, len(stack)-1
			case parent.pattern && last != '=':
				level.pattern, level.scope = true, parent.scope
			}
			stack = append(stack, level)
			i++
			regexOK, prefix, last = true, 0, c
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
			prefix, last = 0, c
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
			regexOK, prefix, last = true, 0, 'A'
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
				regexOK, prefix, last = true, 0, '='
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
				regexOK, prefix, last = true, 0, '?'
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
		case c == ';':
			resetChain()
			endStatement()
			i++
			regexOK, prefix, last = true, 0, c
			continue
		case c == ',':
			resetChain()
			resetRight()
			if top := &stack[len(stack)-1]; top.seq && !top.decl {
				top.commas++
				if top.commas > MaxSequence {
					return complexError(code, i, fmt.Sprintf("a comma expression of more than %d parts", MaxSequence))
				}
			}
			i++
			regexOK, prefix, last = true, 0, c
			continue
		case c == '!' || c == '~' || c == '+' || c == '-':
			if i+1 < n && code[i+1] == c && c != '!' && c != '~' {
				i++ // ++ and --
			}
			i++
			prefix++
			regexOK, last = true, c
			if prefix > MaxNesting {
				return nestingError(code, i-1, "prefix operators")
			}
			continue
		case c == '<' && i+1 < n && (code[i+1] == '<' || code[i+1] == '='):
			// << and <=.
			i += 2
			regexOK, prefix, last = true, 0, c
		case c == '<':
			top := &stack[len(stack)-1]
			if ts && last == 'w' {
				top.angles++
				if top.angles > MaxAngles {
					return complexError(code, i, fmt.Sprintf("more than %d < after names without a matching > in one expression (in TypeScript each may open type arguments)", MaxAngles))
				}
			}
			i++
			regexOK, prefix, last = true, 0, c
		case c == '>':
			if top := &stack[len(stack)-1]; top.angles > 0 {
				top.angles--
			}
			i++
			regexOK, prefix, last = true, 0, c
		case c == '@' && stack[len(stack)-1].classBody:
			top := &stack[len(stack)-1]
			top.decorated++
			if top.decorated > MaxDecorated {
				return complexError(code, i, fmt.Sprintf("a class with more than %d decorators", MaxDecorated))
			}
			i++
			regexOK, prefix, last = true, 0, c
		case c == ':' && stack[len(stack)-1].caseOpen:
			// A case's colon: a { after it opens a block.
			stack[len(stack)-1].caseOpen = false
			i++
			regexOK, prefix, last = true, 0, 'L'
		default:
			i++
			regexOK, prefix, last = true, 0, c
		}
	}
	return nil
}

// patternNameEnd reports whether s, what follows a word in a destructuring
// pattern, makes the word a name the pattern declares: a comma, the
// pattern's end or a default value follows it.
func patternNameEnd(s string) bool {
	t := skipJSSpace(s)
	if t == "" {
		return false
	}
	switch t[0] {
	case ',', '}', ']':
		return true
	case '=':
		return !strings.HasPrefix(t, "==") && !strings.HasPrefix(t, "=>")
	}
	return false
}

// isLabelColon reports whether s, what follows a word, starts with the
// colon that makes the word a label (not ::, which is no JavaScript).
func isLabelColon(s string) bool {
	t := skipJSSpace(s)
	return strings.HasPrefix(t, ":") && !strings.HasPrefix(t, "::")
}

// isUnicodeEscape says whether s starts with a \u escape, which stands
// for a letter of a name outside strings.
func isUnicodeEscape(s string) bool {
	return len(s) > 1 && s[0] == '\\' && s[1] == 'u'
}

func isWordByte(c byte) bool {
	return c == '_' || c == '$' || c >= 0x80 || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
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
