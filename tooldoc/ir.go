package tooldoc

import (
	"encoding/json"
	"slices"
	"sort"
	"strings"

	"github.com/codecell-dev/codecell"
)

// The schemas are first read into a small type language that both
// languages' output is written from, so that TypeScript and Python agree on
// what each tool takes and returns.

type kind uint8

const (
	kUnknown kind = iota // anything: TypeScript unknown, Python Any
	kNever               // the false schema: nothing is valid
	kNull
	kBool
	kInt
	kNumber
	kString
	kLiteral // one of lits: strings, json.Numbers, bools and nil
	kArray   // elem[]
	kTuple   // items, then any number of rest (none when rest is nil)
	kObject  // props, and index for the other keys (none when index is nil)
	kUnion   // any of members
	kAllOf   // all of members
	kRef     // ref, a named type
)

type typ struct {
	kind    kind
	lits    []any
	elem    *typ
	items   []*typ
	rest    *typ
	props   []*prop
	index   *typ
	members []*typ
	ref     *named
	// hint is a name for an object that Python must name to declare it.
	hint string
}

type prop struct {
	key      string
	t        *typ
	required bool
	note     string // what the schema says of it: description, format, default
}

// named is a type declared once and referred to by name: a tool's params or
// result, or a definition ($defs, definitions) of a schema.
type named struct {
	name string
	t    *typ
	note string
	// params is set on a tool's params type, whose keys the Python stub's
	// docstring lists.
	params bool
}

var (
	unknownT = &typ{kind: kUnknown}
	neverT   = &typ{kind: kNever}
	nullT    = &typ{kind: kNull}
)

// toolDoc is one tool with its params type and, when it declares one, its
// result type.
type toolDoc struct {
	tool   codecell.Tool
	params *named
	result *named
}

// builder reads the schemas of a set of tools into named types.
type builder struct {
	reg *registry
	// byKey shares a definition between tools when its schema and
	// everything it refers to are the same ($defs repeated by each tool of
	// one server).
	byKey map[string]*named
	// all is every named type, in the order they were made.
	all []*named
}

// document is one schema: a tool's input or output schema, where "#"
// references resolve.
type document struct {
	id       string
	root     any
	tool     string
	self     *named // what "#" refers to; nil leaves such references unknown
	byPtr    map[string]*named
	inlining map[string]bool // pointers being read inline, to stop at a cycle
	// read holds the schemas read so far, so that a schema a pointer
	// reuses ("#/properties/hits/items") is one type, not a copy.
	read map[*object]*typ
	// depth is how deep in schemas (and definitions they refer to) the
	// reading is, and compared how many bytes of schemas closureKey may
	// still compare.
	depth    int
	compared int
}

func newBuilder() *builder {
	return &builder{reg: newRegistry(typeReserved()), byKey: map[string]*named{}}
}

// sortedTools returns the tools sorted by name, a repeated name kept once.
func sortedTools(tools []codecell.Tool) []codecell.Tool {
	out := slices.Clone(tools)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return slices.CompactFunc(out, func(a, b codecell.Tool) bool { return a.Name == b.Name })
}

// buildAll reads every tool's schemas, in name order.
func buildAll(tools []codecell.Tool) (*builder, []toolDoc) {
	b := newBuilder()
	var docs []toolDoc
	for _, t := range sortedTools(tools) {
		docs = append(docs, b.tool(t, true))
	}
	return b, docs
}

func toolBase(name string) string {
	if p := pascal(name); p != "" {
		return p
	}
	return "Tool"
}

// tool reads one tool. selfRefs says whether "#" references name the root
// type (for declarations) or are left unknown (for a one-line signature,
// which has no name to give them).
func (b *builder) tool(t codecell.Tool, selfRefs bool) toolDoc {
	base := toolBase(t.Name)
	td := toolDoc{tool: t}
	td.params = b.root(t.Name, "in", t.InputSchema, base+"Params", base, selfRefs)
	td.params.params = true
	td.params.note = ""
	if td.params.t.kind == kUnknown {
		// Params are always an object: MCP says so, and so does the bridge.
		td.params.t = &typ{kind: kObject, index: unknownT, hint: base}
	}
	if hasSchema(t.OutputSchema) {
		td.result = b.root(t.Name, "out", t.OutputSchema, base+"Result", base+"Result", selfRefs)
		if td.result.t.kind == kUnknown {
			// Saying nothing is the same as having no output schema.
			b.all = slices.DeleteFunc(b.all, func(n *named) bool { return n == td.result })
			delete(b.reg.used, td.result.name)
			td.result = nil
		}
	}
	return td
}

