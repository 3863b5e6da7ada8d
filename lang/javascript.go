package lang

import (
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os/exec"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/codecell-dev/codecell/internal/lazyre"

	"github.com/dop251/goja/parser"
	"github.com/evanw/esbuild/pkg/api"
)

//go:embed runner/node.js
var nodeRunner []byte

var nodeRunnerDigest = sync.OnceValue(func() string { return digestOf(nodeRunner) })

var javascript = &Language{
	Name:        "javascript",
	Aliases:     []string{"js", "node", "nodejs", "mjs", "cjs"},
	Extensions:  []string{".js", ".mjs", ".cjs"},
	Interpreter: "/usr/bin/node",
	Returns:     true,
	prepare:     prepareNode(api.LoaderJS),
	live:        liveNode,
	liveRuntime: "node",
	cell:        nodeCell(false),
	outOfMemory: nodeOutOfMemory,
}

var typescript = &Language{
	Name:        "typescript",
	Aliases:     []string{"ts", "mts", "cts"},
	Extensions:  []string{".ts", ".mts", ".cts"},
	Interpreter: "/usr/bin/node",
	Returns:     true,
	prepare:     prepareNode(api.LoaderTS),
	live:        liveNode,
	liveRuntime: "node",
	cell:        nodeCell(true),
	outOfMemory: nodeOutOfMemory,
}

func nodeOutOfMemory(stderr string) bool {
	return strings.Contains(stderr, "JavaScript heap out of memory") ||
		strings.Contains(stderr, "Fatal process out of memory") ||
		strings.Contains(stderr, "Reached heap limit")
}

// The program becomes the body of one async function, so that top-level
// await and return work. The header shares the program's first line, so
// line numbers stay the user's without help.
const mainHeader = "async function __codecell_main__(require, __codecell_import__, __filename, __dirname, callTool, tools) {"

func prepareNode(loader api.Loader) func(src *Source, v View) (*Program, error) {
	return func(src *Source, v View) (*Program, error) {
		prog := &Program{Files: map[string][]byte{"src/" + src.Filename: []byte(src.Code)}}
		transform := src.Transpile
		if transform == nil {
			transform = Transpile
		}
		js, syn, err := transform(src.Code, src.Filename, loader == api.LoaderTS)
		if err != nil {
			return nil, err
		}
		if syn != nil {
			prog.Syntax = syn
			return prog, nil
		}
		cfg := runnerConfig{
			Source:     path.Join(v.Runner, "src", src.Filename),
			Main:       path.Join(v.Runner, "program.js"),
			Filename:   src.Filename,
			Workspace:  v.Workspace,
			Args:       src.Args,
			ValueFD:    src.ValueFD,
			ToolFD:     src.ToolFD,
			ValueLimit: src.ValueLimit,
		}
		prog.Files["runner.js"] = nodeRunner
		prog.Files["program.js"] = []byte(js)
		prog.Files["config.json"] = cfg.json()
		prog.Argv = []string{src.Interpreter, "--enable-source-maps"}
		if src.Memory > 0 {
			// V8 sizes its heap from the machine, not the limit: hold the
			// heap to three quarters of it, so that a program which grows
			// without bound ends with "heap out of memory", not a kill.
			heapMiB := max(src.Memory*3/4>>20, 16)
			prog.Argv = append(prog.Argv, "--max-old-space-size="+strconv.FormatInt(heapMiB, 10))
		}
		if flags, runtime := nodePermissions(src.Interpreter, policyBlocks(src.Policy), v); len(flags) > 0 {
			prog.Argv = append(prog.Argv, flags...)
			prog.Runtime = runtime
		}
		runnerAt := len(prog.Argv)
		prog.Argv = append(prog.Argv, path.Join(v.Runner, "runner.js"), path.Join(v.Runner, "config.json"))
		prog.Warm = warmFor(src, v, prog.Argv, runnerAt, "runner.js", nodeRunner, nodeRunnerDigest())
		return prog, nil
	}
}

