package guard

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/dop251/goja/ast"
	"github.com/dop251/goja/file"
	"github.com/dop251/goja/parser"
	"github.com/dop251/goja/token"

	"github.com/codecell-dev/codecell/lang"
)

// The JavaScript check reads the program as it runs: lang rewrites static
// imports into calls of __codecell_import__, strips TypeScript's types and
// wraps the program in one async function; goja's parser reads the result,
// and esbuild's source map leads every finding back to the user's line and
// column.
//
// goja's parser reads most modern syntax (classes and private fields, async
// functions, optional chaining, ??=, BigInt, spread), but not async
// generator methods in object literals, for await, using declarations,
// decorators or import.meta. esbuild rewrites those into forms it reads
// (gojaLowers); the source map covers the rewriting. It does not read
// import() either, and esbuild can only rewrite that into a require() of
// its own, renaming the program's require: parseScript instead writes an
// identifier of the same length over each import keyword that goja refuses,
// and remembers where, so that the call is still seen as an import.
//
// What follows values is deliberately small. Names are tracked without
// scopes: a name bound anywhere to something refused (const e = eval,
// let g = globalThis, const {exec} = require("child_process"), including
// through destructuring, ||, ?? and ?:) is taken to be it everywhere, and a
// global's name keeps its meaning even where a local shadows it. Such a
// value handed to anything else (an argument, an array, a property, a return)
// is refused where it is handed on, since what happens to it next is not
// followed. The sandbox is the boundary; this check refuses early, with a
// message a model can act on, what plainly breaks the policy.
var gojaLowers = []string{"async-generator", "for-await", "using", "decorators", "import-meta"}

// maxFindings is how many findings a check returns at most.
const maxFindings = 50

// CheckJavaScript checks a JavaScript (or, with typescript, TypeScript)
// program against the categories p blocks, and returns what it refuses,
// positioned in the program's own source (1-based line and column).
// A program that does not parse returns a *lang.SyntaxError and no findings.
func CheckJavaScript(code, filename string, typescript bool, p *Policy) ([]Finding, *lang.SyntaxError) {
	if p == nil || len(p.Block) == 0 {
		return nil, nil
	}
	js, rawMap, syn, err := lang.ScriptForCheck(code, filename, typescript, gojaLowers...)
	if syn != nil {
		return nil, syn
	}
	if err != nil {
		return []Finding{unchecked(p, 1, 1, "the guardrail could not read this program ("+err.Error()+")")}, nil
	}
	sm, err := decodeSourceMap(rawMap)
	if err != nil {
		return []Finding{unchecked(p, 1, 1, "the guardrail could not read its source map ("+err.Error()+")")}, nil
	}
	pos := newPositioner(js, sm, code)
	prog, imports, err := parseScript(js)
	if err != nil {
		line, col, reason := 1, 1, err.Error()
		var list parser.ErrorList
		if errors.As(err, &list) && len(list) > 0 {
			reason = list[0].Message
			if i := strings.Index(reason, "\n"); i >= 0 {
				reason = reason[:i]
			}
			if off := pos.offset(list[0].Position.Line, list[0].Position.Column); off >= 0 {
				line, col = pos.position(off)
			}
		}
		return []Finding{unchecked(p, line, col, "the guardrail's JavaScript parser could not read this program ("+reason+")")}, nil
	}
	c := &jsChecker{policy: p, imports: imports, aliases: map[string][]jsPath{}, declared: map[string]bool{}}
	body := programBody(prog)
	c.mode = modeDeclare
	c.walkBody(body)
	c.mode = modeAlias
	for range 8 {
		c.changed = false
		c.walkBody(body)
		if !c.changed {
			break
		}
	}
	c.mode = modeReport
	c.walkBody(body)
	var deep []Finding
	if c.tooDeep != 0 {
		line, col := pos.position(int(c.tooDeep) - 1)
		deep = append(deep, unchecked(p, line, col, "the program nests deeper than the guardrail follows"))
	}
	return c.findings(pos, deep...), nil
}

// unchecked is the finding for a program the check could not read, for the
// reason why: with a policy to enforce, what cannot be checked is refused.
func unchecked(p *Policy, line, col int, why string) Finding {
	cat := p.Block[0]
	for _, c := range Categories {
		if p.Blocks(c) {
			cat = c
			break
		}
	}
	return Finding{
		Rule:     cat + ".unchecked",
		Category: cat,
		Line:     line,
		Column:   col,
		Message:  why + ", so it cannot be checked against the policy, and it is refused",
		Hint:     "Write the code at this position with more common syntax.",
	}
}

// importStandIn is written over an import keyword goja does not read; it
// has the keyword's length, so no offset moves.
const importStandIn = "$mport"

// parseScript parses js with goja, writing importStandIn over each import
// keyword of an import(...) call, and returns where it did.
func parseScript(js string) (prog *ast.Program, imports map[file.Idx]bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			prog, err = nil, fmt.Errorf("parser failure: %v", r)
		}
	}()
	imports = map[file.Idx]bool{}
	starts := lineStarts(js)
	for range strings.Count(js, "import") + 1 {
		prog, err = parser.ParseFile(nil, "", js, parser.IgnoreRegExpErrors, parser.WithDisableSourceMaps)
		if err == nil {
			return prog, imports, nil
		}
		var list parser.ErrorList
		if !errors.As(err, &list) {
			return nil, nil, err
		}
		repaired := false
		for _, e := range list {
			line, col := e.Position.Line, e.Position.Column
			if line < 1 || line > len(starts) {
				continue
			}
			off := starts[line-1] + col - 1
			if !importKeyword(js, off) {
				continue
			}
			js = js[:off] + importStandIn + js[off+len("import"):]
			imports[file.Idx(off+1)] = true
			repaired = true
		}
		if !repaired {
			return nil, nil, err
		}
	}
	return nil, nil, err
}

// importKeyword reports whether the import keyword of an import(...) call
// (or of import.x) starts at js[off].
func importKeyword(js string, off int) bool {
	if off < 0 || !strings.HasPrefix(js[off:], "import") {
		return false
	}
	if off > 0 && identByte(js[off-1]) {
		return false
	}
	rest := strings.TrimLeft(js[off+len("import"):], " \t\r\n")
	return rest != "" && (rest[0] == '(' || rest[0] == '.')
}

func identByte(b byte) bool {
	return b == '_' || b == '$' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b >= 0x80
}

// programBody is the program's own statements: from the function that holds
// the program on. What esbuild puts before it is its own helper code.
func programBody(prog *ast.Program) []ast.Statement {
	for i, s := range prog.Body {
		if fd, ok := s.(*ast.FunctionDeclaration); ok && fd.Function.Name != nil && fd.Function.Name.Name == "__codecell_main__" {
			return prog.Body[i:]
		}
	}
	return prog.Body
}

// ---------------------------------------------------------------------------
// Values

