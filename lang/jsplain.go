package lang

import (
	"encoding/base64"
	"encoding/json"
	"sort"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/dop251/goja/ast"
	"github.com/dop251/goja/parser"
	"github.com/dop251/goja/token"
)

// A live session's JavaScript cell is most often a few plain statements
// (x += 1, a call, a declaration), for which esbuild's transform, built
// to bundle, costs more than the cell itself. plainCell prepares such a
// cell from goja's syntax tree alone: the same function around the same
// text, the final expression returned and the top-level declarations made
// globals, as Transpile and liveDeclarations would make them, and a source
// map of its own. Anything it is not sure of — a program goja cannot read,
// TypeScript, an edit it cannot place — goes the long way, through
// esbuild, which also words the syntax errors.
//
// It runs in the codecell process, as liveDeclarations does, behind
// CheckNesting: goja's parser recurses once per level of nesting, and
// that is bounded before any parser reads the program.

// plainCell prepares a JavaScript cell, or says ok false.
func plainCell(code, filename string) (cell *Cell, ok bool) {
	defer func() {
		if r := recover(); r != nil {
			cell, ok = nil, false
		}
	}()
	return plainCellOf(code, filename)
}

// plainCellOf is plainCell, a panic of the parser's not recovered.
func plainCellOf(code, filename string) (cell *Cell, ok bool) {
	body := hideShebang(code)
	imports := strings.Contains(code, "import") || strings.Contains(code, "export")
	if imports {
		body = rewriteModuleSyntax(body, false)
		if strings.Count(body, "\n") != strings.Count(code, "\n") {
			return nil, false // the rewrite must keep every line where it was
		}
	}
	src := mainHeader + body + "\n}"
	parsed := src
	if imports {
		parsed = dynamicImportRE().ReplaceAllString(src, "$$mport$1")
	}
	prog, err := parser.ParseFile(nil, "", parsed, parser.IgnoreRegExpErrors, parser.WithDisableSourceMaps)
	if err != nil || len(prog.Body) != 1 {
		return nil, false
	}
	fd, isFunc := prog.Body[0].(*ast.FunctionDeclaration)
	if !isFunc || fd.Function.Body == nil || fd.Function.Name == nil || fd.Function.Name.Name != "__codecell_main__" {
		return nil, false
	}
	main := fd.Function.Body
	var edits []textEdit
	var bound boundNames
	add := bound.add
	var functions []string
	stmts := main.List
	prevEnd := len(mainHeader) // where the statement before ends, or -1 when goja cannot say
	for i, st := range stmts {
		at, end := int(st.Idx0())-1, stmtEnd(st)-1
		edited := false
		switch st.(type) {
		case *ast.VariableStatement, *ast.LexicalDeclaration, *ast.ClassDeclaration, *ast.ExpressionStatement:
			edited = true
		}
		// An edited statement must be where goja says: from at, after
		// nothing but the previous statement's end, to end, followed by
		// nothing but its own (a semicolon, a line's end, the body's end).
		// goja's positions are not all exact, and an edit in the wrong
		// place would change the program: then esbuild does it.
		if edited && (prevEnd < 0 || at < prevEnd || end <= at || end >= len(src) || !onlyEnd(src[prevEnd:at]) || !endsHere(src, end)) {
			return nil, false
		}
		prevEnd = -1
		if end > at && at >= len(mainHeader) && end < len(src) {
			prevEnd = end
		}
		switch st := st.(type) {
		case *ast.VariableStatement:
			e, ok := plainDecl(src, at, end, "var", st.List, add)
			if !ok {
				return nil, false
			}
			edits = append(edits, e...)
		case *ast.LexicalDeclaration:
			kw := "let"
			if st.Token == token.CONST {
				kw = "const"
			}
			e, ok := plainDecl(src, at, end, kw, st.List, add)
			if !ok {
				return nil, false
			}
			edits = append(edits, e...)
		case *ast.FunctionDeclaration:
			if n := st.Function.Name; n != nil {
				add(n.Name.String())
				functions = append(functions, n.Name.String())
			}
		case *ast.ClassDeclaration:
			c := st.Class
			if c.Name == nil || !strings.HasPrefix(src[at:], "class") || src[end-1] != '}' {
				return nil, false
			}
			add(c.Name.Name.String())
			edits = append(edits, textEdit{at, at, c.Name.Name.String() + " = "}, textEdit{end, end, ";"})
		case *ast.ExpressionStatement:
			if i == len(stmts)-1 {
				edits = append(edits, textEdit{at, at, "return ("}, textEdit{end, end, ");"})
			}
		}
	}
	if len(functions) > 0 {
		edits = append(edits, hoistFunctions(int(main.LeftBrace), functions))
	}
	// Where two edits start together, the insertion goes first.
	sort.SliceStable(edits, func(i, j int) bool {
		return edits[i].at < edits[j].at || edits[i].at == edits[j].at && edits[i].end < edits[j].end
	})
	js, mappings, ok := applyMapped(src, edits, len(mainHeader))
	if !ok {
		return nil, false
	}
	// What the edits made must still read as one program.
	check := js
	if imports {
		check = dynamicImportRE().ReplaceAllString(js, "$$mport$1")
	}
	if _, err := parser.ParseFile(nil, "", check, parser.IgnoreRegExpErrors, parser.WithDisableSourceMaps); err != nil {
		return nil, false
	}
	sm, err := json.Marshal(map[string]any{
		"version":        3,
		"sources":        []string{"src/" + filename},
		"sourcesContent": []string{code},
		"names":          []string{},
		"mappings":       mappings,
	})
	if err != nil {
		return nil, false
	}
	out := js + "\nmodule.exports = __codecell_main__;\n//# sourceMappingURL=data:application/json;base64," +
		base64.StdEncoding.EncodeToString(sm) + "\n"
	return &Cell{Code: out, Globals: bound.names}, true
}