func hasSchema(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s != "" && s != "null"
}

func (b *builder) root(tool, id string, raw json.RawMessage, name, hint string, selfRefs bool) *named {
	d := &document{id: tool + "\x00" + id, root: parse(raw), tool: tool, byPtr: map[string]*named{}, inlining: map[string]bool{}, read: map[*object]*typ{}}
	n := &named{name: b.reg.claim(name)}
	if selfRefs {
		d.self = n
	}
	b.all = append(b.all, n)
	if o, ok := d.root.(*object); ok {
		n.note = o.str("description")
	}
	n.t = bounded(settle(n, b.typeOf(d, d.root, hint)))
	return n
}

// typeOf reads one schema.
func (b *builder) typeOf(d *document, s any, hint string) *typ {
	switch v := s.(type) {
	case bool:
		if v {
			return unknownT
		}
		return neverT
	case *object:
		if t, ok := d.read[v]; ok {
			return t
		}
		if d.depth >= maxReadDepth {
			return unknownT
		}
		d.depth++
		t := b.objectSchema(d, v, hint)
		d.depth--
		if v.vals["nullable"] == true { // OpenAPI 3.0's way to say "or null"
			t = unionOf(t, nullT)
		}
		d.read[v] = t
		return t
	}
	return unknownT
}

func (b *builder) objectSchema(d *document, o *object, hint string) *typ {
	if ref, ok := o.vals["$ref"].(string); ok {
		return b.ref(d, ref, hint)
	}
	if c, ok := o.get("const"); ok {
		return literals([]any{c})
	}
	if e, ok := o.arr("enum"); ok {
		return literals(e)
	}
	var parts []*typ
	if base := b.base(d, o, hint); base != nil {
		parts = append(parts, base)
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if alts, ok := o.arr(k); ok && len(alts) > 0 {
			var ms []*typ
			for _, a := range alts {
				ms = append(ms, b.typeOf(d, a, hint))
			}
			parts = append(parts, unionOf(ms...))
		}
	}
	if all, ok := o.arr("allOf"); ok {
		for _, a := range all {
			parts = append(parts, b.typeOf(d, a, hint))
		}
	}
	t := intersectOf(parts...)
	if t.kind == kAllOf {
		t.hint = hint // the name of its merged object in Python
	}
	return t
}

// base reads "type" and the keywords that go with it, or infers the type
// from those keywords when "type" is missing. It returns nil when the
// schema says nothing of the type.
func (b *builder) base(d *document, o *object, hint string) *typ {
	var types []string
	switch v := o.vals["type"].(type) {
	case string:
		types = []string{v}
	case []any:
		for _, x := range v {
			if s, ok := x.(string); ok {
				types = append(types, s)
			}
		}
	default:
		for _, k := range []string{"properties", "additionalProperties", "patternProperties"} {
			if _, ok := o.get(k); ok {
				types = []string{"object"}
			}
		}
		for _, k := range []string{"items", "prefixItems"} {
			if _, ok := o.get(k); ok {
				types = []string{"array"}
			}
		}
		if types == nil {
			return nil
		}
	}
	var ms []*typ
	for _, ty := range types {
		switch ty {
		case "string":
			ms = append(ms, &typ{kind: kString})
		case "integer":
			ms = append(ms, &typ{kind: kInt})
		case "number":
			ms = append(ms, &typ{kind: kNumber})
		case "boolean":
			ms = append(ms, &typ{kind: kBool})
		case "null":
			ms = append(ms, nullT)
		case "array":
			ms = append(ms, b.array(d, o, hint))
		case "object":
			ms = append(ms, b.object(d, o, hint))
		default:
			ms = append(ms, unknownT)
		}
	}
	return unionOf(ms...)
}