// A jsPath names a value the check follows: a global reached by name
// (root "global", names ["process", "kill"]), the global object itself
// (root "global", no names), what a require or import of a module gives
// (root "module:fs"), whatever .constructor gives (root "ctor"), the import
// keyword (root "import"), or the program function's arguments (root
// "args": require is the first).
type jsPath struct {
	root  string
	names []string
}

func (p jsPath) key() string { return p.root + "\x00" + strings.Join(p.names, "\x00") }

func (p jsPath) with(name string) jsPath {
	names := make([]string, len(p.names), len(p.names)+1)
	copy(names, p.names)
	return jsPath{root: p.root, names: append(names, name)}
}

// maxPathNames bounds how deep a value is followed.
const maxPathNames = 6

var globalObjectNames = map[string]bool{"globalThis": true, "global": true, "window": true, "self": true}

// globalNames are the globals the check knows; other names are of no
// interest unless bound to one of these.
var globalNames = map[string]bool{
	"eval": true, "Function": true, "AsyncFunction": true, "GeneratorFunction": true, "AsyncGeneratorFunction": true,
	"require": true, "module": true, "process": true, "__codecell_import__": true, "__codecell_main__": true,
	"fetch": true, "XMLHttpRequest": true, "WebSocket": true, "EventSource": true, "navigator": true,
	"setTimeout": true, "setInterval": true, "setImmediate": true,
}

// shadowable are global names node does not define: a program that binds
// them is taken to mean its own.
var shadowable = map[string]bool{"window": true, "self": true}

var functionConstructors = map[string]bool{"Function": true, "AsyncFunction": true, "GeneratorFunction": true, "AsyncGeneratorFunction": true}

var networkGlobals = map[string]string{
	"fetch":          "network.fetch",
	"XMLHttpRequest": "network.xhr",
	"WebSocket":      "network.websocket",
	"EventSource":    "network.eventsource",
}

// moduleInternals are members of a Module (module, require.main) that reach
// node's loader.
var moduleInternals = map[string]bool{
	"constructor": true, "_load": true, "_resolveFilename": true, "_compile": true, "createRequire": true,
	"Module": true, "_cache": true, "_extensions": true, "_nodeModulePaths": true, "_initPaths": true, "wrap": true,
}

// moduleCategories are the modules each category refuses; a name also
// covers its subpaths ("fs/promises") and its node: form.
var moduleCategories = map[string]string{
	"http": Network, "https": Network, "http2": Network, "undici": Network, "axios": Network,
	"node-fetch": Network, "cross-fetch": Network, "isomorphic-fetch": Network, "got": Network,
	"request": Network, "superagent": Network, "needle": Network, "ky": Network, "ws": Network,
	"socket.io-client": Network, "follow-redirects": Network, "make-fetch-happen": Network, "ssh2": Network,
	"net": LowLevelNetwork, "dgram": LowLevelNetwork, "tls": LowLevelNetwork, "dns": LowLevelNetwork,
	"child_process": Process, "cluster": Process, "worker_threads": Process, "execa": Process, "cross-spawn": Process,
	"fs": Filesystem, "fs-extra": Filesystem, "graceful-fs": Filesystem,
	"vm": DynamicEval, "repl": DynamicEval, "inspector": DynamicEval,
}

// moduleBase is the package a module name is in: "fs" for "node:fs/promises",
// "@scope/pkg" for "@scope/pkg/sub".
func moduleBase(name string) string {
	name = strings.TrimPrefix(name, "node:")
	parts := strings.SplitN(name, "/", 3)
	if strings.HasPrefix(name, "@") && len(parts) > 1 {
		return parts[0] + "/" + parts[1]
	}
	return parts[0]
}

// member is what reading the property name of a value on p gives.
func member(p jsPath, name string) []jsPath {
	switch {
	case name == "constructor":
		// Any value's constructor may be a function constructor.
		if len(p.names) >= maxPathNames {
			return []jsPath{{root: "ctor"}}
		}
		return []jsPath{{root: "ctor"}, p.with(name)}
	case p.root == "global" && len(p.names) == 0 && globalObjectNames[name]:
		return []jsPath{p}
	case (name == "call" || name == "apply" || name == "bind") && len(classify(p)) > 0:
		// f.call(...) calls f.
		return []jsPath{p}
	case strings.HasPrefix(p.root, "module:") && len(p.names) == 0 && name == "default":
		return []jsPath{p}
	case p.root == "args":
		switch name {
		case "0":
			return []jsPath{{root: "global", names: []string{"require"}}}
		case "1":
			return []jsPath{{root: "import"}}
		}
		return nil
	case p.root == "global" && len(p.names) == 1 && p.names[0] == "__codecell_main__" && name == "arguments":
		return []jsPath{{root: "args"}}
	case len(p.names) >= maxPathNames:
		return nil
	}
	return []jsPath{p.with(name)}
}

// moduleObjectPrefix is the length of the prefix of names that reaches a
// node Module object (module, require.main, process.mainModule,
// module.parent), or 0.
func moduleObjectPrefix(names []string) int {
	switch {
	case len(names) >= 2 && (names[0] == "require" && names[1] == "main" || names[0] == "process" && names[1] == "mainModule" || names[0] == "module" && names[1] == "parent"):
		return 2
	case len(names) >= 1 && names[0] == "module":
		return 1
	}
	return 0
}

// A danger is what a value the check follows may do.
type danger struct {
	category string
	rule     string
	// inMember: reading any property of it is refused as well.
	inMember bool
	// load is "require" or "import" for a module loader, which a call
	// judges by its argument.
	load string
	// timer: refused only when called with a string to run.
	timer bool
	// module is the module whose member this is, for module_use.
	module string
}