// liveNode starts a live session's node, shared by its JavaScript and
// TypeScript cells (see the runner's runLive).
func liveNode(src LiveSource, v View) *Live {
	argv := []string{src.Interpreter, "--enable-source-maps"}
	if src.Memory > 0 {
		argv = append(argv, "--max-old-space-size="+strconv.FormatInt(max(src.Memory*3/4>>20, 16), 10))
	}
	live := &Live{Files: map[string][]byte{"runner.js": nodeRunner}}
	if flags, runtime := nodePermissions(src.Interpreter, policyBlocks(src.Policy), v); len(flags) > 0 {
		argv = append(argv, flags...)
		live.Guard = runtime
	}
	live.Argv = append(argv, path.Join(v.Runner, "runner.js"), "--live", strconv.Itoa(src.ControlFD), strconv.Itoa(src.ToolFD), v.Workspace)
	return live
}

// nodeCell transpiles a cell as a program (Transpile), with its top-level
// declarations made globals (liveDeclarations).
func nodeCell(typescript bool) func(code, filename string, transpile func(code, filename string, typescript bool) (string, *SyntaxError, error)) (*Cell, error) {
	return func(code, filename string, transpile func(code, filename string, typescript bool) (string, *SyntaxError, error)) (*Cell, error) {
		if !typescript {
			if cell, ok := plainCell(code, filename); ok {
				return cell, nil
			}
		}
		if transpile == nil {
			transpile = Transpile
		}
		js, syn, err := transpile(code, filename, typescript)
		if err != nil {
			return nil, err
		}
		if syn != nil {
			return &Cell{Syntax: syn}, nil
		}
		out, names, err := liveDeclarations(js)
		if err != nil {
			return &Cell{Code: js, Warning: "this cell's top-level declarations could not be kept for the next cells (" + err.Error() +
				"): they end with it; assign to globalThis.name to keep a value"}, nil
		}
		return &Cell{Code: out, Globals: names}, nil
	}
}

// Transpile turns a JavaScript or TypeScript program into a CommonJS module
// that exports one async function: static imports become dynamic ones, types
// are stripped by esbuild, and the final expression statement becomes the
// function's return value. A source map keeps stack traces on the user's
// lines. A program that does not parse returns syn; one whose module would
// be out of proportion to it returns an *OutputError.
//
// Transpile runs esbuild on the program in this process: run it on
// untrusted code only after CheckNesting, and where a crash costs nothing
// else (see Source.Transpile).
func Transpile(code, filename string, typescript bool) (js string, syn *SyntaxError, err error) {
	loader := api.LoaderJS
	if typescript {
		loader = api.LoaderTS
	}
	body := rewriteModuleSyntax(hideShebang(code), typescript)
	src := mainHeader + body + "\n}"
	if typescript {
		if lowered, ok := lowerNamespaces(body, filename); ok {
			src, loader = lowered, api.LoaderJS
		}
	}
	r := api.Transform(src, transformOptions(loader, filename))
	if len(r.Errors) > 0 {
		return "", syntaxError(filename, code, r.Errors[0]), nil
	}
	if err := checkOutput(code, len(r.Code)+len(r.Map)); err != nil {
		return "", nil, err
	}
	out, at := returnFinalExpression(string(r.Code))
	sourceMap := r.Map
	if at.width > 0 {
		sourceMap = insertColumns(sourceMap, at.line, at.col, at.width)
	}
	return out + "module.exports = __codecell_main__;\n//# sourceMappingURL=data:application/json;base64," +
		base64.StdEncoding.EncodeToString(sourceMap) + "\n", nil, nil
}

// namespaceRE finds a TypeScript namespace (or module, or declare global)
// declared at the start of a line: a declaration TypeScript allows at the
// top level only, not in the function a program runs in.
var namespaceRE = lazyre.New(`(?m)^[ \t]*(?:export[ \t]+)?(?:declare[ \t]+)?(?:(?:namespace|module)[ \t]+[A-Za-z_$'"]|global[ \t]*\{)`)