func (b *builder) array(d *document, o *object, hint string) *typ {
	items, hasItems := o.get("items")
	prefix, isTuple := o.arr("prefixItems") // 2020-12
	rest, hasRest := items, hasItems
	if list, ok := items.([]any); ok { // draft-07: items as a list is a tuple
		prefix, isTuple = list, true
		rest, hasRest = o.get("additionalItems")
	}
	if !isTuple {
		if !hasItems {
			return &typ{kind: kArray, elem: unknownT}
		}
		return &typ{kind: kArray, elem: b.typeOf(d, items, nest(hint, "Item"))}
	}
	t := &typ{kind: kTuple}
	for _, p := range prefix {
		t.items = append(t.items, b.typeOf(d, p, nest(hint, "Item")))
	}
	switch {
	case !hasRest:
		t.rest = unknownT
	case rest != false:
		t.rest = b.typeOf(d, rest, nest(hint, "Item"))
		if t.rest.kind == kNever {
			t.rest = nil
		}
	}
	return t
}

func (b *builder) object(d *document, o *object, hint string) *typ {
	t := &typ{kind: kObject, hint: hint}
	required := map[string]bool{}
	if req, ok := o.arr("required"); ok {
		for _, r := range req {
			if s, ok := r.(string); ok {
				required[s] = true
			}
		}
	}
	if props := o.obj("properties"); props != nil {
		for _, k := range props.keys {
			ps := props.vals[k]
			if ps == false {
				continue // the key is forbidden: leave it out
			}
			t.props = append(t.props, &prop{
				key:      k,
				t:        b.typeOf(d, ps, nest(hint, pascal(k))),
				required: required[k],
				note:     noteOf(ps),
			})
		}
	}
	var index []*typ
	if pp := o.obj("patternProperties"); pp != nil {
		for _, k := range pp.keys {
			index = append(index, b.typeOf(d, pp.vals[k], nest(hint, "Value")))
		}
	}
	switch ap, has := o.get("additionalProperties"); {
	case !has || ap == true:
		if len(t.props) == 0 && len(index) == 0 {
			index = append(index, unknownT)
		}
	case ap == false:
	default:
		index = append(index, b.typeOf(d, ap, nest(hint, "Value")))
	}
	if len(index) > 0 {
		t.index = unionOf(index...)
		if t.index.kind == kNever {
			t.index = nil
		}
	}
	return t
}

// ref reads a reference. A definition becomes a named type; any other
// pointer into the document is read in place; a reference to another
// document is unknown, as tooldoc fetches nothing.
func (b *builder) ref(d *document, ref, hint string) *typ {
	ptr, ok := localPointer(ref)
	if !ok {
		return unknownT
	}
	if ptr == "" {
		if d.self == nil {
			return unknownT
		}
		return &typ{kind: kRef, ref: d.self}
	}
	target, ok := resolve(d.root, ptr)
	if !ok {
		return unknownT
	}
	def := defName(ptr)
	if def == "" {
		if d.inlining[ptr] {
			return unknownT // a cycle through pointers that are not definitions
		}
		d.inlining[ptr] = true
		defer delete(d.inlining, ptr)
		return b.typeOf(d, target, hint)
	}
	if n, ok := d.byPtr[ptr]; ok {
		return &typ{kind: kRef, ref: n}
	}
	key, ownRoot := closureKey(d, ptr)
	if ownRoot {
		key = d.id + "\x00" + key
	}
	if n, ok := b.byKey[key]; ok {
		d.byPtr[ptr] = n
		return &typ{kind: kRef, ref: n}
	}
	name := pascal(def)
	if name == "" {
		name = "Def"
	}
	n := &named{name: b.reg.claim(name, toolBase(d.tool)+name)}
	d.byPtr[ptr] = n
	b.byKey[key] = n
	b.all = append(b.all, n)
	if o, ok := target.(*object); ok {
		n.note = o.str("description")
	}
	n.t = bounded(settle(n, b.typeOf(d, target, n.name)))
	return &typ{kind: kRef, ref: n}
}

