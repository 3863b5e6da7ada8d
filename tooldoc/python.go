package tooldoc

import (
	"slices"
	"sort"
	"strings"

	"github.com/codecell-dev/codecell"
)

// Python returns stubs for the tools, for a model to read before it writes
// a program that calls them, declaring what the sandbox has: the tools
// object whose attributes are the servers and their tools, call_tool,
// call_tool_sync and ToolError. For each tool there is a TypedDict for its
// params (total=False, required keys marked Required), a TypedDict or an
// alias for its result when it has an output schema, and an async method
// of its server's class whose docstring gives the description, each
// parameter with its type and description, the return type and the exact
// call:
//
//	class _ToolsGithub:
//	    async def search_issues(self, **params: Unpack[GithubSearchIssuesParams]) -> Any:
//	        """Search issues. ... Call: await tools.github.search_issues(query=...)"""
//	        return await call_tool("github.search_issues", params)
//
// A name that is not a Python name is written as the sandbox takes it: with
// _ for - (tools.everything.get_sum for "everything.get-sum"), a keyword
// with _ after it, a leading digit with _ before it. It is valid Python 3.11
// that runs: the TypedDicts construct, types are defined before they are
// used (a cycle is quoted), and each method calls the call_tool it finds
// when it is called. Without an output schema a method returns Any. A key
// that is not an identifier, or is a keyword, keeps its exact name through
// the functional TypedDict syntax. The output is sorted by tool name, so
// the same tools give the same text.
func Python(tools []codecell.Tool) string {
	b, docs := buildAll(tools)
	w := &pyWriter{
		reg:     newRegistry(pyReserved()),
		state:   map[*named]int{},
		anon:    map[*typ]string{},
		merged:  map[*typ]*typ{},
		imports: map[string]bool{"Any": true, "AsyncIterator": true},
	}
	for _, n := range b.all {
		w.reg.used[n.name] = true
	}
	for _, d := range docs {
		w.emit(d.params)
		if d.result != nil {
			w.emit(d.result)
		}
	}
	root := w.namespaces(docs)
	w.class(root)

	var out strings.Builder
	out.WriteString(`# Tools this program can call, as the sandbox has them:
#   r = await tools.SERVER.TOOL(key=value, ...)    or one dict: tools.SERVER.TOOL({"key": value})
#   r = await call_tool("SERVER.TOOL", {"key": value})   (call_tool_sync(...) where there is no event loop)
# Several at once: await asyncio.gather(tools.a.x(...), tools.b.y(...)). A name that is not a
# Python name is spelled as below (_ for -), or given whole: tools["everything.get-sum"](...).
# The stubs say what each tool takes and returns; each docstring ends with the exact call.
`)
	imports := make([]string, 0, len(w.imports))
	for k := range w.imports {
		imports = append(imports, k)
	}
	sort.Strings(imports)
	out.WriteString("from typing import " + strings.Join(imports, ", ") + "\n\n")
	out.WriteString(`class ToolError(RuntimeError):
    """A tool call that failed. str(e) is the error envelope as JSON; e.envelope holds it:
    {"error_kind": ..., "error_code": ..., "message": ..., "retryable": ..., "hints": [...]}."""
    envelope: dict[str, Any]

class ToolHandle:
    """A result kept on the host: size bytes of type "text" or "json", read in pages."""
    handle: str; tool: str; type: str; size: int
    async def read(self, offset: int = 0, length: int = 0) -> dict[str, Any]: ...
    def pages(self, length: int = 0) -> AsyncIterator[str]: ...
    async def text(self) -> str: ...
    async def json(self) -> Any: ...
    async def save(self, path: str) -> int: ...

async def call_tool(name: str, params: dict[str, Any] | None = None, options: dict[str, str] | None = None) -> Any:
    """Calls the tool named name with params (sent as JSON); returns its result, decoded from JSON.
    A failure raises ToolError. With options {"as": "handle"}, a ToolHandle: the result stays on the host."""

def call_tool_sync(name: str, params: dict[str, Any] | None = None, options: dict[str, str] | None = None) -> Any:
    """call_tool for code without an event loop: blocks until the result comes (ToolHandle methods: read_sync, text_sync, save_sync...)."""
`)
	out.WriteString(w.out.String())
	out.WriteString("\ntools = " + root.class + "()\n")
	return out.String()
}