// lowerNamespaces compiles a TypeScript program that declares a namespace
// at its top level, where TypeScript allows one, into JavaScript, which then
// goes into the program's function as any JavaScript does. It returns that
// function's source, with a source map onto the user's program inline that
// esbuild composes with its own. ok is false when the program has no
// namespace, or does not compile at the top level (a top-level return, which
// only the function allows): it then goes in as it is.
func lowerNamespaces(body, filename string) (src string, ok bool) {
	if !namespaceRE().MatchString(body) {
		return "", false
	}
	opts := transformOptions(api.LoaderTS, filename)
	r := api.Transform(body, opts)
	if len(r.Errors) > 0 || checkOutput(body, len(r.Code)+len(r.Map)) != nil {
		return "", false
	}
	// The function's header takes a line of its own: the map gets an
	// empty first line to match.
	var m map[string]any
	if err := json.Unmarshal(r.Map, &m); err != nil {
		return "", false
	}
	mappings, _ := m["mappings"].(string)
	m["mappings"] = ";" + mappings
	sm, err := json.Marshal(m)
	if err != nil {
		return "", false
	}
	return mainHeader + "\n" + string(r.Code) + "\n}\n//# sourceMappingURL=data:application/json;base64," +
		base64.StdEncoding.EncodeToString(sm) + "\n", true
}

// hideShebang turns a first line "#!/usr/bin/env node", which node skips in
// a file it runs but which cannot stand inside a function, into a comment of
// the same length: every position stays where it was.
func hideShebang(code string) string {
	if strings.HasPrefix(code, "#!") {
		return "//" + code[2:]
	}
	return code
}

// OutputError is a program whose transpiled form, with its source map,
// would be out of proportion to the program.
type OutputError struct {
	Size, Limit int // bytes
}

func (e *OutputError) Error() string {
	return fmt.Sprintf("transpiling the program would make %d bytes of JavaScript and source map, more than %d (16 times the program, or 1 MiB)", e.Size, e.Limit)
}

// checkOutput refuses a transform's output of size bytes when it is more
// than 16 times the program and more than 1 MiB: esbuild indents each level
// of nesting, so a deep program can make output that grows with the square
// of its depth.
func checkOutput(code string, size int) error {
	limit := max(1<<20, 16*len(code))
	if size > limit {
		return &OutputError{Size: size, Limit: limit}
	}
	return nil
}

// transformOptions are esbuild's options for a program, to run or to check.
func transformOptions(loader api.Loader, filename string) api.TransformOptions {
	return api.TransformOptions{
		Loader:         loader,
		Sourcefile:     "src/" + filename,
		Sourcemap:      api.SourceMapExternal,
		SourcesContent: api.SourcesContentInclude,
		Target:         api.ESNext,
		// Node (20 and 22 at least) does not parse decorators yet:
		// esbuild writes them as the calls they stand for.
		Supported:     map[string]bool{"decorators": false},
		Platform:      api.PlatformNode,
		Charset:       api.CharsetUTF8,
		LegalComments: api.LegalCommentsNone,
		LogLevel:      api.LogLevelSilent,
		LogOverride:   silentWarnings,
	}
}

// silentWarnings turns off esbuild's warnings about JavaScript, which
// codecell never shows. esbuild places each one, and a note on an earlier
// line, by scanning the program between them: a program that repeats a
// construct a warning is about (10,000 copies of one case in a switch)
// costs time with the square of its length for nothing.
var silentWarnings = func() map[string]api.LogLevel {
	m := map[string]api.LogLevel{}
	for _, id := range []string{
		"assert-type-json", "assign-to-constant", "assign-to-define", "assign-to-import", "bigint",
		"call-import-namespace", "class-name-will-throw", "commonjs-variable-in-esm", "confusing-typescript-cast",
		"delete-super-property", "direct-eval", "duplicate-case", "duplicate-object-key", "empty-import-meta",
		"equals-nan", "equals-negative-zero", "equals-new-object", "html-comment-in-js", "impossible-typeof",
		"indirect-require", "private-name-will-throw", "semicolon-after-return", "suspicious-logical-operator",
		"suspicious-nullish-coalescing", "unsupported-dynamic-import", "unsupported-jsx-comment",
		"unsupported-regexp", "unsupported-require-call",
	} {
		m[id] = api.LogLevelSilent
	}
	return m
}()