// closureKey identifies a definition by its schema and the schemas of all
// it refers to, so that two tools share a definition only when it means
// the same in both. ownRoot reports a reference to the document's root,
// which is the tool's own type and so never shared.
func closureKey(d *document, ptr string) (key string, ownRoot bool) {
	seen := map[string]bool{}
	var parts []string
	var visit func(p string)
	size, limit := 0, min(maxClosure, maxCompared-d.compared)
	defer func() { d.compared += size }()
	visit = func(p string) {
		if seen[p] || size > limit {
			return
		}
		seen[p] = true
		v, ok := resolve(d.root, p)
		if !ok {
			return
		}
		part := jsonString(p) + ":" + canonical(v)
		size += len(part)
		parts = append(parts, part)
		refsIn(v, func(ref string) {
			if lp, ok := localPointer(ref); ok {
				visit(lp)
			}
		})
	}
	visit(ptr)
	if size > limit {
		// Too much to compare: the definition is this document's own.
		return ptr, true
	}
	sort.Strings(parts[1:])
	return strings.Join(parts, "\n"), seen[""]
}

// settle keeps a named type from being defined as itself (A = A, or
// A = A | string), which neither language accepts and which says nothing.
func settle(n *named, t *typ) *typ {
	if leadsTo(t, n) {
		return unknownT
	}
	if t.kind == kUnion || t.kind == kAllOf {
		ms := slices.DeleteFunc(slices.Clone(t.members), func(m *typ) bool { return leadsTo(m, n) })
		if len(ms) != len(t.members) {
			if t.kind == kUnion {
				return unionOf(ms...)
			}
			return intersectOf(ms...)
		}
	}
	return t
}

// leadsTo reports whether t is n, through references alone.
func leadsTo(t *typ, n *named) bool {
	seen := map[*named]bool{}
	for t != nil && t.kind == kRef {
		if t.ref == n {
			return true
		}
		if seen[t.ref] {
			return false
		}
		seen[t.ref] = true
		t = t.ref.t
	}
	return false
}

// literals is the type of an enum or a const. A value that is an object or
// an array makes the whole type unknown: neither language has a literal
// type for it.
func literals(vals []any) *typ {
	if len(vals) == 0 {
		return neverT
	}
	var lits []any
	seen := map[any]bool{}
	for _, v := range vals {
		switch v.(type) {
		case nil, bool, json.Number, string:
		default:
			return unknownT
		}
		if !seen[v] {
			seen[v] = true
			lits = append(lits, v)
		}
	}
	if len(lits) > maxLiterals {
		// Too many to list: their types say what to pass.
		var kinds []*typ
		var has [4]bool
		for _, l := range lits {
			var i int
			var t *typ
			switch l.(type) {
			case nil:
				i, t = 0, nullT
			case bool:
				i, t = 1, &typ{kind: kBool}
			case json.Number:
				i, t = 2, &typ{kind: kNumber}
			default:
				i, t = 3, &typ{kind: kString}
			}
			if !has[i] {
				has[i] = true
				kinds = append(kinds, t)
			}
		}
		return unionOf(kinds...)
	}
	return &typ{kind: kLiteral, lits: lits}
}

// The bounds on what one schema may make: a schema past them (an enum of
// every value, a nesting thousands deep, references that multiply) reads
// as its type, or as unknown, rather than costing the host its time and
// the model its context.
const (
	maxLiterals  = 200       // values of an enum written out
	maxNodes     = 5000      // nodes of one named type, counted as written out
	maxDepth     = 32        // nesting of one named type
	maxHint      = 64        // bytes of a name made from a path of keys
	maxClosure   = 256 << 10 // bytes of schemas compared to share one definition
	maxCompared  = 1 << 20   // bytes of schemas compared for one document's definitions
	maxReadDepth = 128       // schemas within schemas read, through definitions
)

// nest is the name hint of a part of the type hint names.
func nest(hint, part string) string {
	if len(hint)+len(part) > maxHint {
		return hint
	}
	return hint + part
}

