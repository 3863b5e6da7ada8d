package tooldoc

import (
	"slices"
	"sort"
	"strings"

	"github.com/codecell-dev/codecell"
)

// Precedence of a rendered TypeScript type, to know when it needs
// parentheses.
const (
	precUnion = iota
	precIntersection
	precPrimary
)

// tsWriter renders types in TypeScript.
type tsWriter struct {
	// signature renders on one line, with no comments, nested objects
	// deeper than maxDepth as `object` and long enums as their base type.
	signature bool
	maxDepth  int
}

func (w *tsWriter) typ(t *typ, indent string, depth int) (string, int) {
	switch t.kind {
	case kUnknown:
		return "unknown", precPrimary
	case kNever:
		return "never", precPrimary
	case kNull:
		return "null", precPrimary
	case kBool:
		return "boolean", precPrimary
	case kInt, kNumber:
		return "number", precPrimary
	case kString:
		return "string", precPrimary
	case kLiteral:
		return w.literals(t.lits)
	case kArray:
		return w.wrap(t.elem, indent, depth, precPrimary) + "[]", precPrimary
	case kTuple:
		var parts []string
		for _, it := range t.items {
			s, _ := w.typ(it, indent, depth)
			parts = append(parts, s)
		}
		if t.rest != nil {
			parts = append(parts, "..."+w.wrap(t.rest, indent, depth, precPrimary)+"[]")
		}
		return "[" + strings.Join(parts, ", ") + "]", precPrimary
	case kObject:
		return w.object(t, indent, depth), precPrimary
	case kUnion:
		var parts []string
		for _, m := range t.members {
			parts = append(parts, w.wrap(m, indent, depth, precIntersection))
		}
		return joinUnion(parts)
	case kAllOf:
		var parts []string
		for _, m := range t.members {
			s := w.wrap(m, indent, depth, precIntersection)
			if s != "unknown" && !slices.Contains(parts, s) {
				parts = append(parts, s)
			}
		}
		switch len(parts) {
		case 0:
			return "unknown", precPrimary
		case 1:
			return parts[0], precPrimary
		}
		return strings.Join(parts, " & "), precIntersection
	case kRef:
		return t.ref.name, precPrimary
	}
	return "unknown", precPrimary
}

// wrap renders t, in parentheses if it binds more loosely than min.
func (w *tsWriter) wrap(t *typ, indent string, depth int, min int) string {
	s, p := w.typ(t, indent, depth)
	if p < min {
		return "(" + s + ")"
	}
	return s
}

// joinUnion joins alternatives: each once, unknown swallowing the rest,
// null last.
func joinUnion(parts []string) (string, int) {
	var out []string
	null := false
	for _, s := range parts {
		switch {
		case s == "unknown":
			return "unknown", precPrimary
		case s == "never" || slices.Contains(out, s):
		case s == "null":
			null = true
		default:
			out = append(out, s)
		}
	}
	if null {
		out = append(out, "null")
	}
	switch len(out) {
	case 0:
		return "never", precPrimary
	case 1:
		return out[0], precPrimary
	}
	return strings.Join(out, " | "), precUnion
}

func (w *tsWriter) literals(lits []any) (string, int) {
	var parts []string
	if w.signature && len(lits) > 6 {
		// A one-line signature names the type of a long enum, not its values.
		for _, l := range lits {
			parts = append(parts, literalKind(l))
		}
		return joinUnion(parts)
	}
	for _, l := range lits {
		parts = append(parts, jsonLiteral(l))
	}
	return joinUnion(parts)
}

func literalKind(l any) string {
	switch l.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	}
	return "number"
}

// object renders an object type: on one line when it is short and nothing
// in it has a comment, else one member a line, each under its comment.
func (w *tsWriter) object(t *typ, indent string, depth int) string {
	if w.signature && depth > w.maxDepth {
		return "object"
	}
	inner := indent + "  "
	var members, notes []string
	hasNotes := false
	for _, p := range t.props {
		s, _ := w.typ(p.t, inner, depth+1)
		opt := "?"
		if p.required {
			opt = ""
		} else if objectProto[p.key] {
			// Every object has this key through its prototype, so when the
			// params leave it out it is still there, as the prototype's.
			s, _ = joinUnion([]string{s, "Object[" + jsonString(p.key) + "]"})
		}
		members = append(members, tsKey(p.key)+opt+": "+s)
		note := ""
		if !w.signature {
			note = p.note
		}
		notes = append(notes, note)
		hasNotes = hasNotes || note != ""
	}
	if t.index != nil {
		members = append(members, "[key: string]: "+w.indexType(t, inner, depth))
		notes = append(notes, "")
	}
	if len(members) == 0 {
		return "{}"
	}
	line := "{ " + strings.Join(members, "; ") + " }"
	if w.signature || !hasNotes && len(line) <= 80 && !strings.Contains(line, "\n") {
		return line
	}
	var b strings.Builder
	b.WriteString("{\n")
	for i, m := range members {
		b.WriteString(jsdoc(notes[i], inner))
		b.WriteString(inner + m + ";\n")
	}
	b.WriteString(indent + "}")
	return b.String()
}

