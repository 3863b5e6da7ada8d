package codecell

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/codecell-dev/codecell/internal/lazyre"

	"github.com/google/jsonschema-go/jsonschema"
)

// Tool is something a sandboxed program may call: a Go function of the
// host's, or a tool of an upstream MCP server. Programs call it by Name
// (Python: await call_tool(name, params); JavaScript: await
// callTool(name, params) or tools.<name>(params); shell: codecell-tool NAME
// JSON).
type Tool struct {
	// Name is letters, digits, '_', '-' and '.', such as "search"; an
	// upstream MCP server's tools are named "server.tool".
	Name        string
	Description string
	// InputSchema is the JSON Schema of the params; nil means any object.
	InputSchema json.RawMessage
	// OutputSchema, when known, is the JSON Schema of the result.
	OutputSchema json.RawMessage
	// Call runs the tool with the params the program passed and returns the
	// result, both JSON. An error that is an *Envelope reaches the program
	// as it is; any other error becomes an envelope of kind tool.
	Call func(ctx context.Context, params json.RawMessage) (json.RawMessage, error)
}

// A ToolSource provides tools it learns at run time, such as an upstream
// MCP server. Its tools are named Name() + "." + the tool's own name.
type ToolSource interface {
	// Name is the source's name: letters, digits, '_' and '-'.
	Name() string
	// Tools lists the source's tools, connecting to it if it must. Each
	// Tool's Name is the source's own name for it, without the prefix.
	Tools(ctx context.Context) ([]Tool, error)
}

// A StartingSource is a ToolSource that can start ahead of its first use,
// in the background, and says how far it got: an upstream MCP server,
// which may take seconds to start or never answer. Tools still waits for
// the start (bounded by its context); Status never waits.
type StartingSource interface {
	ToolSource
	// Start begins starting the source, if it is not started or starting,
	// and returns at once.
	Start()
	// Status says how far the source got.
	Status() SourceStatus
	// Watch calls f after each change of the source's state or of its
	// tools, until stop is called. f must not block.
	Watch(f func()) (stop func())
}

// SourceState is how far a StartingSource got.
type SourceState string

// The states of a StartingSource.
const (
	SourceIdle     SourceState = "idle"     // not started: it starts on first use
	SourceStarting SourceState = "starting" // starting, since Status.Since
	SourceReady    SourceState = "ready"    // its tools are listed
	SourceFailed   SourceState = "failed"   // it did not start, or stopped: Status.Err says why; it starts again on next use
	SourceClosed   SourceState = "closed"   // closed: it never starts again
)

// SourceStatus is the state of a tool source.
type SourceStatus struct {
	Name  string      `json:"name"`
	State SourceState `json:"state"`
	// Err is why it failed, for SourceFailed.
	Err error `json:"-"`
	// Since is when it entered the state.
	Since time.Time `json:"since,omitzero"`
}

// String says the status in words, as a model or a person reads it.
func (s SourceStatus) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", s.Name, s.State)
	if s.State == SourceStarting && !s.Since.IsZero() {
		fmt.Fprintf(&b, " (for %s)", time.Since(s.Since).Round(time.Second))
	}
	if s.Err != nil {
		fmt.Fprintf(&b, ": %v", s.Err)
	}
	return b.String()
}