// ScriptForCheck is a JavaScript or TypeScript program as static checks
// read it: the body of the same async function it runs in, with static
// imports rewritten as for running and types stripped. Re-exports
// (export … from "m"), which running drops, are written as the imports they
// name, so that a check sees every module the program asks for. The syntax
// features named in lower (esbuild's names, as in
// api.TransformOptions.Supported) are rewritten into older forms, for a
// checker whose parser lacks them; when esbuild cannot do that for this
// program, js keeps them.
//
// sourceMap is a v3 source map of js onto the rewritten program (columns in
// UTF-16 code units). The rewritten program keeps the user's lines, and the
// map's sourcesContent holds it, function header included, so that columns
// on rewritten lines can be traced back to the user's. A program that does
// not parse returns syn, as running it would; one whose output would be out
// of proportion to it returns an *OutputError.
func ScriptForCheck(code, filename string, typescript bool, lower ...string) (js string, sourceMap []byte, syn *SyntaxError, err error) {
	loader := api.LoaderJS
	if typescript {
		loader = api.LoaderTS
	}
	body := rewriteModuleSyntax(replaceKeepingLines(reexportRE(), hideShebang(code), func(m []string) string {
		return m[1] + "await __codecell_import__(" + strconv.Quote(m[2]) + ");"
	}), typescript)
	src := mainHeader + body + "\n}"
	if typescript {
		if lowered, ok := lowerNamespaces(body, filename); ok {
			src, loader = lowered, api.LoaderJS
		}
	}
	opts := transformOptions(loader, filename)
	if len(lower) > 0 {
		lowered := opts
		lowered.Supported = map[string]bool{}
		for _, f := range lower {
			lowered.Supported[f] = false
		}
		if r := api.Transform(src, lowered); len(r.Errors) == 0 {
			return string(r.Code), r.Map, nil, checkOutput(code, len(r.Code)+len(r.Map))
		}
	}
	r := api.Transform(src, opts)
	if len(r.Errors) > 0 {
		return "", nil, syntaxError(filename, code, r.Errors[0]), nil
	}
	return string(r.Code), r.Map, nil, checkOutput(code, len(r.Code)+len(r.Map))
}

// export * from "m", export * as ns from "m", export {a, b as c} from "m"
var reexportRE = lazyre.New(`(?m)^([ \t]*)export[ \t]*(?:\*(?:[ \t]+as[ \t]+[\w$]+)?|\{[^}]*\})[ \t]*from[ \t]*['"]([^'"\n]+)['"][ \t]*;?`)

func syntaxError(filename, code string, m api.Message) *SyntaxError {
	e := &SyntaxError{Filename: filename, Message: m.Text, Line: 1, Column: 1}
	if loc := m.Location; loc != nil {
		text, col := loc.LineText, loc.Column
		lines := strings.Split(strings.TrimRight(code, " \t\r\n"), "\n")
		if loc.Line > len(lines) || strings.HasPrefix(m.Text, "Unexpected end of file") {
			// The parser reached the closing brace the wrapper added: the
			// program ended inside something it had opened.
			m.Text = "Unexpected end of input (a bracket, block, string or comment is not closed)"
			loc.Line, text = len(lines), lines[len(lines)-1]
			col = len(text)
			if loc.Line == 1 {
				text = mainHeader + text
				col += len(mainHeader)
			}
		}
		if loc.Line == 1 {
			// The header shares the first line; the user never wrote it.
			text = strings.TrimPrefix(text, mainHeader)
			col = max(col-len(mainHeader), 0)
		}
		if col > len(text) {
			col = len(text)
		}
		e.Line, e.Message = loc.Line, m.Text
		e.Column = utf8.RuneCountInString(text[:col]) + 1
		num := strconv.Itoa(e.Line)
		e.Text = fmt.Sprintf("%s:%d:%d\n  %s | %s\n  %s | %s^\n\nSyntaxError: %s\n",
			filename, e.Line, e.Column, num, text, strings.Repeat(" ", len(num)), strings.Repeat(" ", e.Column-1), m.Text)
	} else {
		e.Text = filename + "\n\nSyntaxError: " + m.Text + "\n"
	}
	if strings.Contains(m.Text, "import") {
		e.Text += "(static imports must stand at the start of a line; `const m = await import(\"m\")` works anywhere)\n"
	}
	return e
}

// insertion is text returnFinalExpression put into a line: width
// columns at col of line (0-based).
type insertion struct{ line, col, width int }

