package bench

// codecell bench prompt and codecell bench codemode: what code mode costs
// and saves in a model's context, against the same upstream MCP servers
// used directly (MeasurePrompt, MeasureCodemode). Both drive real processes
// over stdio MCP: the upstream servers, and codecell mcp (the running
// binary, as a rule) configured with them.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/codecell-dev/codecell/internal/npm"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codecell-dev/codecell/api"
	"github.com/codecell-dev/codecell/mcp"
)

// EverythingVersion is the version of @modelcontextprotocol/server-everything
// the benchmarks install: exact, so that figures of two runs compare.
const EverythingVersion = "2026.8.31"

// Procs is how the benchmarks start processes: the codecell binary Exe
// (codecell mcp, and the synthetic server), with Env added to its
// environment, and server-everything's script under node.
type Procs struct {
	Exe string
	// Version is Exe's version, as the benchmarks' MCP client gives it.
	Version string
	// Codecell, when set, is the codecell binary whose mcp command is
	// measured, instead of Exe: another build, to compare.
	Codecell   string
	Env        map[string]string
	Everything string // dist/index.js of server-everything
	Node       string
	State      string // the state directory of codecell mcp
}

// NewProcs finds the running binary (codecell, of version), node and
// server-everything (given, or installed by npm into codecell's cache
// directory), and makes a state directory that done removes.
func NewProcs(ctx context.Context, everything, version string, progress io.Writer) (p *Procs, done func(), err error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, nil, fmt.Errorf("node is not installed (server-everything runs on it): %v", err)
	}
	if everything == "" {
		if everything, err = installEverything(ctx, progress); err != nil {
			return nil, nil, err
		}
	}
	if _, err := os.Stat(everything); err != nil {
		return nil, nil, fmt.Errorf("server-everything: %v", err)
	}
	state, err := os.MkdirTemp("", "codecell-bench-state-")
	if err != nil {
		return nil, nil, err
	}
	return &Procs{Exe: exe, Version: version, Everything: everything, Node: node, State: state}, func() { os.RemoveAll(state) }, nil
}

// installEverything returns the script of server-everything at
// EverythingVersion, which npm installs once into codecell's cache
// directory ($XDG_CACHE_HOME/codecell/npm): the one download the
// benchmarks need.
func installEverything(ctx context.Context, progress io.Writer) (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory for server-everything (%v): give its dist/index.js with --everything", err)
	}
	const pkg = "@modelcontextprotocol/server-everything"
	prefix := filepath.Join(cache, "codecell", "npm", "server-everything-"+EverythingVersion)
	script := filepath.Join(prefix, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	if npm.Version(prefix, pkg) == EverythingVersion {
		return script, nil
	}
	npmPath, err := exec.LookPath("npm")
	if err != nil {
		return "", fmt.Errorf("npm is not installed, to install %s@%s: install npm, or give its dist/index.js with --everything", pkg, EverythingVersion)
	}
	if err := os.MkdirAll(filepath.Dir(prefix), 0o755); err != nil {
		return "", err
	}
	// Installed beside its place and renamed into it, so that an
	// interrupted install leaves nothing that looks whole.
	tmp, err := os.MkdirTemp(filepath.Dir(prefix), "install-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	fmt.Fprintf(progress, "installing %s@%s into %s\n", pkg, EverythingVersion, prefix)
	cmd := exec.CommandContext(ctx, npmPath, "install", "--no-audit", "--no-fund", "--prefix", tmp, pkg+"@"+EverythingVersion)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("npm install %s@%s: %v\n%s", pkg, EverythingVersion, err, out)
	}
	if v := npm.Version(tmp, pkg); v != EverythingVersion {
		return "", fmt.Errorf("npm installed %s %q, not %s", pkg, v, EverythingVersion)
	}
	os.RemoveAll(prefix)
	if err := os.Rename(tmp, prefix); err != nil {
		return "", err
	}
	return script, nil
}

