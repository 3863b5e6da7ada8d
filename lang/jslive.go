package lang

import (
	"fmt"
	"sort"
	"strings"

	"github.com/codecell-dev/codecell/internal/lazyre"

	"github.com/dop251/goja/ast"
	"github.com/dop251/goja/parser"
	"github.com/dop251/goja/token"
)

// A JavaScript program runs as the body of one async function (see
// Transpile), so its top-level declarations are that function's locals,
// gone when it returns. In a live session they must outlive the cell, as a
// notebook's do: liveDeclarations rewrites each top-level declaration of a
// transpiled program into assignments to globals, which the next cell
// finds as it finds any global.
//
//	const {a, b} = f(), c = 1;   becomes   ({a, b} = f(), c = 1);
//	let d;                       becomes   (d = void 0);
//	class E {}                   becomes   E = class E {};
//	function g() {}              stays, and the body starts with globalThis.g = g;
//
// The runner defines each name as a global (undefined) before the cell
// runs, if it is not one, so that the assignments work in strict code too.
// What is lost is const's immutability and the temporal dead zone: a name
// may be declared again by a later cell, as a notebook's cell is run
// again. Every edit keeps the program's lines, so that its source map and
// line numbers still hold.

// dynamicImportRE finds import( calls, which goja's parser does not know:
// they are read as calls of a function of the same length.
var dynamicImportRE = lazyre.New(`\bimport(\s*\()`)

// liveDeclarations rewrites the transpiled program js for a live session,
// and returns the names its top-level declarations bind. err says why the
// program could not be read (the cell then runs with its declarations
// local to it).
func liveDeclarations(js string) (out string, names []string, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, names, err = js, nil, fmt.Errorf("parser failure: %v", r)
		}
	}()
	parsed := dynamicImportRE().ReplaceAllString(js, "$$mport$1")
	prog, err := parser.ParseFile(nil, "", parsed, parser.IgnoreRegExpErrors, parser.WithDisableSourceMaps)
	if err != nil {
		return js, nil, err
	}
	var main *ast.FunctionLiteral
	for _, st := range prog.Body {
		if fd, ok := st.(*ast.FunctionDeclaration); ok && fd.Function.Name != nil && fd.Function.Name.Name == "__codecell_main__" {
			main = fd.Function
		}
	}
	if main == nil || main.Body == nil {
		return js, nil, fmt.Errorf("the program's function is missing")
	}
	var edits []textEdit
	var bound boundNames
	add := bound.add
	var functions []string
	body := main.Body.List
	bodyEnd := int(main.Body.RightBrace) - 1
	if bodyEnd <= 0 || bodyEnd > len(js) {
		return js, nil, fmt.Errorf("the program's function has no end")
	}
	for i, st := range body {
		next := bodyEnd
		if i+1 < len(body) {
			next = int(body[i+1].Idx0()) - 1
			if next <= 0 || next > bodyEnd {
				continue // no telling where this statement ends: it stays as it is
			}
		}
		// Where the statement's semicolon is: the last character before
		// the next statement that is not space (esbuild ends each one
		// with a semicolon), or before the " return (" a final
		// expression's line was given.
		end := strings.TrimRight(strings.TrimSuffix(strings.TrimRight(js[:next], " \t\n"), " return ("), " \t\n")
		semi := len(end) - 1
		switch st := st.(type) {
		case *ast.VariableStatement:
			edits = appendDecl(edits, js, int(st.Var)-1, "var", st.List, semi, add)
		case *ast.LexicalDeclaration:
			kw := "let"
			if st.Token == token.CONST {
				kw = "const"
			}
			edits = appendDecl(edits, js, int(st.Idx)-1, kw, st.List, semi, add)
		case *ast.FunctionDeclaration:
			if n := st.Function.Name; n != nil {
				add(n.Name.String())
				functions = append(functions, n.Name.String())
			}
		case *ast.ClassDeclaration:
			c := st.Class
			if c.Name == nil || semi < 0 || js[semi] != '}' {
				continue
			}
			at := int(c.Class) - 1
			if !strings.HasPrefix(js[at:], "class") {
				continue
			}
			add(c.Name.Name.String())
			edits = append(edits, textEdit{at, at, c.Name.Name.String() + " = "}, textEdit{semi + 1, semi + 1, ";"})
		}
	}
	if len(functions) > 0 {
		edits = append(edits, hoistFunctions(int(main.Body.LeftBrace), functions))
	}
	names = bound.names
	sort.SliceStable(edits, func(i, j int) bool { return edits[i].at < edits[j].at })
	var b strings.Builder
	last := 0
	for _, e := range edits {
		if e.at < last {
			return js, nil, fmt.Errorf("overlapping edits")
		}
		b.WriteString(js[last:e.at])
		b.WriteString(e.with)
		last = e.end
	}
	b.WriteString(js[last:])
	return b.String(), names, nil
}

// boundNames gathers the names a cell's top-level declarations bind, each
// once, in order.
type boundNames struct {
	names []string
	seen  map[string]bool
}

func (b *boundNames) add(n string) {
	if n == "" || b.seen[n] {
		return
	}
	if b.seen == nil {
		b.seen = map[string]bool{}
	}
	b.seen[n] = true
	b.names = append(b.names, n)
}

// hoistFunctions is the edit that makes each of a cell's function
// declarations the global of its name from the start of the body (open,
// just after its brace), as declarations are hoisted.
func hoistFunctions(open int, functions []string) textEdit {
	var b strings.Builder
	for _, f := range functions {
		fmt.Fprintf(&b, " globalThis.%s = %s;", f, f)
	}
	return textEdit{open, open, b.String()}
}

// textEdit replaces text[at:end] with with.
type textEdit struct {
	at, end int
	with    string
}

// appendDecl rewrites one top-level declaration that starts with keyword
// kw at at and whose semicolon is at semi: the keyword becomes "(", the
// semicolon ");", and a let or const without a value gets "= void 0".
func appendDecl(edits []textEdit, js string, at int, kw string, list []*ast.Binding, semi int, add func(string)) []textEdit {
	if semi < 0 || semi >= len(js) || js[semi] != ';' || !strings.HasPrefix(js[at:], kw) {
		return edits
	}
	var more []textEdit
	for _, b := range list {
		bound(b.Target, add)
		if b.Initializer == nil {
			id, ok := b.Target.(*ast.Identifier)
			if !ok {
				return edits
			}
			if kw == "var" {
				// var x; keeps x's value, as it would.
				continue
			}
			end := int(id.Idx) - 1 + len(id.Name.String())
			more = append(more, textEdit{end, end, " = void 0"})
		}
	}
	edits = append(edits, textEdit{at, at + len(kw), "("})
	edits = append(edits, more...)
	return append(edits, textEdit{semi, semi + 1, ");"})
}

// bound calls add with each name a binding target binds.
func bound(t ast.Expression, add func(string)) {
	switch t := t.(type) {
	case *ast.Identifier:
		add(t.Name.String())
	case *ast.ObjectPattern:
		for _, p := range t.Properties {
			switch p := p.(type) {
			case *ast.PropertyShort:
				add(p.Name.Name.String())
			case *ast.PropertyKeyed:
				bound(p.Value, add)
			}
		}
		if t.Rest != nil {
			bound(t.Rest, add)
		}
	case *ast.ArrayPattern:
		for _, e := range t.Elements {
			if e != nil {
				bound(e, add)
			}
		}
		if t.Rest != nil {
			bound(t.Rest, add)
		}
	case *ast.AssignExpression:
		bound(t.Left, add)
	case *ast.SpreadElement:
		bound(t.Expression, add)
	}
}