// returnFinalExpression makes the program's last statement return its value
// when it is an expression statement. It works on esbuild's output, which
// prints each statement of the function body on its own line, indented by two
// spaces and ended by a semicolon: the last such line that starts an
// expression is where the final statement starts. Whether the rest is one
// expression is asked of esbuild itself, so no second grammar is involved.
//
// The return goes at the start of the statement's own line, where V8 puts
// the statement's position, which a stack trace may give (an error in the
// expression at large, such as a name that is not defined): on the line
// before, it would name the previous statement's line. at says what was
// inserted, for the source map's columns to follow (insertColumns).
func returnFinalExpression(js string) (out string, at insertion) {
	lines := strings.Split(js, "\n")
	head := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "async function __codecell_main__(") {
			head = i
			break
		}
	}
	end := -1 // the function's closing brace
	for i := len(lines) - 1; i > head; i-- {
		if lines[i] == "}" {
			end = i
			break
		}
	}
	if head < 0 || end <= head+1 {
		return js, insertion{}
	}
	tries := 0
	for i := end - 1; i > head && tries < 20; i-- {
		l := lines[i]
		if !strings.HasPrefix(l, "  ") || strings.HasPrefix(l, "   ") {
			continue
		}
		stmt := l[2:]
		if strings.HasPrefix(stmt, "}") || strings.HasPrefix(stmt, ")") || strings.HasPrefix(stmt, "]") {
			continue
		}
		tries++
		tail := strings.TrimSuffix(strings.Join(lines[i:end], "\n"), ";")
		if declaration(stmt) || !isExpression(tail) {
			if !strings.Contains(tail, "`") {
				// The line started a statement (only a template literal can
				// hold an indented line that does not), and it is not an
				// expression: there is no final value.
				return js, insertion{}
			}
			continue
		}
		const ret = "return ("
		lines[i] = "  " + ret + stmt
		lines[end-1] = strings.TrimSuffix(lines[end-1], ";") + ");"
		return strings.Join(lines, "\n"), insertion{line: i, col: 2, width: len(ret)}
	}
	return js, insertion{}
}

// insertColumns returns the source map sourceMap (v3, JSON) of a generated
// file into whose line (0-based) width columns were inserted at col: the
// segments from col on move right, and what was inserted maps where the
// segment it now stands in does. A map it cannot read is returned as it is.
func insertColumns(sourceMap []byte, line, col, width int) []byte {
	var m map[string]json.RawMessage
	var mappings string
	if json.Unmarshal(sourceMap, &m) != nil || json.Unmarshal(m["mappings"], &mappings) != nil {
		return sourceMap
	}
	lines := strings.Split(mappings, ";")
	if line >= len(lines) || lines[line] == "" {
		return sourceMap
	}
	segs := strings.Split(lines[line], ",")
	abs := 0
	for k, seg := range segs {
		fields, ok := decodeVLQs(seg)
		if !ok || len(fields) == 0 {
			return sourceMap
		}
		prev := abs
		abs += fields[0]
		if abs >= col {
			// Only the first segment that moves changes: the others are
			// relative to it.
			fields[0] = abs + width - prev
			segs[k] = encodeVLQs(fields)
			break
		}
	}
	lines[line] = strings.Join(segs, ",")
	b, err := json.Marshal(strings.Join(lines, ";"))
	if err != nil {
		return sourceMap
	}
	m["mappings"] = b
	out, err := json.Marshal(m)
	if err != nil {
		return sourceMap
	}
	return out
}

const vlqDigits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

// decodeVLQs reads a source map segment's base64 VLQ numbers.
func decodeVLQs(s string) ([]int, bool) {
	var out []int
	shift, v := 0, 0
	for i := 0; i < len(s); i++ {
		d := strings.IndexByte(vlqDigits, s[i])
		if d < 0 || shift > 60 {
			return nil, false
		}
		v |= (d & 31) << shift
		if d&32 != 0 {
			shift += 5
			continue
		}
		if v&1 != 0 {
			out = append(out, -(v >> 1))
		} else {
			out = append(out, v>>1)
		}
		shift, v = 0, 0
	}
	return out, shift == 0
}

// encodeVLQs writes numbers as a source map segment's base64 VLQs.
func encodeVLQs(nums []int) string {
	var b strings.Builder
	for _, n := range nums {
		v := n << 1
		if n < 0 {
			v = (-n << 1) | 1
		}
		for {
			d := v & 31
			v >>= 5
			if v != 0 {
				d |= 32
			}
			b.WriteByte(vlqDigits[d])
			if v == 0 {
				break
			}
		}
	}
	return b.String()
}

// declaration reports whether a statement is a declaration that would also
// parse as an expression.
func declaration(stmt string) bool {
	for _, kw := range []string{"function ", "function*", "async function", "class ", "{"} {
		if strings.HasPrefix(stmt, kw) {
			return true
		}
	}
	return false
}