// objectProto are the keys every object has, from Object.prototype.
var objectProto = set(`constructor toString toLocaleString valueOf hasOwnProperty isPrototypeOf
	propertyIsEnumerable`)

// indexType is the type of an index signature. TypeScript requires every
// property to fit it, so it is the union of the extra keys' type and the
// properties' types, or unknown when that union would be long.
func (w *tsWriter) indexType(t *typ, indent string, depth int) string {
	s, _ := w.typ(t.index, indent, depth+1)
	if len(t.props) == 0 {
		return s
	}
	parts := []string{s}
	optional := false
	for _, p := range t.props {
		ps, _ := w.typ(p.t, indent, depth+1)
		parts = append(parts, ps)
		optional = optional || !p.required
	}
	if optional {
		parts = append(parts, "undefined")
	}
	u, _ := joinUnion(parts)
	if strings.Count(u, " | ") > 4 || strings.Contains(u, "\n") {
		return "unknown"
	}
	return u
}

// jsdoc renders a comment: on one line when the text is one line.
func jsdoc(text, indent string) string {
	text = strings.ReplaceAll(clean(text), "*/", "*\\/")
	if text == "" {
		return ""
	}
	if !strings.Contains(text, "\n") {
		return indent + "/** " + text + " */\n"
	}
	var b strings.Builder
	b.WriteString(indent + "/**\n")
	for _, l := range strings.Split(text, "\n") {
		b.WriteString(strings.TrimRight(indent+" * "+l, " ") + "\n")
	}
	b.WriteString(indent + " */\n")
	return b.String()
}

// TypeScript returns declarations for the tools, for a model to read before
// it writes a program that calls them. For each tool there is an interface
// for its params and, when it has an output schema, a type for its result,
// commented from the schemas' descriptions; then the `tools` object, where
// a server's tools ("server.tool") are a nested object, and one overload of
// callTool per tool:
//
//	declare const tools: {
//	  /** Search issues. */
//	  github: { search_issues(params: GithubSearchIssuesParams): Promise<unknown> };
//	};
//	declare function callTool(name: "github.search_issues", params: GithubSearchIssuesParams): Promise<unknown>;
//
// A tool without an output schema returns `unknown`: the program gets
// whatever JSON the tool returns, often a string. Definitions ($defs) are
// declared once, shared by the tools whose schemas define them alike. The
// output is sorted by tool name, so the same tools give the same text.
func TypeScript(tools []codecell.Tool) string {
	b, docs := buildAll(tools)
	w := &tsWriter{}
	var out strings.Builder
	out.WriteString("// Tools this program can call: `await tools.NAME(params)` (a server's tools are nested:\n" +
		"// `await tools.SERVER.TOOL(params)`) or `await callTool(\"SERVER.TOOL\", params)`.\n" +
		"// A failed call throws a ToolError.\n")
	for _, n := range b.all {
		out.WriteString(jsdoc(n.note, ""))
		if n.t.kind == kObject {
			out.WriteString("interface " + n.name + " " + w.object(n.t, "", 0) + "\n")
			continue
		}
		s, _ := w.typ(n.t, "", 0)
		out.WriteString("type " + n.name + " = " + s + ";\n")
	}

	root := &tsNode{}
	for i := range docs {
		root.add(&docs[i])
	}
	out.WriteString("declare const tools: ")
	root.write(&out, "")
	out.WriteString(";\n")

	out.WriteString("/** Calls a tool by name. A failure throws a ToolError: its message is the error envelope JSON, `envelope` holds it parsed. */\n")
	if len(docs) == 0 {
		out.WriteString("declare function callTool(name: never, params: never): Promise<unknown>;\n")
	}
	for _, d := range docs {
		out.WriteString("declare function callTool(name: " + jsonString(d.tool.Name) + ", params: " + d.params.name + "): Promise<" + resultName(d) + ">;\n")
	}
	if len(docs) > 0 {
		out.WriteString("/** With {as: \"handle\"}, a result too big to take whole stays on the host, read in pages. */\n" +
			"declare function callTool(name: string, params: object, options: { as: \"handle\" }): Promise<ToolHandle>;\n" +
			"interface ToolHandle {\n" +
			"  handle: string; tool: string; type: \"text\" | \"json\"; size: number;\n" +
			"  read(offset?: number, length?: number): Promise<{ data: string; next: number; eof: boolean; size: number }>;\n" +
			"  pages(length?: number): AsyncGenerator<string>; text(): Promise<string>; json(): Promise<unknown>; save(path: string): Promise<number>;\n" +
			"}\n")
	}
	out.WriteString("interface ToolError extends Error {\n" +
		"  envelope: { error_kind: string; error_code: string; message: string; retryable: boolean; hints?: string[] };\n" +
		"}\n")
	return out.String()
}