// EverythingServer is server-everything as an upstream of codecell.
func (p *Procs) EverythingServer() api.MCPServer {
	return api.MCPServer{Command: p.Node, Args: []string{p.Everything, "stdio"}}
}

// SyntheticServer is codecell bench mcp-synthetic serving n tools.
func (p *Procs) SyntheticServer(n int) api.MCPServer {
	return api.MCPServer{Command: p.Exe, Args: []string{"bench", "mcp-synthetic", "--tools", strconv.Itoa(n)}, Env: p.Env}
}

// connect starts an MCP server over stdio and connects the Go SDK's client
// to it; closing the session ends the server.
func (p *Procs) connect(ctx context.Context, s api.MCPServer) (*sdk.ClientSession, error) {
	return p.connectWith(ctx, s, nil)
}

// connectWith connects with the client's options opts.
func (p *Procs) connectWith(ctx context.Context, s api.MCPServer, opts *sdk.ClientOptions) (*sdk.ClientSession, error) {
	cmd := exec.Command(s.Command, s.Args...)
	cmd.Env = os.Environ()
	for k, v := range s.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	stderr := &tailWriter{max: 4096}
	cmd.Stderr = stderr
	client := sdk.NewClient(&sdk.Implementation{Name: "codecell-bench", Version: p.Version}, opts)
	cs, err := client.Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return nil, fmt.Errorf("%v; %s said:\n%s", err, filepath.Base(s.Command), stderr.String())
	}
	return cs, nil
}

// tailWriter keeps the last max bytes written to it: what a server said
// before it failed, without holding all it says while it serves.
type tailWriter struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if over := len(w.buf) - w.max; over > 0 {
		w.buf = append(w.buf[:0], w.buf[over:]...)
	}
	return len(p), nil
}

func (w *tailWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.buf)
}

// codecellSession is a client's session with codecell mcp; changed hears
// of each notifications/tools/list_changed.
type codecellSession struct {
	*sdk.ClientSession
	changed chan struct{}
}

// connectCodecell starts codecell mcp configured with servers upstream and
// the prompt budget (0: the default), and connects to it.
func (p *Procs) connectCodecell(ctx context.Context, servers api.MCPServers, budget int) (*codecellSession, error) {
	cfg := map[string]any{"mcpServers": servers}
	if budget != 0 {
		cfg["mcp"] = map[string]any{"prompt_budget_tokens": budget}
	}
	data, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(p.State, "config-*.json")
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return nil, err
	}
	f.Close()
	exe := p.Exe
	if p.Codecell != "" {
		exe = p.Codecell
	}
	changed := make(chan struct{}, 1)
	cs, err := p.connectWith(ctx, api.MCPServer{Command: exe, Args: []string{"mcp", "--config", f.Name(), "--state", p.State, "--log", filepath.Join(p.State, "log")}, Env: p.Env},
		&sdk.ClientOptions{ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		}})
	if err != nil {
		return nil, err
	}
	return &codecellSession{ClientSession: cs, changed: changed}, nil
}

// toolsList is a server's tools/list as JSON, as its client receives it.
func toolsList(ctx context.Context, cs *sdk.ClientSession) (string, []*sdk.Tool, error) {
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		return "", nil, err
	}
	data, err := wireJSON(res)
	return data, res.Tools, err
}