// bounded returns t, or unknown when t written out would be larger or
// deeper than a type may be: a type is a graph (a schema a pointer reuses
// is one node), and writing it out repeats what is shared.
func bounded(t *typ) *typ {
	type measure struct{ nodes, depth int }
	memo := map[*typ]measure{}
	var walk func(t *typ) measure
	walk = func(t *typ) measure {
		if t == nil || t.kind == kRef {
			return measure{1, 0}
		}
		if m, ok := memo[t]; ok {
			return m
		}
		// Marked as over the bounds while it is walked: a cycle that does
		// not pass through a name cannot be written out.
		memo[t] = measure{maxNodes + 1, maxDepth + 1}
		m := measure{1, 0}
		add := func(c *typ) {
			if m.nodes > maxNodes || m.depth > maxDepth {
				return
			}
			cm := walk(c)
			m.nodes = min(m.nodes+cm.nodes, maxNodes+1)
			m.depth = max(m.depth, cm.depth+1)
		}
		add(t.elem)
		add(t.rest)
		add(t.index)
		for _, c := range t.items {
			add(c)
		}
		for _, p := range t.props {
			add(p.t)
		}
		for _, c := range t.members {
			add(c)
		}
		memo[t] = m
		return m
	}
	if m := walk(t); m.nodes > maxNodes || m.depth > maxDepth {
		return unknownT
	}
	return t
}

func unionOf(ts ...*typ) *typ {
	var ms []*typ
	// A member once: a schema reused by pointer in two alternatives is
	// one type, and unions of it would otherwise double at each level.
	seen := map[*typ]bool{}
	keep := func(t *typ) {
		if !seen[t] {
			seen[t] = true
			ms = append(ms, t)
		}
	}
	for _, t := range ts {
		switch t.kind {
		case kUnknown:
			return unknownT
		case kNever:
		case kUnion:
			for _, m := range t.members {
				keep(m)
			}
		default:
			keep(t)
		}
	}
	switch len(ms) {
	case 0:
		return neverT
	case 1:
		return ms[0]
	}
	return &typ{kind: kUnion, members: ms}
}

func intersectOf(ts ...*typ) *typ {
	var ms []*typ
	for _, t := range ts {
		switch t.kind {
		case kUnknown:
		case kNever:
			return neverT
		case kAllOf:
			ms = append(ms, t.members...)
		default:
			ms = append(ms, t)
		}
	}
	switch len(ms) {
	case 0:
		return unknownT
	case 1:
		return ms[0]
	}
	return &typ{kind: kAllOf, members: ms}
}

// noteOf is what a schema says about a value that its type does not:
// description, format, default, deprecation. Pydantic puts the format of
// an optional value in the non-null branch of an anyOf, so that is read
// too.
func noteOf(s any) string {
	o, ok := s.(*object)
	if !ok {
		return ""
	}
	text := clean(o.str("description"))
	var extra []string
	if f := formatOf(o); f != "" {
		extra = append(extra, "Format: "+f+".")
	}
	if def, ok := o.get("default"); ok && def != nil {
		if js := canonical(def); len(js) <= 80 {
			extra = append(extra, "Default: "+js+".")
		}
	}
	if o.vals["deprecated"] == true {
		extra = append(extra, "Deprecated.")
	}
	if len(extra) == 0 {
		return text
	}
	if text != "" && !strings.ContainsAny(text[len(text)-1:], ".!?:") {
		text += "."
	}
	return strings.TrimSpace(text + " " + strings.Join(extra, " "))
}

func formatOf(o *object) string {
	if f := o.str("format"); f != "" {
		return f
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		alts, _ := o.arr(k)
		for _, a := range alts {
			if ao, ok := a.(*object); ok && ao.str("format") != "" {
				return ao.str("format")
			}
		}
	}
	return ""
}

// clean makes text safe and compact for a comment or docstring: one kind
// of line break, no other control characters, no trailing blanks, no runs
// of blank lines.
func clean(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\n':
			b.WriteRune(r)
		case r == '\r':
			b.WriteByte('\n')
		case r == '\t':
			b.WriteByte(' ')
		case r < 0x20 || r == 0x7f || r == 0x2028 || r == 0x2029 || r == 0xfeff:
		default:
			b.WriteRune(r)
		}
	}
	lines := strings.Split(b.String(), "\n")
	var out []string
	blank := false
	for _, l := range lines {
		l = strings.TrimRight(l, " ")
		if l == "" {
			if !blank && len(out) > 0 {
				out = append(out, "")
			}
			blank = true
			continue
		}
		blank = false
		out = append(out, l)
	}
	return strings.TrimSpace(strings.Join(out, "\n"))
}

// oneLine joins the lines of a note for a place that holds one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