var toolName = lazyre.New(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
var sourceName = lazyre.New(`^[A-Za-z0-9_][A-Za-z0-9_-]{0,63}$`)

// Toolbox holds the tools programs may call: Go functions added one by one,
// and sources whose tools are listed when asked for. The zero value is
// empty and ready. It is safe for concurrent use.
type Toolbox struct {
	mu      sync.RWMutex
	tools   map[string]Tool
	sources map[string]ToolSource
}

// Add adds a tool. A name that is not valid or already taken is an error.
func (b *Toolbox) Add(t Tool) error {
	if !toolName().MatchString(t.Name) {
		return fmt.Errorf("tool name %q: use letters, digits, '_', '-' and '.'", t.Name)
	}
	if t.Call == nil {
		return fmt.Errorf("tool %q has no Call", t.Name)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, dup := b.tools[t.Name]; dup {
		return fmt.Errorf("tool %q added twice", t.Name)
	}
	if b.tools == nil {
		b.tools = map[string]Tool{}
	}
	b.tools[t.Name] = t
	return nil
}

// AddSource adds a source of tools, such as an upstream MCP server.
func (b *Toolbox) AddSource(s ToolSource) error {
	if !sourceName().MatchString(s.Name()) {
		return fmt.Errorf("tool source name %q: use letters, digits, '_' and '-'", s.Name())
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, dup := b.sources[s.Name()]; dup {
		return fmt.Errorf("tool source %q added twice", s.Name())
	}
	if b.sources == nil {
		b.sources = map[string]ToolSource{}
	}
	b.sources[s.Name()] = s
	return nil
}

// List returns every tool, sorted by name, with the sources' tools under
// their prefixed names. The sources are asked at once, each waiting for
// its own start: a slow one costs its own time, not the sum. A source that
// cannot list its tools is left out and named in the errors, one per
// failing source, in name order.
func (b *Toolbox) List(ctx context.Context) ([]Tool, []error) {
	if b == nil {
		return nil, nil
	}
	out, sources := b.snapshot()
	lists := make([][]Tool, len(sources))
	errs := make([]error, len(sources))
	var wg sync.WaitGroup
	for i, s := range sources {
		wg.Go(func() {
			tools, err := s.Tools(ctx)
			if err != nil {
				errs[i] = fmt.Errorf("tool source %s: %w", s.Name(), err)
				return
			}
			lists[i] = prefixed(s.Name(), tools)
		})
	}
	wg.Wait()
	for _, l := range lists {
		out = append(out, l...)
	}
	sortTools(out)
	return out, slices.DeleteFunc(errs, func(err error) bool { return err == nil })
}

// Available returns, without waiting for any source to start, the tools
// that can be listed now: those added directly, and those of the sources
// that are ready. The statuses are those of the sources that are not
// ready (starting, failed, or not started), in name order. A source that
// does not start in the background (not a StartingSource) is listed as
// List lists it.
func (b *Toolbox) Available(ctx context.Context) ([]Tool, []SourceStatus) {
	if b == nil {
		return nil, nil
	}
	out, sources := b.snapshot()
	var waiting []SourceStatus
	for _, s := range sources {
		if ss, ok := s.(StartingSource); ok {
			if st := ss.Status(); st.State != SourceReady {
				st.Name = s.Name()
				waiting = append(waiting, st)
				continue
			}
		}
		tools, err := s.Tools(ctx)
		if err != nil {
			waiting = append(waiting, SourceStatus{Name: s.Name(), State: SourceFailed, Err: err})
			continue
		}
		out = append(out, prefixed(s.Name(), tools)...)
	}
	sortTools(out)
	return out, waiting
}

// Starting returns, without listing any tools, the statuses of the sources
// that are starting now, in name order: what a caller that waits for them
// checks.
func (b *Toolbox) Starting() []SourceStatus {
	if b == nil {
		return nil
	}
	_, sources := b.snapshot()
	var out []SourceStatus
	for _, s := range sources {
		if ss, ok := s.(StartingSource); ok {
			if st := ss.Status(); st.State == SourceStarting {
				st.Name = s.Name()
				out = append(out, st)
			}
		}
	}
	return out
}

// Start starts, in the background, every source that can start ahead of
// its first use (a StartingSource), and returns at once.
func (b *Toolbox) Start() {
	if b == nil {
		return
	}
	_, sources := b.snapshot()
	for _, s := range sources {
		if ss, ok := s.(StartingSource); ok {
			ss.Start()
		}
	}
}

// Watch calls f after a source changes state or changes its tools, until
// stop is called. f runs on the source's goroutine: it must not block.
func (b *Toolbox) Watch(f func()) (stop func()) {
	if b == nil {
		return func() {}
	}
	_, sources := b.snapshot()
	var stops []func()
	for _, s := range sources {
		if ss, ok := s.(StartingSource); ok {
			stops = append(stops, ss.Watch(f))
		}
	}
	return func() {
		for _, s := range stops {
			s()
		}
	}
}

// snapshot returns the tools added directly and the sources, sources in
// name order.
func (b *Toolbox) snapshot() ([]Tool, []ToolSource) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	out := make([]Tool, 0, len(b.tools))
	for _, t := range b.tools {
		out = append(out, t)
	}
	sources := make([]ToolSource, 0, len(b.sources))
	for _, s := range b.sources {
		sources = append(sources, s)
	}
	sort.Slice(sources, func(i, j int) bool { return sources[i].Name() < sources[j].Name() })
	return out, sources
}

func prefixed(source string, tools []Tool) []Tool {
	for i := range tools {
		tools[i].Name = source + "." + tools[i].Name
	}
	return tools
}

func sortTools(tools []Tool) {
	sort.Slice(tools, func(i, j int) bool { return tools[i].Name < tools[j].Name })
}

// Find returns the tool with this name: a tool added directly, or a tool of
// the source its prefix names. It reports false when there is none; the
// error says a source could not list its tools.
func (b *Toolbox) Find(ctx context.Context, name string) (Tool, bool, error) {
	if b == nil {
		return Tool{}, false, nil
	}
	b.mu.RLock()
	t, ok := b.tools[name]
	var src ToolSource
	rest := ""
	if !ok {
		var prefix string
		var dotted bool
		if prefix, rest, dotted = strings.Cut(name, "."); dotted {
			src = b.sources[prefix]
		}
	}
	b.mu.RUnlock()
	if ok || src == nil {
		return t, ok, nil
	}
	tools, err := src.Tools(ctx)
	if err != nil {
		return Tool{}, false, fmt.Errorf("tool source %s cannot list its tools: %w", src.Name(), err)
	}
	for _, t := range tools {
		if t.Name == rest {
			t.Name = name
			return t, true, nil
		}
	}
	return Tool{}, false, nil
}

// Spelled returns the names of the tools that name spells with the
// liberties an attribute needs (see SameTool), or nil when no tool does.
// Only the source whose name the first part spells is asked for its tools.
func (b *Toolbox) Spelled(ctx context.Context, name string) []string {
	if b == nil {
		return nil
	}
	var out []string
	b.mu.RLock()
	for n := range b.tools {
		if SameTool(n, name) {
			out = append(out, n)
		}
	}
	var srcs []ToolSource
	first, _, _ := strings.Cut(name, ".")
	for n, s := range b.sources {
		if SameTool(n, first) {
			srcs = append(srcs, s)
		}
	}
	b.mu.RUnlock()
	for _, s := range srcs {
		tools, err := s.Tools(ctx)
		if err != nil {
			continue
		}
		for _, t := range tools {
			if full := s.Name() + "." + t.Name; SameTool(full, name) {
				out = append(out, full)
			}
		}
	}
	sort.Strings(out)
	return out
}

// SameTool reports whether name, written as a program's attribute, spells
// the tool named tool: the same dot-separated parts, each the same once '-'
// is read as '_' and the '_' at its ends are dropped. tools.everything.get_sum
// spells "everything.get-sum", tools.x.class_ spells "x.class", and
// tools.x._2fa spells "x.2fa": names Python and JavaScript cannot write as
// attributes.
func SameTool(tool, name string) bool {
	tp, np := strings.Split(tool, "."), strings.Split(name, ".")
	if len(tp) != len(np) {
		return false
	}
	for i := range tp {
		if spelling(tp[i]) != spelling(np[i]) {
			return false
		}
	}
	return true
}

func spelling(part string) string {
	return strings.Trim(strings.ReplaceAll(part, "-", "_"), "_")
}

// Suggest returns the name closest to want by edit distance, if it is close
// enough to be a likely typo, else "".
func Suggest(want string, names []string) string { return nearest(want, names) }

// nearest returns the name closest to want by edit distance, if it is close
// enough to be a likely typo: at most a third of the name's letters wrong
// (one for short names).
func nearest(want string, names []string) string {
	want = strings.ToLower(want)
	best, bestScore := "", -1
	for _, n := range names {
		// Compare with the tool's own part too: "search" for "github.search",
		// ranked after an equally close full name.
		full := strings.ToLower(n)
		cands := []string{full}
		if i := strings.LastIndexByte(full, '.'); i >= 0 {
			cands = append(cands, full[i+1:])
		}
		for k, c := range cands {
			d := editDistance(want, c)
			if d > max(1, max(len(want), len(c))/3) {
				continue
			}
			if score := 2*d + k; bestScore < 0 || score < bestScore {
				best, bestScore = n, score
			}
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// ToolPolicy says which tools a program may call. Patterns are names, or
// globs where '*' matches any run of characters ("github.*").
type ToolPolicy struct {
	// Allow, when not empty, is the only tools that may be called.
	Allow []string `json:"allow,omitempty"`
	// Deny are tools that may not be called, whatever Allow says.
	Deny []string `json:"deny,omitempty"`
	// Rules decide calls by their arguments (see ToolRule).
	Rules []ToolRule `json:"rules,omitempty"`
	// Rates bound how many times tools may be called (see ToolRate).
	Rates []ToolRate `json:"rates,omitempty"`
}

// Permits reports whether the policy lets a program call name, with some
// arguments at least: a tool whose first rule refuses it whatever its
// arguments is refused.
func (p ToolPolicy) Permits(name string) bool {
	for _, r := range p.Rules {
		if globMatch(r.Tool, name) {
			if len(r.Args) == 0 && r.Action == "deny" {
				return false
			}
			break
		}
	}
	for _, pat := range p.Deny {
		if globMatch(pat, name) {
			return false
		}
	}
	if len(p.Allow) == 0 {
		return true
	}
	for _, pat := range p.Allow {
		if globMatch(pat, name) {
			return true
		}
	}
	return false
}

func globMatch(pattern, name string) bool {
	// path.Match's '*' stops at '/', which tool names never hold.
	ok, err := path.Match(pattern, name)
	return err == nil && ok
}

// Func makes a Tool of a Go function. The input and output schemas are
// inferred from In and Out (their json tags, and jsonschema tags for
// descriptions), and the program's params are decoded into In.
func Func[In, Out any](name, description string, fn func(ctx context.Context, in In) (Out, error)) (Tool, error) {
	in, err := jsonschema.For[In](nil)
	if err != nil {
		return Tool{}, fmt.Errorf("tool %s: input schema: %w", name, err)
	}
	out, err := jsonschema.For[Out](nil)
	if err != nil {
		return Tool{}, fmt.Errorf("tool %s: output schema: %w", name, err)
	}
	resolved, err := in.Resolve(nil)
	if err != nil {
		return Tool{}, fmt.Errorf("tool %s: input schema: %w", name, err)
	}
	inJSON, _ := json.Marshal(in)
	outJSON, _ := json.Marshal(out)
	return Tool{
		Name:         name,
		Description:  description,
		InputSchema:  inJSON,
		OutputSchema: outJSON,
		Call: func(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
			var v any
			if len(params) == 0 || string(params) == "null" {
				params = json.RawMessage("{}")
			}
			if err := json.Unmarshal(params, &v); err != nil {
				return nil, Errorf(KindValidation, CodeToolBadParams, "the params of %s are not JSON: %v", name, err)
			}
			if err := resolved.Validate(v); err != nil {
				return nil, Errorf(KindValidation, CodeToolBadParams, "the params of %s do not match its schema: %v", name, err).WithHints(
					"see the tool's input schema with `codecell tools`")
			}
			var arg In
			if err := json.Unmarshal(params, &arg); err != nil {
				return nil, Errorf(KindValidation, CodeToolBadParams, "the params of %s: %v", name, err)
			}
			res, err := fn(ctx, arg)
			if err != nil {
				return nil, err
			}
			return json.Marshal(res)
		},
	}, nil
}