// wireJSON is v as JSON as it travels: without the escapes of <, > and &
// that encoding/json adds by default (Promise<T> would count 10 characters
// more).
func wireJSON(v any) (string, error) {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// waitUpstreams lists codecell's tools until execute's description names
// no server still starting: codecell answers at once, describes the servers
// as they come up and says so with notifications/tools/list_changed. A
// minute bounds a failure.
func waitUpstreams(ctx context.Context, cs *codecellSession) (string, []*sdk.Tool, error) {
	timeout := time.After(time.Minute)
	for {
		list, tools, err := toolsList(ctx, cs.ClientSession)
		if err != nil {
			return "", nil, err
		}
		desc := toolDescription(tools, "execute")
		if !strings.Contains(desc, "still starting") && !strings.Contains(desc, "No tools are ready yet") {
			return list, tools, nil
		}
		select {
		case <-ctx.Done():
			return "", nil, ctx.Err()
		case <-timeout:
			return "", nil, fmt.Errorf("the upstream servers did not start within a minute:\n%s", desc)
		case <-cs.changed:
		}
	}
}

func toolDescription(tools []*sdk.Tool, name string) string {
	for _, t := range tools {
		if t.Name == name {
			return t.Description
		}
	}
	return ""
}

// chars counts characters, as the prompt budget does.
func chars(s string) int { return utf8.RuneCountInString(s) }

// listing names the listing of tools in execute's description (also of
// builds that had no budget, whose last resort was a count of the tools).
func listing(desc string) string {
	switch {
	case strings.Contains(desc, "declare const tools"):
		return "declarations"
	case strings.Contains(desc, ") => Promise<"):
		return "signatures"
	case strings.Contains(desc, "too many to list here"), strings.Contains(desc, "tools are available: find them"):
		return "server counts"
	default:
		return "names"
	}
}

// PromptCase is one upstream configuration of codecell bench prompt.
type PromptCase struct {
	Name    string
	Servers api.MCPServers
}

// PromptRow is what codecell bench prompt measured of one case.
type PromptRow struct {
	Case        string
	Tools       int // the upstream servers' tools
	Direct      int // characters of the upstream servers' own tools/list, together
	Codecell    int // characters of codecell's tools/list
	Execute     int // characters of execute's description
	Listing     string
	Unbounded   int // characters of codecell's tools/list with no prompt budget
	DirectTools []string
}

// MeasurePrompt measures each case: the upstream servers' own tools/list
// (each connected directly), codecell's with budget, and codecell's with
// no budget.
func MeasurePrompt(ctx context.Context, p *Procs, cases []PromptCase, budget int, progress io.Writer) ([]PromptRow, error) {
	var rows []PromptRow
	for _, c := range cases {
		fmt.Fprintf(progress, "measuring %s\n", c.Name)
		row := PromptRow{Case: c.Name}
		names := make([]string, 0, len(c.Servers))
		for n := range c.Servers {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			cs, err := p.connect(ctx, c.Servers[n])
			if err != nil {
				return nil, fmt.Errorf("%s: %v", n, err)
			}
			list, tools, err := toolsList(ctx, cs)
			cs.Close()
			if err != nil {
				return nil, fmt.Errorf("%s: tools/list: %v", n, err)
			}
			row.Direct += chars(list)
			row.Tools += len(tools)
			for _, t := range tools {
				row.DirectTools = append(row.DirectTools, n+"."+t.Name)
			}
		}
		budgets := []int{budget, -1}
		if p.Codecell != "" {
			// Another build may know no budget.
			budgets = budgets[:1]
		}
		for _, b := range budgets {
			cs, err := p.connectCodecell(ctx, c.Servers, b)
			if err != nil {
				return nil, fmt.Errorf("codecell mcp: %v", err)
			}
			list, tools, err := waitUpstreams(ctx, cs)
			cs.Close()
			if err != nil {
				return nil, fmt.Errorf("codecell mcp: %v", err)
			}
			if b == -1 {
				row.Unbounded = chars(list)
				continue
			}
			desc := toolDescription(tools, "execute")
			row.Codecell, row.Execute, row.Listing = chars(list), chars(desc), listing(desc)
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// tokens is the estimate of the prompt budget: characters / 4.
func Tokens(chars int) int { return (chars + mcp.CharsPerToken - 1) / mcp.CharsPerToken }

func PrintPrompt(w io.Writer, rows []PromptRow, budget int) {
	if budget == 0 {
		budget = mcp.DefaultPromptBudgetTokens
	}
	fmt.Fprintf(w, "tools/list, in characters of JSON and estimated tokens (characters / 4); codecell's execute description kept to %d tokens\n\n", budget)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "upstream\ttools\tdirect chars\t~tokens\tcodecell chars\t~tokens\tcodecell/direct\texecute desc ~tokens\tlisting\tno budget chars\t")
	for _, r := range rows {
		unbounded := "-"
		if r.Unbounded > 0 {
			unbounded = strconv.Itoa(r.Unbounded)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%.2f×\t%d\t%s\t%s\t\n", r.Case, r.Tools, r.Direct, Tokens(r.Direct), r.Codecell, Tokens(r.Codecell),
			float64(r.Codecell)/float64(r.Direct), Tokens(r.Execute), r.Listing, unbounded)
	}
	tw.Flush()
}

// The synthetic server's tools: every verb with every noun, then again with
// a number, each with the params its verb takes.
var (
	synthVerbs = []string{"get", "list", "create", "update", "delete", "search", "archive", "restore", "export", "import",
		"assign", "approve", "reject", "merge", "sync", "count", "validate", "publish", "schedule", "tag"}
	synthNouns = []string{"invoice", "customer", "ticket", "order", "project", "issue", "comment", "user", "team", "repository",
		"deployment", "alert", "dashboard", "report", "contract", "payment", "shipment", "product", "campaign", "lead",
		"document", "folder", "calendar_event", "webhook", "secret"}
)

// SyntheticTools are n tools as a typical SaaS MCP server describes them:
// a sentence or two each, an id or a query, options with descriptions,
// enums and bounds.
func SyntheticTools(n int) []*sdk.Tool {
	tools := make([]*sdk.Tool, 0, n)
	for i := 0; i < n; i++ {
		verb := synthVerbs[i%len(synthVerbs)]
		noun := synthNouns[(i/len(synthVerbs))%len(synthNouns)]
		name := verb + "_" + noun
		if round := i / (len(synthVerbs) * len(synthNouns)); round > 0 {
			name += "_" + strconv.Itoa(round+1)
		}
		thing := strings.ReplaceAll(noun, "_", " ")
		props := map[string]any{}
		var required []string
		switch verb {
		case "list", "search", "count", "export":
			props["query"] = map[string]any{"type": "string", "description": "Filter expression, such as status:open owner:me; empty matches every " + thing + "."}
			props["limit"] = map[string]any{"type": "integer", "minimum": 1, "maximum": 100, "default": 20, "description": "Maximum number of " + thing + "s to return."}
			props["cursor"] = map[string]any{"type": "string", "description": "Opaque cursor from a previous page's next_cursor."}
			props["sort"] = map[string]any{"type": "string", "enum": []string{"created", "updated", "name"}, "description": "Field to sort by."}
		case "create", "update", "import":
			props["name"] = map[string]any{"type": "string", "description": "Display name of the " + thing + "."}
			props["fields"] = map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"}, "description": "Custom fields to set, by field key."}
			props["notify"] = map[string]any{"type": "boolean", "default": false, "description": "Whether to notify the " + thing + "'s watchers."}
			required = []string{"name"}
			if verb == "update" {
				props["id"] = map[string]any{"type": "string", "description": "ID of the " + thing + " to update."}
				required = []string{"id"}
			}
		default:
			props["id"] = map[string]any{"type": "string", "description": "ID of the " + thing + "."}
			props["reason"] = map[string]any{"type": "string", "description": "Optional note recorded in the " + thing + "'s audit log."}
			props["dry_run"] = map[string]any{"type": "boolean", "default": false, "description": "Validate the request without applying it."}
			required = []string{"id"}
		}
		schema := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
		if required != nil {
			schema["required"] = required
		}
		raw, _ := json.Marshal(schema)
		tools = append(tools, &sdk.Tool{
			Name: name,
			Description: fmt.Sprintf("Runs %s on %ss in the workspace. Requires the %s:%s scope; results follow the workspace's sharing rules, and deleted items are excluded unless the query says otherwise.",
				verb, thing, noun, verb),
			InputSchema: json.RawMessage(raw),
		})
	}
	return tools
}

// ServeSynthetic is codecell bench mcp-synthetic: an MCP server over stdin
// and stdout with n synthetic tools, the upstream the benchmarks measure
// codecell against at scale. A call returns its tool's name and params.
func ServeSynthetic(ctx context.Context, n int, version string) error {
	srv := sdk.NewServer(&sdk.Implementation{Name: "synthetic", Version: version}, nil)
	for _, t := range SyntheticTools(n) {
		name := t.Name
		srv.AddTool(t, func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: name + " " + string(req.Params.Arguments)}}}, nil
		})
	}
	if err := srv.Run(ctx, &sdk.StdioTransport{}); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// A codemodeTask is done two ways: by direct, the tool calls an agent