// pyNamespace is a node of the tools object: tools, a server, or a part of
// a dotted name. tool is the tool of this very name, if any.
type pyNamespace struct {
	class    string
	path     string // as the program writes it: "tools.github"
	tool     *toolDoc
	children []*pyNamespace
	attr     string // its attribute in its parent
	name     string // the tool's (or namespace's) own dotted name
	items    []string
}

// namespaces builds the tree of the tools object. A tool whose attribute
// would collide with another's, or that the sandbox would not resolve
// (another tool spelled the same), is left to item access, noted in its
// parent's docstring.
func (w *pyWriter) namespaces(docs []toolDoc) *pyNamespace {
	root := &pyNamespace{path: "tools"}
	names := make([]string, 0, len(docs))
	for _, d := range docs {
		names = append(names, d.tool.Name)
	}
	for i := range docs {
		d := &docs[i]
		parts := strings.Split(d.tool.Name, ".")
		attrs := make([]string, len(parts))
		for j, p := range parts {
			attrs[j] = pyAttr(p)
		}
		spelled := strings.Join(attrs, ".")
		if !reachable(d.tool.Name, spelled, names) || slices.Contains(attrs, "") {
			root.items = append(root.items, d.tool.Name)
			continue
		}
		node := root
		for j := range parts {
			var next *pyNamespace
			for _, c := range node.children {
				if c.attr == attrs[j] {
					next = c
				}
			}
			if next == nil {
				next = &pyNamespace{attr: attrs[j], path: node.path + "." + attrs[j], name: strings.Join(parts[:j+1], ".")}
				node.children = append(node.children, next)
			} else if next.name != strings.Join(parts[:j+1], ".") {
				// Another name spelled the same: the sandbox could not tell them apart.
				node = nil
				break
			}
			node = next
		}
		if node == nil || node.tool != nil {
			root.items = append(root.items, d.tool.Name)
			continue
		}
		node.tool = d
	}
	return root
}

// reachable reports whether the sandbox resolves the attribute path spelled
// to the tool named name: it is the name, or no tool has that name and no
// other tool is spelled the same.
func reachable(name, spelled string, names []string) bool {
	if spelled == name {
		return true
	}
	if slices.Contains(names, spelled) {
		return false
	}
	for _, n := range names {
		if n != name && codecell.SameTool(n, spelled) {
			return false
		}
	}
	return codecell.SameTool(name, spelled)
}

// pyAttr is how a program writes a part of a tool's name as an attribute:
// - read as _, a keyword with _ after it, a leading digit with _ before it;
// "" for what it cannot write (a dunder name, which the tools object does
// not take as a tool).
func pyAttr(part string) string {
	a := strings.ReplaceAll(part, "-", "_")
	if !asciiIdent().MatchString(a) {
		if a != "" && a[0] >= '0' && a[0] <= '9' && asciiIdent().MatchString("_"+a) {
			return "_" + a
		}
		return ""
	}
	if pyKeywords()[a] {
		return a + "_"
	}
	if strings.HasPrefix(a, "__") && strings.HasSuffix(a, "__") {
		return ""
	}
	return a
}

// class writes the class of a namespace, its children's first.
func (w *pyWriter) class(n *pyNamespace) {
	for _, c := range n.children {
		if len(c.children) > 0 {
			w.class(c)
		}
	}
	hint := "Tools"
	if n.name != "" {
		hint = "Tools" + pascal(n.name)
	}
	n.class = w.reg.claim("_"+hint, "_"+hint+"_")
	w.out.WriteString("\nclass " + n.class + ":\n")
	doc := "The tools of " + n.path + ": await " + n.path + ".TOOL(...)."
	if n.name == "" {
		doc = "The tools object: await tools.SERVER.TOOL(...)."
	}
	if len(n.items) > 0 {
		doc += "\nThese are called by their whole names, as tools[\"NAME\"](...):"
		for _, it := range n.items {
			doc += "\n    " + jsonString(it)
		}
	}
	w.out.WriteString(docstring(doc, "    "))
	if n.tool != nil {
		w.method(*n.tool, "__call__", n.path)
	}
	for _, c := range n.children {
		if len(c.children) > 0 {
			w.out.WriteString("    " + c.attr + " = " + c.class + "()\n")
			continue
		}
		w.method(*c.tool, c.attr, c.path)
	}
}