// classify says what a value may do, whichever categories the policy
// blocks.
func classify(p jsPath) []danger {
	switch {
	case p.root == "ctor":
		if len(p.names) == 0 {
			return []danger{{category: DynamicEval, rule: "dynamic_eval.constructor"}}
		}
		return nil
	case p.root == "import":
		if len(p.names) == 0 {
			return []danger{{category: ModuleLoading, load: "import"}}
		}
		return nil
	case p.root == "args":
		return []danger{{category: ModuleLoading, load: "require"}}
	case strings.HasPrefix(p.root, "module:"):
		name := strings.TrimPrefix(p.root, "module:")
		if moduleBase(name) == "module" && len(p.names) > 0 {
			out := []danger{{category: ModuleLoading, rule: "module_loading.module_internals", inMember: true}}
			if p.names[len(p.names)-1] == "_load" {
				out = append(out, danger{category: ModuleLoading, load: "require"})
			}
			return out
		}
		if cat := moduleCategories[moduleBase(name)]; cat != "" {
			return []danger{{category: cat, rule: cat + ".module_use", module: name}}
		}
		return nil
	case p.root != "global":
		return nil
	}
	names := p.names
	if len(names) == 0 {
		return []danger{{category: DynamicEval, rule: "dynamic_eval.computed_global"}}
	}
	var out []danger
	if len(names) == 1 {
		n := names[0]
		switch {
		case n == "eval":
			out = append(out, danger{category: DynamicEval, rule: "dynamic_eval.eval"})
		case functionConstructors[n]:
			out = append(out, danger{category: DynamicEval, rule: "dynamic_eval.function_constructor"})
		case n == "require":
			out = append(out, danger{category: ModuleLoading, load: "require", inMember: true})
		case n == "__codecell_import__":
			out = append(out, danger{category: ModuleLoading, load: "import", inMember: true})
		case networkGlobals[n] != "":
			out = append(out, danger{category: Network, rule: networkGlobals[n]})
		case n == "setTimeout" || n == "setInterval" || n == "setImmediate":
			out = append(out, danger{category: DynamicEval, rule: "dynamic_eval.string_timer", timer: true})
		}
	}
	if n := moduleObjectPrefix(names); n > 0 && len(names) > n {
		rest := names[n:]
		if len(rest) == 1 && rest[0] == "require" {
			out = append(out, danger{category: ModuleLoading, load: "require", inMember: true})
		}
		if moduleInternals[rest[0]] {
			out = append(out, danger{category: ModuleLoading, rule: "module_loading.module_internals", inMember: true})
			if rest[len(rest)-1] == "_load" {
				// Module._load(name) is require by another name.
				out = append(out, danger{category: ModuleLoading, load: "require"})
			}
		}
	}
	if names[0] == "process" && len(names) >= 2 {
		switch {
		case names[1] == "mainModule":
			out = append(out, danger{category: ModuleLoading, rule: "module_loading.main_module", inMember: true})
		case len(names) > 2:
		case names[1] == "kill":
			out = append(out, danger{category: Process, rule: "process.kill"})
		case names[1] == "execve":
			out = append(out, danger{category: Process, rule: "process.execve"})
		case names[1] == "binding" || names[1] == "_linkedBinding":
			out = append(out,
				danger{category: Process, rule: "process.binding"},
				danger{category: ModuleLoading, rule: "module_loading.process_binding"})
		case names[1] == "dlopen":
			out = append(out,
				danger{category: Process, rule: "process.dlopen"},
				danger{category: ModuleLoading, rule: "module_loading.dlopen"})
		}
	}
	if len(names) == 2 && names[0] == "navigator" && names[1] == "sendBeacon" {
		out = append(out, danger{category: Network, rule: "network.send_beacon"})
	}
	return out
}

// describe names a value in messages.
func describe(p jsPath) string {
	switch {
	case p.root == "ctor":
		return ".constructor"
	case p.root == "import":
		return "import()"
	case p.root == "args":
		return "arguments"
	case strings.HasPrefix(p.root, "module:"):
		mod := strings.TrimPrefix(p.root, "module:")
		if len(p.names) == 0 {
			return fmt.Sprintf("the %q module", mod)
		}
		return fmt.Sprintf("%s (from %q)", strings.Join(p.names, "."), mod)
	case len(p.names) == 0:
		return "the global object"
	}
	return strings.Join(p.names, ".")
}

// ---------------------------------------------------------------------------
// The walk

type walkMode int

const (
	modeDeclare walkMode = iota // collect the names the program binds
	modeAlias                   // follow names bound to values of interest
	modeReport                  // report
)

// How an expression's value is used.
type useKind int

const (
	useEscape useKind = iota // passed on, stored, returned: anything may happen to it
	useCall                  // called (or constructed)
	useMember                // a property of it is read
	useAlias                 // bound to a name the check follows
	useQuiet                 // compared, tested, its type asked: nothing runs
)

type use struct {
	kind useKind
	args []ast.Expression // the call's arguments, for useCall
}

var (
	escape = use{kind: useEscape}
	quiet  = use{kind: useQuiet}
	alias  = use{kind: useAlias}
	onObj  = use{kind: useMember}
)

type rawFinding struct {
	idx      file.Idx
	category string
	rule     string
	message  string
}

type jsChecker struct {
	policy   *Policy
	mode     walkMode
	imports  map[file.Idx]bool
	aliases  map[string][]jsPath
	declared map[string]bool
	// own are the names the program's top level declares (var, let, const,
	// function, class): every plain reference to one of them, anywhere in
	// the program, is to the program's own binding, not to a global of that
	// name, unless a with statement could put an object's property first.
	own     map[string]bool
	sawWith bool
	changed bool
	// depth counts the functions and classes around the walk, arrow
	// functions aside: at 0, this is the program function's this.
	depth int
	// nesting bounds recursion on deeply nested programs; tooDeep is
	// where the walk first gave up, or 0.
	nesting int
	tooDeep file.Idx
	raw     []rawFinding
	// memo keeps what a chain of members and calls resolved to: the walk
	// resolves each link of a chain, and each link resolves the links
	// below it, so that without it a chain of n links costs n*n. An entry
	// holds while the aliases of the name at the chain's root (gen) and
	// everything else resolve reads (epoch) are unchanged.
	memo  map[memoKey]memoEntry
	gen   map[string]int
	epoch int
}

// thisRoot is the root of a chain that starts at this, which no alias
// changes.
const thisRoot = "\x00this"

// deepRoot is the root of a chain too deep to follow.
const deepRoot = "\x00deep"

type memoKey struct {
	e   ast.Expression
	top bool // c.depth == 0
}

type memoEntry struct {
	paths      []jsPath
	root       string
	gen, epoch int
}

// maxNesting is how deep the walk goes: deeper than any program written to
// be read, and not so deep that a crafted one takes the stack.
const maxNesting = 10000

// deep notes that the walk did not go into n, which the check then refuses.
func (c *jsChecker) deep(n ast.Node) {
	if c.tooDeep == 0 && n != nil {
		c.tooDeep = max(n.Idx0(), 1)
	}
}

func (c *jsChecker) walkBody(body []ast.Statement) {
	c.epoch++
	for _, s := range body {
		if fd, ok := s.(*ast.FunctionDeclaration); ok && fd.Function.Name != nil && fd.Function.Name.Name == "__codecell_main__" && fd.Function.Body != nil {
			// The program itself: its parameters are the runner's, and its
			// top level is the program's.
			if c.mode == modeDeclare {
				c.own = topLevelNames(fd.Function.Body.List)
			}
			c.statements(fd.Function.Body.List)
			continue
		}
		c.statement(s)
	}
}