func resultName(d toolDoc) string {
	if d.result == nil {
		return "unknown"
	}
	return d.result.name
}

// tsNode is one level of the `tools` object: a tool, a server's tools, or
// (when a tool and a server share a name) both.
type tsNode struct {
	doc      *toolDoc
	children map[string]*tsNode
}

func (n *tsNode) add(d *toolDoc) {
	// The first dot separates a server from its tool: the tool's own name
	// may hold more dots ("server.a.b" is tool "a.b" of server "server").
	server, rest, dotted := strings.Cut(d.tool.Name, ".")
	if dotted {
		n.child(server).child(rest).doc = d
	} else {
		n.child(d.tool.Name).doc = d
	}
}

func (n *tsNode) child(key string) *tsNode {
	if n.children == nil {
		n.children = map[string]*tsNode{}
	}
	c, ok := n.children[key]
	if !ok {
		c = &tsNode{}
		n.children[key] = c
	}
	return c
}

func (n *tsNode) write(out *strings.Builder, indent string) {
	if len(n.children) == 0 {
		out.WriteString("{}")
		return
	}
	keys := make([]string, 0, len(n.children))
	for k := range n.children {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	inner := indent + "  "
	out.WriteString("{\n")
	for _, k := range keys {
		c := n.children[k]
		if c.children == nil {
			out.WriteString(jsdoc(c.doc.tool.Description, inner))
			out.WriteString(inner + tsKey(k) + c.signature() + ";\n")
			continue
		}
		out.WriteString(inner + tsKey(k) + ": {\n")
		if c.doc != nil {
			// Both a tool and a server: the object is callable too.
			out.WriteString(jsdoc(c.doc.tool.Description, inner+"  "))
			out.WriteString(inner + "  " + c.signature() + ";\n")
		}
		var sub strings.Builder
		c.write(&sub, inner)
		out.WriteString(strings.TrimPrefix(sub.String(), "{\n"))
		out.WriteString(";\n")
	}
	out.WriteString(indent + "}")
}

func (n *tsNode) signature() string {
	return "(params: " + n.doc.params.name + "): Promise<" + resultName(*n.doc) + ">"
}

// Signature returns one line that says how to call a tool and what it
// returns, for search results and listings:
//
//	github.search_issues(params: { query: string; limit?: number }) => Promise<{ items: Issue[] }>
//
// The params and the result are written out with one level of nested
// objects; deeper objects read `object`, an enum of more than six values
// reads as its type, and a definition ($defs) reads as its name.
func Signature(t codecell.Tool) string {
	b := newBuilder()
	d := b.tool(t, false)
	w := &tsWriter{signature: true, maxDepth: 1}
	params, _ := w.typ(unref(d.params.t), "", 0)
	result := "unknown"
	if d.result != nil {
		result, _ = w.typ(unref(d.result.t), "", 0)
	}
	return t.Name + "(params: " + params + ") => Promise<" + result + ">"
}

// unref returns what a reference names, so that a schema that is only a
// reference ({"$ref": "#/$defs/Args"}, as pydantic writes) is written out
// rather than named.
func unref(t *typ) *typ {
	seen := map[*named]bool{}
	for t.kind == kRef && !seen[t.ref] && t.ref.t != nil {
		seen[t.ref] = true
		t = t.ref.t
	}
	return t
}

// Summary returns the first sentence of a tool's description, on one line
// and at most max characters (cut at a word, with "…"), for listings that
// give each tool a line.
func Summary(description string, max int) string {
	s := oneLine(description)
	// The first sentence: up to a full stop, question or exclamation mark
	// that ends a word ("e.g." and "v1.2" go on).
	for i := 0; i+1 < len(s); i++ {
		if (s[i] == '.' || s[i] == '!' || s[i] == '?') && s[i+1] == ' ' && i >= 3 && !strings.HasSuffix(s[:i], "e.g") && !strings.HasSuffix(s[:i], "i.e") {
			s = s[:i+1]
			break
		}
	}
	r := []rune(s)
	if max <= 0 || len(r) <= max {
		return s
	}
	cut := string(r[:max-1])
	if i := strings.LastIndexByte(cut, ' '); i > max/2 {
		cut = cut[:i]
	}
	return strings.TrimRight(cut, " ,;:") + "…"
}