// pyWriter writes Python declarations, each type before its first use.
type pyWriter struct {
	reg *registry
	out strings.Builder
	// state of a named type: 0 not written, 1 being written, 2 written.
	state   map[*named]int
	anon    map[*typ]string // objects without a name, named when written
	merged  map[*typ]*typ   // allOf read as one object
	imports map[string]bool
}

const (
	stateNone = iota
	stateWriting
	stateDone
)

func (w *pyWriter) emit(n *named) {
	if w.state[n] != stateNone {
		return
	}
	w.state[n] = stateWriting
	// A reference stays an alias (Params = Args) rather than a copy.
	if obj := w.asObject(n.t); n.t.kind != kRef && obj != nil && (len(obj.props) > 0 || obj.index == nil) {
		text := w.typedDict(n.name, obj, n.note, !n.params)
		w.out.WriteString("\n" + text)
	} else {
		expr, quoted := w.expr(n.t)
		if quoted {
			// A bare string would make the alias a str; Union of one
			// name makes it a forward reference that still takes |.
			w.imports["Union"] = true
			expr = "Union[" + expr + "]"
		}
		var b strings.Builder
		b.WriteString("\n")
		for _, l := range strings.Split(clean(n.note), "\n") {
			if l != "" {
				b.WriteString("# " + l + "\n")
			}
		}
		b.WriteString(n.name + " = " + expr + "\n")
		w.out.WriteString(b.String())
	}
	w.state[n] = stateDone
}

// typedDict renders an object as a TypedDict: the class syntax when every
// key can be a name in a class body, else the functional syntax, which
// keeps any key exactly.
func (w *pyWriter) typedDict(name string, t *typ, note string, comments bool) string {
	w.imports["TypedDict"] = true
	type field struct{ key, typ, note string }
	var fields []field
	classSyntax := true
	for _, p := range t.props {
		e, _ := w.expr(p.t)
		if p.required {
			w.imports["Required"] = true
			e = "Required[" + e + "]"
		}
		f := field{key: p.key, typ: e}
		if comments {
			f.note = oneLine(clean(p.note))
		}
		fields = append(fields, f)
		classSyntax = classSyntax && pyFieldOK(p.key)
	}
	var extra string
	if t.index != nil {
		e, _ := w.expr(t.index)
		extra = "# Other keys are allowed, with values of type " + e + "."
	}
	var b strings.Builder
	if classSyntax {
		b.WriteString("class " + name + "(TypedDict, total=False):\n")
		if note = clean(note); note != "" {
			b.WriteString(docstring(note, "    "))
		}
		for _, f := range fields {
			b.WriteString("    " + f.key + ": " + f.typ)
			if f.note != "" {
				b.WriteString("  # " + f.note)
			}
			b.WriteString("\n")
		}
		if extra != "" {
			b.WriteString("    " + extra + "\n")
		}
		if note == "" && len(fields) == 0 {
			b.WriteString("    pass\n")
		}
		return b.String()
	}
	for _, l := range strings.Split(clean(note), "\n") {
		if l != "" {
			b.WriteString("# " + l + "\n")
		}
	}
	b.WriteString(name + " = TypedDict(" + jsonString(name) + ", {\n")
	for _, f := range fields {
		b.WriteString("    " + jsonString(f.key) + ": " + f.typ + ",")
		if f.note != "" {
			b.WriteString("  # " + f.note)
		}
		b.WriteString("\n")
	}
	if extra != "" {
		b.WriteString("    " + extra + "\n")
	}
	b.WriteString("}, total=False)\n")
	return b.String()
}