// topLevelNames are the names a function body's own statements declare.
// Declarations in nested blocks are left out: a var there is hoisted to the
// top too, but a let or const is not, and telling them apart is not worth
// a name that then stays a global, which errs on the side of refusing.
func topLevelNames(list []ast.Statement) map[string]bool {
	names := map[string]bool{}
	add := func(bs []*ast.Binding) {
		for _, b := range bs {
			if id, ok := b.Target.(*ast.Identifier); ok {
				names[string(id.Name)] = true
			}
		}
	}
	for _, s := range list {
		switch s := s.(type) {
		case *ast.VariableStatement:
			add(s.List)
		case *ast.LexicalDeclaration:
			add(s.List)
		case *ast.FunctionDeclaration:
			if s.Function != nil && s.Function.Name != nil {
				names[string(s.Function.Name.Name)] = true
			}
		case *ast.ClassDeclaration:
			if s.Class != nil && s.Class.Name != nil {
				names[string(s.Class.Name.Name)] = true
			}
		}
	}
	return names
}

func (c *jsChecker) statements(list []ast.Statement) {
	for _, s := range list {
		c.statement(s)
	}
}

func (c *jsChecker) statement(s ast.Statement) {
	if s == nil {
		return
	}
	if c.nesting > maxNesting {
		c.deep(s)
		return
	}
	c.nesting++
	defer func() { c.nesting-- }()
	switch s := s.(type) {
	case *ast.BlockStatement:
		c.statements(s.List)
	case *ast.ExpressionStatement:
		// A statement's value is dropped (the last one's goes to the
		// runner, which only serializes it).
		c.expr(s.Expression, quiet)
	case *ast.VariableStatement:
		c.bindings(s.List)
	case *ast.LexicalDeclaration:
		c.bindings(s.List)
	case *ast.FunctionDeclaration:
		c.function(s.Function)
	case *ast.ClassDeclaration:
		c.class(s.Class)
	case *ast.IfStatement:
		c.expr(s.Test, quiet)
		c.statement(s.Consequent)
		c.statement(s.Alternate)
	case *ast.WhileStatement:
		c.expr(s.Test, quiet)
		c.statement(s.Body)
	case *ast.DoWhileStatement:
		c.statement(s.Body)
		c.expr(s.Test, quiet)
	case *ast.ForStatement:
		switch init := s.Initializer.(type) {
		case *ast.ForLoopInitializerExpression:
			c.expr(init.Expression, quiet)
		case *ast.ForLoopInitializerVarDeclList:
			c.bindings(init.List)
		case *ast.ForLoopInitializerLexicalDecl:
			c.bindings(init.LexicalDeclaration.List)
		}
		c.expr(s.Test, quiet)
		c.expr(s.Update, quiet)
		c.statement(s.Body)
	case *ast.ForInStatement:
		c.forInto(s.Into)
		c.expr(s.Source, quiet)
		c.statement(s.Body)
	case *ast.ForOfStatement:
		c.forInto(s.Into)
		c.expr(s.Source, escape)
		c.statement(s.Body)
	case *ast.SwitchStatement:
		c.expr(s.Discriminant, quiet)
		for _, cs := range s.Body {
			c.expr(cs.Test, quiet)
			c.statements(cs.Consequent)
		}
	case *ast.TryStatement:
		c.statement(s.Body)
		if s.Catch != nil {
			c.bind(s.Catch.Parameter, nil)
			c.statement(s.Catch.Body)
		}
		if s.Finally != nil {
			c.statement(s.Finally)
		}
	case *ast.LabelledStatement:
		c.statement(s.Statement)
	case *ast.ReturnStatement:
		c.expr(s.Argument, escape)
	case *ast.ThrowStatement:
		c.expr(s.Argument, escape)
	case *ast.WithStatement:
		c.sawWith = true
		c.epoch++
		c.expr(s.Object, escape)
		c.statement(s.Body)
	}
}

func (c *jsChecker) forInto(into ast.ForInto) {
	switch into := into.(type) {
	case *ast.ForIntoVar:
		c.bindings([]*ast.Binding{into.Binding})
	case *ast.ForDeclaration:
		c.bind(into.Target, nil)
	case *ast.ForIntoExpression:
		c.target(into.Expression)
	}
}

func (c *jsChecker) bindings(list []*ast.Binding) {
	for _, b := range list {
		if b == nil {
			continue
		}
		if b.Initializer == nil {
			c.bind(b.Target, nil)
			continue
		}
		c.expr(b.Initializer, alias)
		c.bind(b.Target, c.resolve(b.Initializer))
	}
}

// bind binds a declaration's or destructuring's target to the values
// paths, and walks the defaults and computed keys inside it.
func (c *jsChecker) bind(target ast.Expression, paths []jsPath) {
	switch t := target.(type) {
	case *ast.Identifier:
		c.name(string(t.Name), paths)
	case *ast.ObjectPattern:
		for _, prop := range t.Properties {
			switch prop := prop.(type) {
			case *ast.PropertyShort:
				name := string(prop.Name.Name)
				c.name(name, members(paths, name))
				if prop.Initializer != nil {
					c.expr(prop.Initializer, alias)
					c.name(name, c.resolve(prop.Initializer))
				}
			case *ast.PropertyKeyed:
				var sub []jsPath
				if name, ok := literalKey(prop.Key); ok {
					sub = members(paths, name)
				} else {
					c.expr(prop.Key, escape)
					c.computed(prop.Key, paths, escape)
				}
				c.element(prop.Value, sub)
			}
		}
		c.bind(t.Rest, paths)
	case *ast.ArrayPattern:
		for _, el := range t.Elements {
			c.element(el, nil)
		}
		c.bind(t.Rest, nil)
	case *ast.Binding:
		c.bindings([]*ast.Binding{t})
	case nil:
	default:
		c.target(target)
	}
}

// element binds one element of a pattern, which may carry a default.
func (c *jsChecker) element(el ast.Expression, paths []jsPath) {
	if a, ok := el.(*ast.AssignExpression); ok && a.Operator == token.ASSIGN {
		c.expr(a.Right, alias)
		c.bind(a.Left, slices.Concat(paths, c.resolve(a.Right)))
		return
	}
	c.bind(el, paths)
}

// target walks an assignment's target that is not a plain name.
func (c *jsChecker) target(e ast.Expression) {
	switch e.(type) {
	case *ast.ObjectPattern, *ast.ArrayPattern, *ast.Identifier:
		c.bind(e, nil)
	default:
		c.expr(e, quiet)
	}
}

// name records that the program binds name, to paths.
func (c *jsChecker) name(name string, paths []jsPath) {
	switch c.mode {
	case modeDeclare:
		if !c.declared[name] {
			c.declared[name] = true
			c.bump(name)
		}
	case modeAlias:
		have := c.aliases[name]
	next:
		for _, p := range paths {
			for _, q := range have {
				if q.key() == p.key() {
					continue next
				}
			}
			if len(have) >= 16 {
				break
			}
			have = append(have, p)
			c.changed = true
			c.bump(name)
		}
		c.aliases[name] = have
	}
}

// bump notes that what name resolves to has changed.
func (c *jsChecker) bump(name string) {
	if c.gen == nil {
		c.gen = map[string]int{}
	}
	c.gen[name]++
}