func isExpression(js string) bool {
	src := "(async () => (\n" + js + "\n));"
	if gojaParses(src) {
		return true
	}
	// goja's parser does not know all of what esbuild may write (it
	// refuses some newer syntax): only esbuild's no is a no.
	r := api.Transform(src, api.TransformOptions{
		Loader:      api.LoaderJS,
		Target:      api.ESNext,
		LogLevel:    api.LogLevelSilent,
		LogOverride: silentWarnings,
	})
	return len(r.Errors) == 0
}

// gojaParses reports whether goja's parser reads src: a yes that costs a
// fraction of esbuild's (whose every Transform builds a bundle). Callers
// run it where esbuild runs, in a parser worker (see isolate).
func gojaParses(src string) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	_, err := parser.ParseFile(nil, "", dynamicImportRE().ReplaceAllString(src, "$$mport$1"), parser.IgnoreRegExpErrors, parser.WithDisableSourceMaps)
	return err == nil
}

var (
	// import type {A} from "m" (TypeScript only; erased).
	importTypeRE = lazyre.New(`(?m)^([ \t]*)import[ \t]+type\b[^;'"]*?\bfrom[ \t]*['"][^'"\n]+['"][ \t]*;?`)
	// import "m"
	importBareRE = lazyre.New(`(?m)^([ \t]*)import[ \t]*(['"])([^'"\n]+)['"][ \t]*;?`)
	// import x, {a, b as c} from "m" / import * as ns from "m"
	importFromRE = lazyre.New(`(?m)^([ \t]*)import\b([\w$\s{},*"']*?)\bfrom[ \t]*['"]([^'"\n]+)['"][ \t]*;?`)
	// export default …, export const …
	exportDeclRE    = lazyre.New(exportDecl)
	exportDefaultRE = lazyre.New(exportDefault)
	// export {a, b}; export * from "m"
	exportListRE = lazyre.New(exportList)
)

const (
	exportDecl    = `(?m)^([ \t]*)export[ \t]+(?:default[ \t]+)?((?:async[ \t]+)?(?:function|class|const|let|var|enum|interface|type|abstract|declare|namespace)\b)`
	exportDefault = `(?m)^([ \t]*)export[ \t]+default[ \t]+`
	exportList    = `(?m)^([ \t]*)export[ \t]*(?:\*(?:[ \t]+as[ \t]+[\w$]+)?|\{[^}]*\})(?:[ \t]*from[ \t]*['"][^'"\n]+['"])?[ \t]*;?`
)

// rewriteModuleSyntax turns static imports and exports, which cannot stand
// inside a function, into their dynamic equivalents. Every rewrite keeps the
// number of lines, so line numbers stay the user's.
func rewriteModuleSyntax(code string, ts bool) string {
	n := 0
	if ts {
		code = replaceKeepingLines(importTypeRE(), code, func(m []string) string { return m[1] })
	}
	code = replaceKeepingLines(importBareRE(), code, func(m []string) string {
		return m[1] + "await __codecell_import__(" + strconv.Quote(m[3]) + ");"
	})
	code = replaceKeepingLines(importFromRE(), code, func(m []string) string {
		n++
		return m[1] + importBindings(m[2], m[3], n, ts)
	})
	decl, def, list := exportDeclRE, exportDefaultRE, exportListRE
	if ts && namespaceRE().MatchString(code) {
		// A namespace exports its members with export: only the program's
		// own exports, at the start of a line, are dropped.
		decl, def, list = topExportDeclRE, topExportDefaultRE, topExportListRE
	}
	code = replaceKeepingLines(decl(), code, func(m []string) string { return m[1] + m[2] })
	code = replaceKeepingLines(def(), code, func(m []string) string { return m[1] })
	code = replaceKeepingLines(list(), code, func(m []string) string { return m[1] })
	return code
}

// The export forms above, unindented.
var (
	topExportDeclRE    = lazyre.New(strings.Replace(exportDecl, `^([ \t]*)`, `^()`, 1))
	topExportDefaultRE = lazyre.New(strings.Replace(exportDefault, `^([ \t]*)`, `^()`, 1))
	topExportListRE    = lazyre.New(strings.Replace(exportList, `^([ \t]*)`, `^()`, 1))
)