// onlyEnd reports whether s holds nothing but a statement's end: space,
// semicolons and comments.
func onlyEnd(s string) bool {
	for s != "" {
		switch {
		case s[0] == ' ' || s[0] == '\t' || s[0] == '\n' || s[0] == '\r' || s[0] == ';':
			s = s[1:]
		case strings.HasPrefix(s, "//"):
			i := strings.IndexByte(s, '\n')
			if i < 0 {
				return true
			}
			s = s[i:]
		case strings.HasPrefix(s, "/*"):
			i := strings.Index(s[2:], "*/")
			if i < 0 {
				return false
			}
			s = s[i+4:]
		default:
			return false
		}
	}
	return true
}

// endsHere reports whether a statement can end at end: the character
// before is part of it (not space, not a semicolon), and after it come, on
// its line, only space and comments, then a semicolon, the line's end or
// the function's.
func endsHere(src string, end int) bool {
	switch src[end-1] {
	case ' ', '\t', '\n', '\r', ';':
		return false
	}
	s := src[end:]
	for {
		switch {
		case s == "":
			return true
		case s[0] == ' ' || s[0] == '\t':
			s = s[1:]
		case strings.HasPrefix(s, "/*"):
			i := strings.Index(s[2:], "*/")
			if i < 0 {
				return false
			}
			s = s[i+4:]
		default:
			return s[0] == ';' || s[0] == '\n' || s[0] == '\r' || s[0] == '}' || strings.HasPrefix(s, "//")
		}
	}
}

// plainDecl rewrites one top-level declaration, from at to end (its
// semicolon, if any, after end): the keyword becomes "(", the end ");",
// and a let or const without a value gets "= void 0".
func plainDecl(src string, at, end int, kw string, list []*ast.Binding, add func(string)) ([]textEdit, bool) {
	if !strings.HasPrefix(src[at:], kw) {
		return nil, false
	}
	edits := []textEdit{{at, at + len(kw), "("}}
	for _, b := range list {
		bound(b.Target, add)
		if b.Initializer == nil {
			id, ok := b.Target.(*ast.Identifier)
			if !ok {
				return nil, false
			}
			if kw == "var" {
				continue // var x; keeps x's value, as it would
			}
			e := int(id.Idx) - 1 + len(id.Name.String())
			if e <= at || e > end || src[e-len(id.Name.String()):e] != id.Name.String() {
				return nil, false
			}
			edits = append(edits, textEdit{e, e, " = void 0"})
		}
	}
	return append(edits, textEdit{end, end, ");"}), true
}