// members is what the members name of paths may be, each once: a chain
// of .constructor would otherwise double them at every link.
func members(paths []jsPath, name string) []jsPath {
	var out []jsPath
	var seen map[string]bool
	for _, p := range paths {
		for _, q := range member(p, name) {
			if len(paths) > 1 {
				if seen == nil {
					seen = map[string]bool{}
				}
				if k := q.key(); seen[k] {
					continue
				} else {
					seen[k] = true
				}
			}
			out = append(out, q)
		}
	}
	return out
}

func (c *jsChecker) function(f *ast.FunctionLiteral) {
	if f == nil {
		return
	}
	c.depth++
	defer func() { c.depth-- }()
	if f.Name != nil {
		c.name(string(f.Name.Name), nil)
	}
	c.params(f.ParameterList)
	if f.Body != nil {
		c.statements(f.Body.List)
	}
}

func (c *jsChecker) params(pl *ast.ParameterList) {
	if pl == nil {
		return
	}
	c.bindings(pl.List)
	c.bind(pl.Rest, nil)
}

func (c *jsChecker) class(cl *ast.ClassLiteral) {
	if cl == nil {
		return
	}
	if cl.Name != nil {
		c.name(string(cl.Name.Name), nil)
	}
	c.expr(cl.SuperClass, escape)
	c.depth++
	defer func() { c.depth-- }()
	for _, el := range cl.Body {
		switch el := el.(type) {
		case *ast.FieldDefinition:
			if el.Computed {
				c.expr(el.Key, quiet)
			}
			c.expr(el.Initializer, escape)
		case *ast.MethodDefinition:
			if el.Computed {
				c.expr(el.Key, quiet)
			}
			c.function(el.Body)
		case *ast.ClassStaticBlock:
			if el.Block != nil {
				c.statements(el.Block.List)
			}
		}
	}
}

// expr walks an expression whose value is used as u says.
func (c *jsChecker) expr(e ast.Expression, u use) {
	if e == nil {
		return
	}
	if c.nesting > maxNesting {
		c.deep(e)
		return
	}
	c.nesting++
	defer func() { c.nesting-- }()
	switch e := e.(type) {
	case *ast.Identifier:
		c.judge(e, c.resolve(e), u)
	case *ast.ThisExpression:
		c.judge(e, c.resolve(e), u)
	case *ast.DotExpression:
		c.expr(e.Left, onObj)
		c.judge(e, c.resolve(e), u)
	case *ast.PrivateDotExpression:
		c.expr(e.Left, onObj)
	case *ast.BracketExpression:
		c.expr(e.Left, onObj)
		if _, ok := literalKey(e.Member); ok {
			c.judge(e, c.resolve(e), u)
			return
		}
		c.expr(e.Member, escape)
		c.computed(e, c.resolve(e.Left), u)
	case *ast.CallExpression:
		c.expr(e.Callee, use{kind: useCall, args: e.ArgumentList})
		for _, a := range e.ArgumentList {
			c.expr(a, escape)
		}
		c.judge(e, c.resolve(e), u)
	case *ast.NewExpression:
		c.expr(e.Callee, use{kind: useCall, args: e.ArgumentList})
		for _, a := range e.ArgumentList {
			c.expr(a, escape)
		}
	case *ast.TemplateLiteral:
		if e.Tag != nil {
			c.expr(e.Tag, use{kind: useCall})
		}
		for _, x := range e.Expressions {
			c.expr(x, escape)
		}
	case *ast.Optional:
		c.expr(e.Expression, u)
	case *ast.OptionalChain:
		c.expr(e.Expression, u)
	case *ast.AwaitExpression:
		c.expr(e.Argument, u)
	case *ast.YieldExpression:
		c.expr(e.Argument, escape)
	case *ast.SequenceExpression:
		for i, x := range e.Sequence {
			if i == len(e.Sequence)-1 {
				c.expr(x, u)
			} else {
				c.expr(x, quiet)
			}
		}
	case *ast.ConditionalExpression:
		c.expr(e.Test, quiet)
		c.expr(e.Consequent, u)
		c.expr(e.Alternate, u)
	case *ast.BinaryExpression:
		switch e.Operator {
		case token.LOGICAL_AND, token.LOGICAL_OR, token.COALESCE:
			c.expr(e.Left, u)
			c.expr(e.Right, u)
		default:
			c.expr(e.Left, quiet)
			c.expr(e.Right, quiet)
		}
	case *ast.UnaryExpression:
		c.expr(e.Operand, quiet)
	case *ast.AssignExpression:
		c.assign(e, u)
	case *ast.ArrayLiteral:
		for _, x := range e.Value {
			c.expr(x, escape)
		}
	case *ast.ObjectLiteral:
		for _, prop := range e.Value {
			switch prop := prop.(type) {
			case *ast.PropertyKeyed:
				if prop.Computed {
					c.expr(prop.Key, quiet)
				}
				c.expr(prop.Value, escape)
			case *ast.PropertyShort:
				c.expr(&prop.Name, escape)
			case *ast.SpreadElement:
				c.expr(prop.Expression, escape)
			}
		}
	case *ast.SpreadElement:
		c.expr(e.Expression, escape)
	case *ast.FunctionLiteral:
		c.function(e)
	case *ast.ArrowFunctionLiteral:
		c.params(e.ParameterList)
		switch body := e.Body.(type) {
		case *ast.BlockStatement:
			c.statements(body.List)
		case *ast.ExpressionBody:
			c.expr(body.Expression, escape)
		}
	case *ast.ClassLiteral:
		c.class(e)
	case *ast.ObjectPattern, *ast.ArrayPattern:
		c.bind(e, nil)
	case *ast.Binding:
		c.bindings([]*ast.Binding{e})
	}
}

func (c *jsChecker) assign(e *ast.AssignExpression, u use) {
	follows := e.Operator == token.ASSIGN || e.Operator == token.LOGICAL_OR || e.Operator == token.LOGICAL_AND || e.Operator == token.COALESCE
	switch e.Left.(type) {
	case *ast.Identifier, *ast.ObjectPattern, *ast.ArrayPattern:
		if !follows {
			c.expr(e.Right, quiet)
			return
		}
		c.expr(e.Right, alias)
		c.bind(e.Left, c.resolve(e.Right))
		// The assignment's own value goes on as u says.
		if u.kind != useAlias && u.kind != useQuiet {
			c.judge(e.Right, c.resolve(e.Right), u)
		}
	default:
		c.expr(e.Left, quiet)
		c.expr(e.Right, escape)
	}
}