// makes one by one against server-everything (it reads each result before
// its next call), and by program, one program through codecell's execute.
// Both must come to want.
type codemodeTask struct {
	Name string
	// Turns is the model turns direct takes when the calls that do not
	// depend on each other go out together.
	Turns   int
	Direct  func(ctx context.Context, c *directAgent) (string, error)
	Program string
	Want    string
}

// directAgent calls server-everything's tools as a model does, each call
// and its result entering the context.
type directAgent struct {
	cs    *sdk.ClientSession
	calls int
	chars []int // each call's
	took  time.Duration
}

func (a *directAgent) call(ctx context.Context, name string, args map[string]any) (*sdk.CallToolResult, error) {
	start := time.Now()
	res, err := a.cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	a.took += time.Since(start)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	if res.IsError {
		return nil, fmt.Errorf("%s failed: %s", name, contentText(res))
	}
	a.calls++
	a.chars = append(a.chars, contextChars(name, args, res))
	return res, nil
}

// contextChars is what one call puts in a model's context: the call (name
// and arguments, as JSON) and its result's content, the blocks a client
// puts before the model. structuredContent, which mirrors the content, and
// _meta are left out for both ways alike.
func contextChars(name string, args map[string]any, res *sdk.CallToolResult) int {
	call, _ := wireJSON(map[string]any{"name": name, "arguments": args})
	content, _ := wireJSON(res.Content)
	return chars(call) + chars(content)
}