// importBindings is the dynamic form of one import clause.
func importBindings(clause, spec string, n int, ts bool) string {
	clause = strings.TrimSpace(clause)
	mod := "__codecell_m" + strconv.Itoa(n)
	out := "const " + mod + " = await __codecell_import__(" + strconv.Quote(spec) + ");"
	def, rest := clause, ""
	if i := strings.IndexAny(clause, "{*"); i >= 0 {
		def, rest = clause[:i], clause[i:]
	}
	def = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(def), ","))
	if def != "" {
		out += " const " + def + " = " + mod + ".default;"
	}
	switch {
	case strings.HasPrefix(rest, "*"):
		ns := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(strings.TrimPrefix(rest, "*")), "as"))
		out += " const " + ns + " = " + mod + ";"
	case strings.HasPrefix(rest, "{"):
		var names []string
		for _, item := range strings.Split(strings.Trim(rest, "{} \t\n"), ",") {
			item = strings.Join(strings.Fields(item), " ")
			if item == "" || (ts && strings.HasPrefix(item, "type ")) {
				continue
			}
			if from, to, ok := strings.Cut(item, " as "); ok {
				item = from + ": " + to
			}
			names = append(names, item)
		}
		if len(names) > 0 {
			out += " const {" + strings.Join(names, ", ") + "} = " + mod + ";"
		}
	}
	return out
}

// replaceKeepingLines replaces each match of re with f(submatches), padded
// with the newlines the match spanned.
func replaceKeepingLines(re *regexp.Regexp, s string, f func([]string) string) string {
	idx := re.FindAllStringSubmatchIndex(s, -1)
	if idx == nil {
		return s
	}
	var b strings.Builder
	last := 0
	for _, loc := range idx {
		b.WriteString(s[last:loc[0]])
		m := make([]string, len(loc)/2)
		for i := range m {
			if loc[2*i] >= 0 {
				m[i] = s[loc[2*i]:loc[2*i+1]]
			}
		}
		rep := f(m)
		b.WriteString(rep)
		b.WriteString(strings.Repeat("\n", strings.Count(m[0], "\n")-strings.Count(rep, "\n")))
		last = loc[1]
	}
	b.WriteString(s[last:])
	return b.String()
}

// nodeMajor caches the major version of each node binary.
var nodeMajor sync.Map // path -> int

func nodeVersion(interp string) int {
	if v, ok := nodeMajor.Load(interp); ok {
		return v.(int)
	}
	major := 0
	if out, err := exec.Command(interp, "--version").Output(); err == nil {
		v := strings.TrimPrefix(strings.TrimSpace(string(out)), "v")
		major, _ = strconv.Atoi(strings.SplitN(v, ".", 2)[0])
	}
	nodeMajor.Store(interp, major)
	return major
}

// nodePermissions returns the flags of node's permission model for the
// categories a policy blocks, and how the Result describes them: child
// processes and workers refused under process, file access held to the
// runner's and the workspace's directories (to read, nothing to write)
// under filesystem. Node 20 and 21 call it --experimental-permission, 22
// and later --permission; older nodes have none, and get no flags. The
// model has nothing for the network: the sandbox's empty network
// namespace is what holds there.
func nodePermissions(interp string, blocks []string, v View) ([]string, string) {
	process, files := false, false
	for _, b := range blocks {
		process = process || b == "process"
		files = files || b == "filesystem"
	}
	if !process && !files {
		return nil, ""
	}
	major := nodeVersion(interp)
	var flags []string
	switch {
	case major >= 22:
		flags = append(flags, "--permission")
	case major >= 20:
		flags = append(flags, "--experimental-permission")
	default:
		return nil, ""
	}
	var refused []string
	if files {
		flags = append(flags, "--allow-fs-read="+v.Runner+"/*", "--allow-fs-read="+v.Workspace+"/*")
		refused = append(refused, "reading files outside the runner's and the workspace's directories, writing any")
	} else {
		flags = append(flags, "--allow-fs-read=*", "--allow-fs-write=*")
	}
	if process {
		refused = append(refused, "child processes", "workers")
	} else {
		flags = append(flags, "--allow-child-process", "--allow-worker")
	}
	return flags, fmt.Sprintf("node permission model (%s): refuses %s", flags[0], strings.Join(refused, ", "))
}