// computed judges reading a property whose name is computed at run time
// from a value on paths, at node n.
func (c *jsChecker) computed(n ast.Node, paths []jsPath, u use) {
	for _, p := range paths {
		switch {
		case p.root == "global" && len(p.names) == 0:
			c.report(n, "dynamic_eval.computed_global", DynamicEval, describeNode(n)+" reads the global object by a name computed at run time, which cannot be checked (it may be eval or Function)")
		case p.root == "global" && len(p.names) == 1 && p.names[0] == "process":
			c.report(n, "process.computed_member", Process, "a property of process read by a name computed at run time cannot be checked (it may be process.kill)")
			c.report(n, "module_loading.computed_member", ModuleLoading, "a property of process read by a name computed at run time cannot be checked (it may be process.binding or process.dlopen)")
		case p.root == "global" && moduleObjectPrefix(p.names) == len(p.names):
			c.report(n, "module_loading.computed_member", ModuleLoading, "a property of "+describe(p)+" read by a name computed at run time cannot be checked (it may be require or the module loader)")
		case p.root == "args":
			c.loaderEscape(n, "arguments of the program", "require")
		case strings.HasPrefix(p.root, "module:") && len(p.names) < maxPathNames:
			c.judge(n, []jsPath{p.with("[…]")}, u)
		}
	}
}

// resolve says which values the check follows e may be.
func (c *jsChecker) resolve(e ast.Expression) []jsPath {
	return c.resolveDepth(e, 0)
}

func (c *jsChecker) resolveDepth(e ast.Expression, depth int) []jsPath {
	paths, _ := c.resolveRoot(e, depth)
	return paths
}

// resolveRoot is resolveDepth, and the name whose aliases the answer
// depends on when there is one ("" when none or several).
func (c *jsChecker) resolveRoot(e ast.Expression, depth int) ([]jsPath, string) {
	switch e.(type) {
	case *ast.DotExpression, *ast.BracketExpression, *ast.CallExpression:
	default:
		return c.resolveOnce(e, depth)
	}
	key := memoKey{e, c.depth == 0}
	if m, ok := c.memo[key]; ok && m.epoch == c.epoch && m.gen == c.gen[m.root] {
		return slices.Clip(m.paths), m.root
	}
	paths, root := c.resolveOnce(e, depth)
	if root != "" {
		if c.memo == nil {
			c.memo = map[memoKey]memoEntry{}
		}
		c.memo[key] = memoEntry{paths: paths, root: root, gen: c.gen[root], epoch: c.epoch}
	}
	return slices.Clip(paths), root
}

func (c *jsChecker) resolveOnce(e ast.Expression, depth int) ([]jsPath, string) {
	if depth > maxNesting {
		// The check refuses the program: what the chain above resolves to
		// no longer matters, and is kept as it is.
		c.deep(e)
		return nil, deepRoot
	}
	depth++
	switch e := e.(type) {
	case *ast.Identifier:
		if c.imports[e.Idx] {
			return []jsPath{{root: "import"}}, ""
		}
		name := string(e.Name)
		out := slices.Clone(c.aliases[name])
		if name == "arguments" && c.depth == 0 {
			out = append(out, jsPath{root: "args"})
		}
		if (globalNames[name] || globalObjectNames[name]) && !(shadowable[name] && c.declared[name]) && !(c.own[name] && !c.sawWith) {
			if globalObjectNames[name] {
				out = append(out, jsPath{root: "global"})
			} else {
				out = append(out, jsPath{root: "global", names: []string{name}})
			}
		}
		return out, name
	case *ast.ThisExpression:
		if c.depth == 0 {
			return []jsPath{{root: "global"}}, thisRoot
		}
		return nil, thisRoot
	case *ast.DotExpression:
		name := string(e.Identifier.Name)
		left, root := c.resolveRoot(e.Left, depth)
		out := members(left, name)
		if name == "constructor" && len(out) == 0 {
			out = []jsPath{{root: "ctor"}}
		}
		return out, root
	case *ast.BracketExpression:
		name, ok := literalKey(e.Member)
		if !ok {
			return nil, ""
		}
		left, root := c.resolveRoot(e.Left, depth)
		out := members(left, name)
		if name == "constructor" && len(out) == 0 {
			out = []jsPath{{root: "ctor"}}
		}
		return out, root
	case *ast.CallExpression:
		var out []jsPath
		callee, root := c.resolveRoot(e.Callee, depth)
		for _, p := range callee {
			if len(p.names) > 0 && p.names[len(p.names)-1] == "createRequire" {
				out = append(out, jsPath{root: "global", names: []string{"require"}})
			}
			for _, d := range classify(p) {
				if d.load == "" || len(e.ArgumentList) == 0 {
					continue
				}
				if name, ok := literalString(e.ArgumentList[0]); ok {
					if moduleBase(name) == "process" {
						out = append(out, jsPath{root: "global", names: []string{"process"}})
					} else {
						out = append(out, jsPath{root: "module:" + name})
					}
				}
			}
		}
		return out, root
	case *ast.AwaitExpression:
		return c.resolveRoot(e.Argument, depth)
	case *ast.Optional:
		return c.resolveRoot(e.Expression, depth)
	case *ast.OptionalChain:
		return c.resolveRoot(e.Expression, depth)
	case *ast.SequenceExpression:
		if len(e.Sequence) > 0 {
			return c.resolveRoot(e.Sequence[len(e.Sequence)-1], depth)
		}
	case *ast.ConditionalExpression:
		return append(c.resolveDepth(e.Consequent, depth), c.resolveDepth(e.Alternate, depth)...), ""
	case *ast.BinaryExpression:
		if e.Operator == token.LOGICAL_AND || e.Operator == token.LOGICAL_OR || e.Operator == token.COALESCE {
			return append(c.resolveDepth(e.Left, depth), c.resolveDepth(e.Right, depth)...), ""
		}
	case *ast.AssignExpression:
		if e.Operator == token.ASSIGN {
			return c.resolveRoot(e.Right, depth)
		}
	}
	return nil, ""
}

// judge reports what the values paths of node n may do, used as u.
func (c *jsChecker) judge(n ast.Node, paths []jsPath, u use) {
	if c.mode != modeReport || u.kind == useAlias || u.kind == useQuiet {
		return
	}
	for _, p := range paths {
		for _, d := range classify(p) {
			if u.kind == useMember && !d.inMember {
				continue
			}
			subject := describe(p)
			if id, ok := n.(*ast.Identifier); ok && string(id.Name) != lastName(p) && p.root != "import" {
				subject = fmt.Sprintf("%s (which is %s)", id.Name, subject)
			}
			at := n
			if d.rule == "dynamic_eval.constructor" {
				// Point at the property, not at what it is read on.
				switch m := n.(type) {
				case *ast.DotExpression:
					at = &m.Identifier
				case *ast.BracketExpression:
					at = m.Member
				}
			}
			switch {
			case d.load != "" && u.kind == useCall:
				c.load(n, d.load, subject, u.args)
			case d.load != "" && u.kind == useMember:
				c.report(n, "module_loading."+d.load, ModuleLoading, "the properties of "+subject+" reach node's module loader, and this policy refuses loading modules")
			case d.load != "":
				c.loaderEscape(n, subject, d.load)
			case d.timer:
				if u.kind == useCall && len(u.args) > 0 && stringish(u.args[0]) {
					c.report(n, d.rule, d.category, subject+" with a string runs that string as code, and this policy refuses running code built from strings")
				}
			default:
				c.report(at, d.rule, d.category, dangerMessage(d, subject))
			}
		}
	}
}