// applyMapped applies edits (sorted, none of them holding a newline) to
// src, whose first header bytes are not the program's, and returns the
// result with a source map's mappings from it onto the program, in UTF-16
// columns as V8 counts them: a segment where each line starts, where each
// edit's text starts (at the program's place it goes) and where the
// program's own text resumes after it.
func applyMapped(src string, edits []textEdit, header int) (out string, mappings string, ok bool) {
	var b strings.Builder
	var m mapWriter
	// The header, on the first line: its text, no segment (the program
	// starts after it; no edit may fall in it).
	b.WriteString(src[:header])
	genLine, genCol := 0, utf16Len(src[:header]) // where b's end is
	srcLine, srcCol := 0, 0                      // where src[last] is, in the program
	last := header
	// copyText copies src[last:to] to b, a segment at each token's start.
	copyText := func(to int) {
		if to <= last {
			return
		}
		prev := ' '
		for _, r := range src[last:to] {
			if r == '\n' {
				b.WriteRune(r)
				genLine, genCol = genLine+1, 0
				srcLine, srcCol = srcLine+1, 0
				prev = ' '
				continue
			}
			// A segment at each token's start, as a transpiler writes
			// them: a position between two segments maps to the first.
			if r != ' ' && r != '\t' && !(wordRune(r) && wordRune(prev)) {
				m.segment(genLine, genCol, srcLine, srcCol)
			}
			b.WriteRune(r)
			n := utf16Len(string(r))
			genCol += n
			srcCol += n
			prev = r
		}
		last = to
	}
	for _, e := range edits {
		if e.at < last || e.end < e.at || e.end > len(src) || strings.Contains(e.with, "\n") {
			return "", "", false
		}
		copyText(e.at)
		if e.with != "" {
			// The inserted text stands for where it goes in the program.
			m.segment(genLine, genCol, srcLine, srcCol)
		}
		b.WriteString(e.with)
		genCol += utf16Len(e.with)
		// What the edit replaced is the program's: skip it in the
		// program's columns.
		srcCol += utf16Len(src[e.at:e.end])
		last = e.end
	}
	copyText(len(src))
	return b.String(), m.String(), true
}

// wordRune reports whether r can be part of an identifier or a number.
func wordRune(r rune) bool {
	return r == '_' || r == '$' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= 0x80
}

// stmtEnd is where the statement ends (1-based, after its last character,
// before its semicolon), where goja's Idx1 can be early: a new expression
// with empty arguments ends there, goja says at its callee.
func stmtEnd(st ast.Statement) int {
	switch st := st.(type) {
	case *ast.ExpressionStatement:
		return exprEnd(st.Expression)
	case *ast.VariableStatement:
		return bindingEnd(st.List[len(st.List)-1])
	case *ast.LexicalDeclaration:
		return bindingEnd(st.List[len(st.List)-1])
	}
	return int(st.Idx1())
}

func bindingEnd(b *ast.Binding) int {
	if b.Initializer != nil {
		return exprEnd(b.Initializer)
	}
	return int(b.Target.Idx1())
}

func exprEnd(e ast.Expression) int {
	switch e := e.(type) {
	case *ast.NewExpression:
		if e.RightParenthesis > 0 {
			return int(e.RightParenthesis) + 1
		}
		return exprEnd(e.Callee)
	case *ast.AssignExpression:
		return exprEnd(e.Right)
	case *ast.BinaryExpression:
		return exprEnd(e.Right)
	case *ast.ConditionalExpression:
		return exprEnd(e.Alternate)
	case *ast.SequenceExpression:
		return exprEnd(e.Sequence[len(e.Sequence)-1])
	case *ast.AwaitExpression:
		return exprEnd(e.Argument)
	case *ast.UnaryExpression:
		if e.Postfix {
			return exprEnd(e.Operand) + 2
		}
		return exprEnd(e.Operand)
	case *ast.ArrowFunctionLiteral:
		if body, ok := e.Body.(*ast.ExpressionBody); ok {
			return exprEnd(body.Expression)
		}
	}
	return int(e.Idx1())
}

// utf16Len is s's length in UTF-16 code units.
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		if r == utf8.RuneError {
			n++
			continue
		}
		n += utf16.RuneLen(r)
	}
	return n
}

// mapWriter writes a source map's mappings: segments of one source, each
// field relative to the one before (columns within a line), in base64 VLQ.
type mapWriter struct {
	b                             strings.Builder
	line                          int // generated lines written so far
	prevCol, prevSrcLine, prevSrc int
	inLine                        bool
}

func (m *mapWriter) segment(genLine, genCol, srcLine, srcCol int) {
	for m.line < genLine {
		m.b.WriteByte(';')
		m.line++
		m.prevCol, m.inLine = 0, false
	}
	if m.inLine {
		m.b.WriteByte(',')
	}
	// The one source: its index stays 0.
	m.b.WriteString(encodeVLQs([]int{genCol - m.prevCol, 0, srcLine - m.prevSrcLine, srcCol - m.prevSrc}))
	m.prevCol, m.prevSrcLine, m.prevSrc, m.inLine = genCol, srcLine, srcCol, true
}

func (m *mapWriter) String() string { return m.b.String() }