func contentText(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*sdk.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

// lastNumber is the last number in a text, as "The sum of 1 and 2 is 3."
// says it.
func lastNumber(s string) (float64, error) {
	f := strings.Fields(s)
	if len(f) == 0 {
		return 0, fmt.Errorf("no number in %q", s)
	}
	return strconv.ParseFloat(strings.TrimRight(f[len(f)-1], "."), 64)
}

func codemodeTasks() []codemodeTask {
	nums := []int{17, 4, 23, 8, 42, 15, 16, 108, 7, 3, 99, 12, 5, 61, 28, 30, 9, 1, 77, 50}
	want := 0
	for _, n := range nums {
		want += n
	}
	numList, _ := json.Marshal(nums)
	messages := []string{"code mode", "one program instead of many calls", "sandboxed", "tools from Python",
		"a typed API in the description", "round trips", "fewer tokens", "results stay in the sandbox until returned", "MCP", "done"}
	msgList, _ := json.Marshal(messages)
	cities := []string{"New York", "Chicago", "Los Angeles"}
	cityList, _ := json.Marshal(cities)
	return []codemodeTask{{
		Name:  "sum of 20 numbers",
		Turns: 5, // a tree of sums: 10, 5, 3, 1, 1 calls at once
		Direct: func(ctx context.Context, a *directAgent) (string, error) {
			total := float64(nums[0])
			for _, n := range nums[1:] {
				res, err := a.call(ctx, "get-sum", map[string]any{"a": total, "b": n})
				if err != nil {
					return "", err
				}
				if total, err = lastNumber(contentText(res)); err != nil {
					return "", err
				}
			}
			return strconv.FormatFloat(total, 'f', -1, 64), nil
		},
		Program: "nums = " + string(numList) + "\n" +
			"total = nums[0]\n" +
			"for n in nums[1:]:\n" +
			"    r = await tools.everything.get_sum(a=total, b=n)\n" +
			"    total = int(r.split()[-1].rstrip('.'))\n" +
			"total\n",
		Want: strconv.Itoa(want),
	}, {
		Name:  "longest of 10 echoes",
		Turns: 1,
		Direct: func(ctx context.Context, a *directAgent) (string, error) {
			longest := ""
			for _, msg := range messages {
				res, err := a.call(ctx, "echo", map[string]any{"message": msg})
				if err != nil {
					return "", err
				}
				if e := strings.TrimPrefix(contentText(res), "Echo: "); len(e) > len(longest) {
					longest = e
				}
			}
			return strconv.Quote(longest), nil
		},
		Program: "import asyncio\n" +
			"msgs = " + string(msgList) + "\n" +
			"echoes = await asyncio.gather(*(tools.everything.echo(message=m) for m in msgs))\n" +
			"max((e.removeprefix('Echo: ') for e in echoes), key=len)\n",
		Want: strconv.Quote("results stay in the sandbox until returned"),
	}, {
		Name:  "warmest of 3 cities",
		Turns: 1,
		Direct: func(ctx context.Context, a *directAgent) (string, error) {
			best, bestT := "", 0.0
			for _, city := range cities {
				res, err := a.call(ctx, "get-structured-content", map[string]any{"location": city})
				if err != nil {
					return "", err
				}
				var w struct {
					Temperature float64 `json:"temperature"`
				}
				if err := json.Unmarshal([]byte(contentText(res)), &w); err != nil {
					return "", fmt.Errorf("get-structured-content: %v", err)
				}
				if best == "" || w.Temperature > bestT {
					best, bestT = city, w.Temperature
				}
			}
			return strconv.Quote(best), nil
		},
		Program: "import asyncio\n" +
			"cities = " + string(cityList) + "\n" +
			"ws = await asyncio.gather(*(tools.everything.get_structured_content(location=c) for c in cities))\n" +
			"max(zip(cities, ws), key=lambda cw: cw[1]['temperature'])[0]\n",
	}}
}

// CodemodeRow is what one way of doing one task cost.
type CodemodeRow struct {
	Task, Way    string
	Calls, Turns int
	// Batched is the model turns when calls that do not depend on each
	// other go out together.
	Batched int
	Chars   int           // the calls' and results' characters
	PerCall []int         // each call's part of Chars
	Took    time.Duration // the median of the runs
	Answer  string
}

// runCodemode does each task both ways, runs times, and checks that both
// ways came to the same answer (and to the task's own, where it knows it).
func runCodemode(ctx context.Context, direct, cc *sdk.ClientSession, tasks []codemodeTask, runs int) ([]CodemodeRow, error) {
	var rows []CodemodeRow
	for _, task := range tasks {
		var d, c CodemodeRow
		var dTook, cTook []time.Duration
		for i := 0; i < runs; i++ {
			a := &directAgent{cs: direct}
			ans, err := task.Direct(ctx, a)
			if err != nil {
				return nil, fmt.Errorf("%s, direct: %v", task.Name, err)
			}
			sum := 0
			for _, c := range a.chars {
				sum += c
			}
			d = CodemodeRow{Task: task.Name, Way: "direct calls", Calls: a.calls, Turns: a.calls, Chars: sum, PerCall: a.chars, Answer: ans}
			dTook = append(dTook, a.took)

			args := map[string]any{"code": task.Program}
			start := time.Now()
			res, err := cc.CallTool(ctx, &sdk.CallToolParams{Name: "execute", Arguments: args})
			took := time.Since(start)
			if err != nil {
				return nil, fmt.Errorf("%s, execute: %v", task.Name, err)
			}
			var out struct {
				Value     json.RawMessage `json:"value"`
				ToolCalls []any           `json:"tool_calls"`
			}
			raw, _ := json.Marshal(res.StructuredContent)
			_ = json.Unmarshal(raw, &out)
			if res.IsError {
				return nil, fmt.Errorf("%s, execute failed:\n%s", task.Name, contentText(res))
			}
			n := contextChars("execute", args, res)
			c = CodemodeRow{Task: task.Name, Way: fmt.Sprintf("code mode (%d calls inside)", len(out.ToolCalls)), Calls: 1, Turns: 1,
				Chars: n, PerCall: []int{n}, Answer: string(out.Value)}
			cTook = append(cTook, took)
		}
		if d.Answer != c.Answer || (task.Want != "" && d.Answer != task.Want) {
			return nil, fmt.Errorf("%s: direct calls came to %s, code mode to %s (want %s)", task.Name, d.Answer, c.Answer, task.Want)
		}
		d.Took, c.Took = median(dTook), median(cTook)
		d.Batched, c.Batched = min(d.Turns, task.Turns), 1
		rows = append(rows, d, c)
	}
	return rows, nil
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// MeasureCodemode connects to server-everything directly and to codecell
// mcp in front of it, and runs the tasks; lists are the characters of
// either's tools/list.
func MeasureCodemode(ctx context.Context, p *Procs, runs int) (rows []CodemodeRow, lists [2]int, err error) {
	direct, err := p.connect(ctx, p.EverythingServer())
	if err != nil {
		return nil, lists, fmt.Errorf("server-everything: %v", err)
	}
	defer direct.Close()
	cc, err := p.connectCodecell(ctx, api.MCPServers{"everything": p.EverythingServer()}, 0)
	if err != nil {
		return nil, lists, fmt.Errorf("codecell mcp: %v", err)
	}
	defer cc.Close()
	dl, _, err := toolsList(ctx, direct)
	if err != nil {
		return nil, lists, err
	}
	cl, _, err := waitUpstreams(ctx, cc)
	if err != nil {
		return nil, lists, err
	}
	lists = [2]int{chars(dl), chars(cl)}
	rows, err = runCodemode(ctx, direct, cc.ClientSession, codemodeTasks(), runs)
	return rows, lists, err
}

func PrintCodemode(w io.Writer, rows []CodemodeRow, lists [2]int, runs int) {
	fmt.Fprintf(w, "server-everything's tools, called directly or from one program through codecell's execute; context is the calls and their results' content, in characters and estimated tokens (characters / 4); time is the tools' (median of %d), without the model's own time per turn\n\n", runs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "task\tway\tMCP calls\tmodel turns\tbatched\tcontext chars\t~tokens\tread over turns ~tokens\ttime\tanswer\t")
	for i, r := range rows {
		list := lists[i%2]
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t\n", r.Task, r.Way, r.Calls, r.Turns, r.Batched, r.Chars, Tokens(r.Chars),
			Tokens(readOverTurns(list, r.PerCall)), r.Took.Round(100*time.Microsecond), r.Answer)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nonce per conversation, tools/list: server-everything %d chars (~%d tokens), codecell %d chars (~%d tokens)\n",
		lists[0], Tokens(lists[0]), lists[1], Tokens(lists[1]))
	fmt.Fprintln(w, "model turns: a turn per call, each waiting for the last result; batched: calls that do not depend on each other go out together (the sum as a tree of sums)")
	fmt.Fprintln(w, "read over turns: what the model reads in all, a turn per call and one to answer, each reading the tools/list and the calls so far (no prompt caching)")
}

// readOverTurns is the characters a model reads over the turns of a task:
// before each call and once more to answer, the tools/list (list
// characters) and every call and result so far (perCall).
func readOverTurns(list int, perCall []int) int {
	total, sofar := 0, 0
	for _, c := range perCall {
		total += list + sofar
		sofar += c
	}
	return total + list + sofar
}