func lastName(p jsPath) string {
	if len(p.names) == 0 {
		return ""
	}
	return p.names[len(p.names)-1]
}

// load judges a call of require or import.
func (c *jsChecker) load(n ast.Node, kind, subject string, args []ast.Expression) {
	name, ok := "", false
	if len(args) > 0 {
		name, ok = literalString(args[0])
	}
	if !ok {
		c.computedName(n, subject)
		return
	}
	call := fmt.Sprintf("%s(%q)", kind, name)
	if kind == "import" {
		call = fmt.Sprintf("import %q", name)
	}
	c.report(n, "module_loading."+kind, ModuleLoading, call+" loads a module, and this policy refuses loading modules")
	if cat := moduleCategories[moduleBase(name)]; cat != "" {
		c.report(n, cat+".module", cat, fmt.Sprintf("%s loads %s, and this policy refuses %s", call, moduleWhat[cat], categoryWhat[cat]))
	}
}

// loaderEscape judges require or import used other than by calling it.
func (c *jsChecker) loaderEscape(n ast.Node, subject, kind string) {
	if c.policy.Blocks(ModuleLoading) {
		c.report(n, "module_loading."+kind, ModuleLoading, subject+" is used as a value; it loads modules, and this policy refuses loading modules")
		return
	}
	c.computedName(n, subject)
}

// computedName reports loading a module whose name cannot be checked.
func (c *jsChecker) computedName(n ast.Node, subject string) {
	msg := subject + " loads a module whose name is computed at run time, which cannot be checked before the program runs"
	for _, cat := range []string{ModuleLoading, Process, Filesystem, Network, LowLevelNetwork, DynamicEval} {
		if c.policy.Blocks(cat) {
			c.report(n, cat+".computed_name", cat, msg)
			return
		}
	}
}

var moduleWhat = map[string]string{
	Network:         "a network client",
	LowLevelNetwork: "a socket module",
	Process:         "a module that starts processes",
	Filesystem:      "a filesystem module",
	DynamicEval:     "a module that runs code built from strings",
}

var categoryWhat = map[string]string{
	ModuleLoading:   "loading modules",
	Network:         "network access",
	LowLevelNetwork: "low-level network access",
	Process:         "starting or signalling processes",
	Filesystem:      "filesystem access",
	DynamicEval:     "running code built from strings",
}

func dangerMessage(d danger, subject string) string {
	switch d.rule {
	case "dynamic_eval.eval", "dynamic_eval.function_constructor":
		return subject + " runs code built from a string, and this policy refuses that"
	case "dynamic_eval.constructor":
		return subject + " may be a function's constructor, which builds code from a string (as Function does), and this policy refuses that"
	case "dynamic_eval.computed_global":
		return "the global object is passed as a value, so what is read from it (eval, Function…) cannot be checked"
	case "module_loading.module_internals", "module_loading.main_module":
		return subject + " reaches node's module loader, and this policy refuses loading modules"
	case "module_loading.process_binding", "module_loading.dlopen":
		return subject + " loads node's internal or native modules, and this policy refuses loading modules"
	case "process.kill":
		return subject + " sends signals to processes, and this policy refuses that"
	case "process.execve":
		return subject + " replaces the process with another program, and this policy refuses that"
	case "process.binding", "process.dlopen":
		return subject + " reaches node's internals, from which processes can be started, and this policy refuses that"
	}
	if d.module != "" {
		return fmt.Sprintf("%s belongs to %s, and this policy refuses %s", subject, moduleWhat[d.category], categoryWhat[d.category])
	}
	return subject + " talks to other hosts, and this policy refuses network access"
}

// hints say what to do instead, by category.
var hints = map[string]string{
	ModuleLoading:   "Write it with JavaScript's built-ins (JSON, Math, Date, Map, Promise, …), or call the host's tools with callTool.",
	Network:         "Call the host's tools with callTool instead: the sandbox has no network.",
	LowLevelNetwork: "Call the host's tools with callTool instead: the sandbox has no network.",
	Process:         "Do the work in this program, or call the host's tools with callTool: starting or signalling processes is refused.",
	Filesystem:      "Keep data in memory, or read and write it through the host's tools with callTool.",
	DynamicEval:     "Write the code itself instead of building it from strings, and call functions and read properties by their own names.",
}

func (c *jsChecker) report(n ast.Node, rule, category, message string) {
	if c.mode != modeReport || !c.policy.Blocks(category) || len(c.raw) >= 10*maxFindings {
		return
	}
	c.raw = append(c.raw, rawFinding{idx: n.Idx0(), category: category, rule: rule, message: message})
}

// findings positions the raw findings in the user's source, keeps one per
// place and category, sorts them with the others and keeps the first
// maxFindings.
func (c *jsChecker) findings(pos *positioner, others ...Finding) []Finding {
	type place struct {
		line, col int
		category  string
	}
	seen := map[place]bool{}
	out := others
	for _, r := range c.raw {
		line, col := pos.position(int(r.idx) - 1)
		k := place{line, col, r.category}
		if seen[k] {
			continue
		}
		seen[k] = true
		hint := hints[r.category]
		if strings.HasSuffix(r.rule, ".computed_name") && r.category != ModuleLoading {
			hint = "Write the module's name as a string literal, so that it can be checked."
		}
		out = append(out, Finding{Rule: r.rule, Category: r.category, Line: line, Column: col, Message: r.message, Hint: hint})
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Line != out[j].Line {
			return out[i].Line < out[j].Line
		}
		if out[i].Column != out[j].Column {
			return out[i].Column < out[j].Column
		}
		return out[i].Rule < out[j].Rule
	})
	if len(out) > maxFindings {
		out = out[:maxFindings]
	}
	return out
}

// literalKey is the property name a member expression's key names, when it
// is written out.
func literalKey(e ast.Expression) (string, bool) {
	if n, ok := e.(*ast.NumberLiteral); ok {
		switch v := n.Value.(type) {
		case int64:
			return strconv.FormatInt(v, 10), true
		case float64:
			if v == math.Trunc(v) && math.Abs(v) < 1e15 {
				return strconv.FormatInt(int64(v), 10), true
			}
			return strconv.FormatFloat(v, 'g', -1, 64), true
		}
		return n.Literal, true
	}
	return literalString(e)
}