// expr renders a type as a Python expression. quoted reports that the
// expression is a string: the name of a type being defined (a cycle),
// which works inside list[...] or Required[...] but not with |.
func (w *pyWriter) expr(t *typ) (s string, quoted bool) {
	switch t.kind {
	case kNull:
		return "None", false
	case kBool:
		return "bool", false
	case kInt:
		return "int", false
	case kNumber:
		return "float", false
	case kString:
		return "str", false
	case kLiteral:
		var lits, parts []string
		for _, l := range t.lits {
			switch v := l.(type) {
			case nil:
				parts = append(parts, "None")
			case bool:
				if v {
					lits = append(lits, "True")
				} else {
					lits = append(lits, "False")
				}
			case string:
				lits = append(lits, jsonString(v))
			default:
				if n := jsonLiteral(v); strings.ContainsAny(n, ".eE") {
					parts = append(parts, "float") // Literal takes no floats
				} else {
					lits = append(lits, n)
				}
			}
		}
		if len(lits) > 0 {
			w.imports["Literal"] = true
			parts = append([]string{"Literal[" + strings.Join(lits, ", ") + "]"}, parts...)
		}
		return w.join(parts, false), false
	case kArray:
		e, _ := w.expr(t.elem)
		return "list[" + e + "]", false
	case kTuple:
		// JSON arrays arrive as lists, so a tuple schema is a list whose
		// items are any of the tuple's types.
		ms := slices.Clone(t.items)
		if t.rest != nil {
			ms = append(ms, t.rest)
		}
		return "list[" + w.union(ms) + "]", false
	case kObject:
		if len(t.props) == 0 {
			if t.index == nil {
				return "dict[str, Any]", false
			}
			e, _ := w.expr(t.index)
			return "dict[str, " + e + "]", false
		}
		return w.anonName(t), false
	case kUnion:
		return w.union(t.members), false
	case kAllOf:
		if obj := w.asObject(t); obj != nil {
			return w.expr(obj)
		}
		return "Any", false
	case kRef:
		n := t.ref
		switch w.state[n] {
		case stateNone:
			w.emit(n)
		case stateWriting:
			return "'" + n.name + "'", true
		}
		return n.name, false
	}
	return "Any", false
}

func (w *pyWriter) union(ms []*typ) string {
	var parts []string
	quoted := false
	for _, m := range ms {
		e, q := w.expr(m)
		parts = append(parts, e)
		quoted = quoted || q
	}
	return w.join(parts, quoted)
}

// join joins alternatives: each once, Any swallowing the rest, None last.
// With a quoted name among them it must use Union (or Optional), as a
// string has no |.
func (w *pyWriter) join(parts []string, quoted bool) string {
	var out []string
	none := false
	for _, p := range parts {
		switch {
		case p == "Any":
			return "Any"
		case p == "None":
			none = true
		case !slices.Contains(out, p):
			out = append(out, p)
		}
	}
	switch {
	case len(out) == 0 && none:
		return "None"
	case len(out) == 0:
		return "Any"
	case !quoted:
		if none {
			out = append(out, "None")
		}
		return strings.Join(out, " | ")
	case none && len(out) == 1:
		w.imports["Optional"] = true
		return "Optional[" + out[0] + "]"
	}
	if none {
		out = append(out, "None")
	}
	w.imports["Union"] = true
	return "Union[" + strings.Join(out, ", ") + "]"
}

// anonName declares an object that has no name of its own as a TypedDict
// named after where it is (its parent and key), and returns that name.
func (w *pyWriter) anonName(t *typ) string {
	if name, ok := w.anon[t]; ok {
		return name
	}
	hint := t.hint
	if hint == "" {
		hint = "Object"
	}
	name := w.reg.claim(hint)
	w.anon[t] = name
	text := w.typedDict(name, t, "", true)
	w.out.WriteString("\n" + text)
	return name
}

// asObject returns t as one object: t itself, the object a reference names,
// or the keys of every part of an allOf merged (a Python TypedDict has no
// intersection). It returns nil when t is not made of objects alone.
func (w *pyWriter) asObject(t *typ) *typ {
	return w.objectOf(t, map[*named]bool{})
}

func (w *pyWriter) objectOf(t *typ, seen map[*named]bool) *typ {
	switch t.kind {
	case kObject:
		return t
	case kRef:
		if seen[t.ref] || t.ref.t == nil {
			return nil
		}
		seen[t.ref] = true
		return w.objectOf(t.ref.t, seen)
	case kAllOf:
		if m, ok := w.merged[t]; ok {
			return m
		}
		merged := &typ{kind: kObject, hint: t.hint}
		for _, m := range t.members {
			o := w.objectOf(m, seen)
			if o == nil {
				return nil
			}
			if merged.hint == "" {
				merged.hint = o.hint
			}
			for _, p := range o.props {
				i := slices.IndexFunc(merged.props, func(q *prop) bool { return q.key == p.key })
				if i < 0 {
					cp := *p
					merged.props = append(merged.props, &cp)
				} else if p.required {
					merged.props[i].required = true
				}
			}
		}
		w.merged[t] = merged
		return merged
	}
	return nil
}