// literalString is the value of a string literal, or of a template literal
// without substitutions.
func literalString(e ast.Expression) (string, bool) {
	switch e := e.(type) {
	case *ast.StringLiteral:
		return e.Value.String(), true
	case *ast.TemplateLiteral:
		if e.Tag == nil && len(e.Expressions) == 0 && len(e.Elements) == 1 {
			return e.Elements[0].Parsed.String(), true
		}
	}
	return "", false
}

// stringish reports whether an expression is plainly a string.
func stringish(e ast.Expression) bool {
	switch e := e.(type) {
	case *ast.StringLiteral:
		return true
	case *ast.TemplateLiteral:
		return e.Tag == nil
	case *ast.BinaryExpression:
		return e.Operator == token.PLUS && (stringish(e.Left) || stringish(e.Right))
	}
	return false
}

func describeNode(n ast.Node) string {
	if b, ok := n.(*ast.BracketExpression); ok {
		switch l := b.Left.(type) {
		case *ast.Identifier:
			return string(l.Name) + "[…]"
		case *ast.ThisExpression:
			return "this[…]"
		}
	}
	return "this property access"
}

// ---------------------------------------------------------------------------
// Positions

// A sourceMap is a decoded v3 source map with one source.
type sourceMap struct {
	// lines holds, by generated line, the mappings sorted by column.
	lines [][]mapping
	// content is the source's text (sourcesContent).
	content string
}

// mapping is one segment: 0-based, columns in UTF-16 code units.
type mapping struct {
	genCol, line, col int
}

func decodeSourceMap(data []byte) (*sourceMap, error) {
	var raw struct {
		Version        int       `json:"version"`
		SourcesContent []*string `json:"sourcesContent"`
		Mappings       string    `json:"mappings"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("source map: %w", err)
	}
	if raw.Version != 3 || len(raw.SourcesContent) == 0 || raw.SourcesContent[0] == nil {
		return nil, errors.New("source map: not a version 3 map with its source")
	}
	sm := &sourceMap{content: *raw.SourcesContent[0]}
	var cur []mapping
	var genCol, src, line, col int
	m := raw.Mappings
	for i := 0; i < len(m); {
		switch m[i] {
		case ';':
			sm.lines = append(sm.lines, cur)
			cur, genCol = nil, 0
			i++
			continue
		case ',':
			i++
			continue
		}
		var fields [5]int
		n := 0
		for i < len(m) && m[i] != ',' && m[i] != ';' {
			v, next, err := vlq(m, i)
			if err != nil {
				return nil, err
			}
			if n < len(fields) {
				fields[n] = v
			}
			n++
			i = next
		}
		genCol += fields[0]
		if n >= 4 {
			src += fields[1]
			line += fields[2]
			col += fields[3]
			if src == 0 {
				cur = append(cur, mapping{genCol: genCol, line: line, col: col})
			}
		}
	}
	sm.lines = append(sm.lines, cur)
	for _, l := range sm.lines {
		sort.SliceStable(l, func(i, j int) bool { return l[i].genCol < l[j].genCol })
	}
	return sm, nil
}

// vlq decodes one base64 VLQ number starting at s[i].
func vlq(s string, i int) (value, next int, err error) {
	shift, result := 0, 0
	for {
		if i >= len(s) || shift > 30 {
			return 0, 0, errors.New("source map: bad VLQ")
		}
		d := strings.IndexByte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", s[i])
		if d < 0 {
			return 0, 0, errors.New("source map: bad VLQ")
		}
		i++
		result += (d & 31) << shift
		shift += 5
		if d&32 == 0 {
			break
		}
	}
	if result&1 != 0 {
		return -(result >> 1), i, nil
	}
	return result >> 1, i, nil
}

// lookup is the source position of a generated one (0-based, UTF-16): that
// of the last mapping at or before it.
func (sm *sourceMap) lookup(line, col int) (int, int, bool) {
	if line >= len(sm.lines) {
		line, col = len(sm.lines)-1, math.MaxInt
	}
	for ; line >= 0; line, col = line-1, math.MaxInt {
		segs := sm.lines[line]
		i := sort.Search(len(segs), func(i int) bool { return segs[i].genCol > col })
		if i > 0 {
			return segs[i-1].line, segs[i-1].col, true
		}
	}
	return 0, 0, false
}

// A positioner turns offsets in the checked script into lines and columns
// of the user's source.
type positioner struct {
	js        string
	jsStarts  []int
	sm        *sourceMap
	rewritten []string // the rewritten program's lines, function header included
	user      []string
}

func newPositioner(js string, sm *sourceMap, code string) *positioner {
	return &positioner{
		js:        js,
		jsStarts:  lineStarts(js),
		sm:        sm,
		rewritten: strings.Split(sm.content, "\n"),
		user:      strings.Split(code, "\n"),
	}
}

func lineStarts(s string) []int {
	starts := []int{0}
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			starts = append(starts, i+1)
		}
	}
	return starts
}

// offset is the byte offset in the script of a goja position (1-based line,
// 1-based byte column), or -1.
func (p *positioner) offset(line, col int) int {
	if line < 1 || line > len(p.jsStarts) || col < 1 {
		return -1
	}
	return p.jsStarts[line-1] + col - 1
}

// position is the user's 1-based line and column (in characters) of the
// byte offset off in the script.
func (p *positioner) position(off int) (int, int) {
	off = min(max(off, 0), len(p.js))
	gl := sort.Search(len(p.jsStarts), func(i int) bool { return p.jsStarts[i] > off }) - 1
	gc := utf16Len(p.js[p.jsStarts[gl]:off])
	line, col, ok := p.sm.lookup(gl, gc)
	if !ok || len(p.user) == 0 {
		return 1, 1
	}
	if line >= len(p.user) {
		line, col = len(p.user)-1, 0
	}
	u := p.user[line]
	r := ""
	if line < len(p.rewritten) {
		r = p.rewritten[line]
	}
	// The rewritten line is the user's, unless an import or export on it
	// was rewritten (or, on the first line, the function header stands
	// before it); both keep what follows the statement. A position in what
	// they share is exact; one in what was rewritten is the statement's.
	rb := utf16Offset(r, col)
	s := commonSuffix(r, u)
	if rb >= len(r)-s {
		ub := len(u) - (len(r) - rb)
		return line + 1, utf8.RuneCountInString(u[:ub]) + 1
	}
	indent := len(u) - len(strings.TrimLeft(u, " \t"))
	return line + 1, utf8.RuneCountInString(u[:indent]) + 1
}

// commonSuffix is the length in bytes of the longest common suffix of a and
// b that starts on a character boundary.
func commonSuffix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[len(a)-1-n] == b[len(b)-1-n] {
		n++
	}
	for n > 0 && !utf8.RuneStart(a[len(a)-n]) {
		n--
	}
	return n
}

func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
	}
	return n
}

// utf16Offset is the byte offset in s of the UTF-16 offset u.
func utf16Offset(s string, u int) int {
	n := 0
	for i, r := range s {
		if n >= u {
			return i
		}
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
	}
	return len(s)
}