// method writes a tool's method, called as path(...).
func (w *pyWriter) method(d toolDoc, attr, path string) {
	ret := "Any"
	retDoc := "Returns: Any: the tool's result decoded from JSON; its shape is not declared (it is often a str)."
	if d.result != nil {
		ret = d.result.name
		retDoc = "Returns: " + ret + "."
	}
	var doc strings.Builder
	if desc := clean(d.tool.Description); desc != "" {
		doc.WriteString(desc + "\n\n")
	}
	var required []string
	keywords := true
	kwargs := "Any"
	obj := w.asObject(d.params.t)
	switch {
	case obj == nil:
		e, _ := w.expr(d.params.t)
		doc.WriteString("Params: " + e + ".\n")
	case len(obj.props) == 0 && obj.index == nil:
		doc.WriteString("Params: none.\n")
	case len(obj.props) == 0:
		e, _ := w.expr(obj.index)
		kwargs = e
		doc.WriteString("Params: any keys, with values of type " + e + ".\n")
	default:
		if w.isTypedDict(d.params) {
			w.imports["Unpack"] = true
			kwargs = "Unpack[" + d.params.name + "]"
		}
		doc.WriteString("Params:\n")
		for _, p := range obj.props {
			e, _ := w.expr(p.t)
			line := "    " + jsonKeyForDoc(p.key) + " (" + e
			if p.required {
				line += ", required"
				required = append(required, p.key)
				keywords = keywords && pyFieldOK(p.key)
			}
			line += ")"
			if note := oneLine(clean(p.note)); note != "" {
				line += ": " + note
			}
			doc.WriteString(line + "\n")
		}
		if obj.index != nil {
			e, _ := w.expr(obj.index)
			doc.WriteString("    (other keys: " + e + ")\n")
		}
	}
	doc.WriteString(retDoc + "\n")
	var args []string
	for _, k := range required {
		if keywords {
			args = append(args, k+"=...")
		} else {
			args = append(args, jsonString(k)+": ...")
		}
	}
	call := "await " + path + "(" + strings.Join(args, ", ") + ")"
	if !keywords {
		call = "await " + path + "({" + strings.Join(args, ", ") + "})"
	}
	doc.WriteString("Call: " + call)

	w.out.WriteString("    async def " + attr + "(self, **params: " + kwargs + ") -> " + ret + ":\n")
	w.out.WriteString(docstring(doc.String(), "        "))
	w.out.WriteString("        return await call_tool(" + jsonString(d.tool.Name) + ", params)\n")
}

// isTypedDict reports whether a params type is written as a TypedDict (or
// an alias of one), which Unpack takes.
func (w *pyWriter) isTypedDict(n *named) bool {
	for seen := map[*named]bool{}; !seen[n]; {
		seen[n] = true
		if n.t.kind != kRef {
			obj := w.asObject(n.t)
			return obj != nil && (len(obj.props) > 0 || obj.index == nil)
		}
		n = n.t.ref
	}
	return false
}

// jsonKeyForDoc names a key in a docstring: as it is when it is a plain
// name, else quoted.
func jsonKeyForDoc(k string) string {
	if asciiIdent().MatchString(k) {
		return k
	}
	return jsonString(k)
}

// docstring renders text as a docstring at indent: backslashes and triple
// quotes escaped, so that the string's value is the text.
func docstring(text, indent string) string {
	text = strings.ReplaceAll(text, `\`, `\\`)
	text = strings.ReplaceAll(text, `"""`, `\"\"\"`)
	lines := strings.Split(text, "\n")
	if len(lines) == 1 {
		if strings.HasSuffix(text, `"`) {
			text = text[:len(text)-1] + `\"`
		}
		return indent + `"""` + text + `"""` + "\n"
	}
	var b strings.Builder
	b.WriteString(indent + `"""`)
	for i, l := range lines {
		if i > 0 && l != "" {
			b.WriteString(indent)
		}
		b.WriteString(l + "\n")
	}
	b.WriteString(indent + `"""` + "\n")
	return b.String()
}
