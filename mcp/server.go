package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codecell-dev/codecell"
	csession "github.com/codecell-dev/codecell/session"
)

// Server is codecell as an MCP server: the execute tool, which runs a
// program in the sandbox that may call the Engine's tools (code mode), and
// the tools a model uses to find those tools. Serve it over stdio (Run) or
// streamable HTTP (HTTPHandler).
type Server struct {
	// Engine runs the programs; its Tools are what programs may call. Nil
	// means a zero Engine: tier auto, the default limits, no tools.
	Engine *codecell.Engine
	// Sessions, when set, keep workspaces between executions named by the
	// session argument; nil refuses that argument. The names are each
	// principal's own: two principals' "shared" are two workspaces.
	Sessions *csession.Store
	// Admit, when set, is asked before each program runs, with the
	// principal that calls: it returns what to call when the program is
	// done, or the refusal to answer with. codecell serve sets it to the
	// REST API's (server.Server.Admit), so that programs run over /mcp
	// count against the same limits of running programs, the server's and
	// the principal's.
	Admit func(p *csession.Principal) (release func(), refusal *codecell.Envelope)
	// MaxRunning bounds the programs that run at once when Admit is nil,
	// and so a client that sends many execute calls without waiting for
	// their answers: one more is refused, retryably, with
	// TOO_MANY_EXECUTIONS. Zero means twice the CPUs.
	MaxRunning int
	// Version is reported to clients.
	Version string
	// Logger receives a line per MCP tool call; nil means none.
	Logger *slog.Logger

	// MaxHTTPSessions bounds the MCP sessions open at once over HTTP; a
	// client that would open one more is refused with 429. Zero means
	// DefaultMaxHTTPSessions.
	MaxHTTPSessions int
	// MaxHTTPSessionsPerPrincipal bounds the MCP sessions over HTTP that one
	// principal has open at once, so that one token cannot take every
	// session while the others get none; zero means no bound but
	// MaxHTTPSessions. codecell serve gives each token half of
	// MaxHTTPSessions when it has two tokens or more (session.DefaultShare).
	MaxHTTPSessionsPerPrincipal int
	// HTTPSessionIdle closes an MCP session over HTTP that received no
	// request for this long. Zero means DefaultHTTPSessionIdle.
	HTTPSessionIdle time.Duration
	// HostChecked says that the handler in front of HTTPHandler checks the
	// Host header itself (codecell serve's does, and takes the names of
	// server.allowed_hosts): the SDK's own check, which takes loopback names
	// only, is then left out. Otherwise it refuses, on a loopback listener,
	// a Host that is not a loopback one (DNS rebinding).
	HostChecked bool

	// FirstListWait is how long the first tools/list requests, made right
	// after the server starts, may wait for upstream servers that are
	// still starting (DefaultFirstListWait when zero, none when negative);
	// initialize never waits.
	FirstListWait time.Duration

	// PromptBudgetTokens bounds execute's description, in tokens estimated
	// as characters / 4 (EstimateTokens): it carries the tools' TypeScript
	// declarations while they fit, else shorter listings that point to
	// search_tools and tools_info. Zero means DefaultPromptBudgetTokens;
	// negative, no bound.
	PromptBudgetTokens int

	// Stats counts what clients did, for the HTTP service's metrics.
	Stats Stats

	inflight inflight
	paused   pausedRuns

	runsOnce sync.Once
	runs     *csession.Running
}

// admit takes a slot for a program of p's: Admit's when set, else the
// server's own bound of MaxRunning.
func (s *Server) admit(p *csession.Principal) (release func(), refusal *codecell.Envelope) {
	if s.Admit != nil {
		return s.Admit(p)
	}
	s.runsOnce.Do(func() {
		n := s.MaxRunning
		if n <= 0 {
			n = 2 * runtime.NumCPU()
		}
		s.runs = csession.NewRunning(n)
	})
	return s.runs.Acquire(p)
}

// zeroEngine is the Engine of a Server that has none.
var zeroEngine = &codecell.Engine{}

func (s *Server) engine() *codecell.Engine {
	if s.Engine == nil {
		return zeroEngine
	}
	return s.Engine
}

// inflight tracks the executions running now, to end them when their
// client goes away. The SDK cannot be relied on for that: a client that
// closes its session without cancelling its call first leaves the call
// running (the session's close waits for it), and under the older protocol
// a dropped HTTP request does not reach the handler at all.
type inflight struct {
	mu      sync.Mutex
	next    int
	cancels map[int]inflightRun
}

type inflightRun struct {
	cancel  context.CancelFunc
	owner   string // the principal's name
	session string // the MCP session, "" on stdio
	request string // the HTTP request that carries the call, "" on stdio
}

func (f *inflight) add(r inflightRun) func() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cancels == nil {
		f.cancels = map[int]inflightRun{}
	}
	f.next++
	id := f.next
	f.cancels[id] = r
	return func() {
		f.mu.Lock()
		delete(f.cancels, id)
		f.mu.Unlock()
	}
}

// cancel ends the executions that match: all of them, or a session's, or an
// HTTP request's.
func (f *inflight) cancel(match func(inflightRun) bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.cancels {
		if match(r) {
			r.cancel()
		}
	}
}

// Stats are counters of a Server's activity since it started.
type Stats struct {
	Executions      atomic.Int64 // execute calls
	Chains          atomic.Int64 // call_tool_chain calls
	Searches        atomic.Int64 // search_tools calls
	Discovery       atomic.Int64 // list_tools, tools_info, get_required_keys_for_tool calls
	GuardrailBlocks atomic.Int64 // programs refused before running
	ToolCalls       atomic.Int64 // calls programs made to tools
}

// Snapshot returns the counters by name.
func (s *Stats) Snapshot() map[string]int64 {
	return map[string]int64{
		"executions":       s.Executions.Load(),
		"chains":           s.Chains.Load(),
		"searches":         s.Searches.Load(),
		"discovery":        s.Discovery.Load(),
		"guardrail_blocks": s.GuardrailBlocks.Load(),
		"tool_calls":       s.ToolCalls.Load(),
	}
}

// SDKServer builds the SDK's MCP server that Run and HTTPHandler serve; a
// caller with a transport of its own may serve it itself. It starts the
// upstream servers in the background and does not wait for them: the description of execute lists
// the tools of those ready and says which are still starting or failed,
// and is replaced (with notifications/tools/list_changed to the clients)
// whenever one of them changes, until ctx ends.
func (s *Server) SDKServer(ctx context.Context) *sdk.Server {
	version := s.Version
	if version == "" {
		version = "dev"
	}
	srv := sdk.NewServer(&sdk.Implementation{Name: "codecell", Version: version}, &sdk.ServerOptions{
		Instructions: instructions,
		Logger:       s.Logger,
	})
	s.engine().Tools.Start()
	var mu sync.Mutex
	last := ""
	describe := func() {
		mu.Lock()
		defer mu.Unlock()
		toolsAPI := s.toolsAPI(ctx)
		if toolsAPI == last {
			return
		}
		last = toolsAPI
		s.addExecuteTools(srv, toolsAPI)
	}
	describe()
	// An upstream server may say its tools changed as often as it likes:
	// one description runs at a time, and the changes that come during it
	// make one more, not a goroutine each.
	var redo struct {
		sync.Mutex
		running, again bool
	}
	redescribe := func() {
		redo.Lock()
		defer redo.Unlock()
		if redo.running {
			redo.again = true
			return
		}
		redo.running = true
		go func() {
			for {
				describe()
				redo.Lock()
				if !redo.again {
					redo.running = false
					redo.Unlock()
					return
				}
				redo.again = false
				redo.Unlock()
			}
		}()
	}
	changed := make(chan struct{}, 1)
	stop := s.engine().Tools.Watch(func() {
		select {
		case changed <- struct{}{}:
		default:
		}
		// Off the upstream's goroutine: describing lists the ready
		// servers' tools, which may ask one of them.
		redescribe()
	})
	context.AfterFunc(ctx, stop)
	// initialize is answered at once. The first listings of tools wait a
	// moment (FirstListWait from now) for the servers still starting, so
	// that a server that starts in a blink is in the first list a client
	// sees; a slower one comes with notifications/tools/list_changed.
	readyBy := time.Now().Add(s.firstListWait())
	srv.AddReceivingMiddleware(func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(rctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			// Past the first moments, the watch keeps the description
			// current; within them, a listing that waited describes the
			// servers that came up meanwhile before it answers.
			// The discovery tools wait as a listing does: called
			// first thing, they would find no tools at all.
			if (method == "tools/list" || method == "tools/call" && discovers(req)) && s.waitForStarts(rctx, readyBy, changed) {
				describe()
			}
			return next(rctx, method, req)
		}
	})
	srv.AddTool(&sdk.Tool{
		Name:        "search_tools",
		Description: "Finds the tools a program can call, best match first, with a one-line description and signature each (and their TypeScript declarations with typescript: true). Then run code that calls them with execute.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"words describing what you want to do, such as \"open issues\""},"limit":{"type":"integer","minimum":1,"maximum":50,"default":10},"typescript":{"type":"boolean","description":"also give the TypeScript declarations of the tools found"}},"required":["query"]}`),
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true},
	}, s.guarded("search_tools", s.handleSearch))
	srv.AddTool(&sdk.Tool{
		Name:        "list_tools",
		Description: "Lists the tools a program can call (server.tool), one line each.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"server":{"type":"string","description":"only the tools of this server"}}}`),
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true},
	}, s.guarded("list_tools", s.handleList))
	srv.AddTool(&sdk.Tool{
		Name:        "tools_info",
		Description: "TypeScript declarations and JSON Schemas of tools, by name.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"names":{"type":"array","items":{"type":"string"},"minItems":1,"maxItems":50}},"required":["names"]}`),
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true},
	}, s.guarded("tools_info", s.handleInfo))
	srv.AddTool(&sdk.Tool{
		Name:        "get_required_keys_for_tool",
		Description: "Gives the keys a tool's params must have, and the ones it may have.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`),
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true},
	}, s.guarded("get_required_keys_for_tool", s.handleRequiredKeys))
	if s.Sessions != nil {
		srv.AddTool(&sdk.Tool{
			Name:        "session_info",
			Description: "Says what a session holds, and a live session's variables (name, type, short repr), without running code.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"session":{"type":"string","description":"as given to execute"}},"required":["session"]}`),
			Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true},
		}, s.guarded("session_info", s.handleSessionInfo))
		s.addFileTools(srv)
	}
	return srv
}

// discovers reports whether req calls one of the tools that find the
// programs' tools.
func discovers(req sdk.Request) bool {
	call, ok := req.(*sdk.CallToolRequest)
	if !ok || call.Params == nil {
		return false
	}
	switch call.Params.Name {
	case "search_tools", "list_tools", "tools_info", "get_required_keys_for_tool":
		return true
	}
	return false
}

// DefaultFirstListWait is how long after the server is made its first
// tools/list may wait for upstream servers that are still starting.
const DefaultFirstListWait = time.Second

func (s *Server) firstListWait() time.Duration {
	if s.FirstListWait != 0 {
		return max(s.FirstListWait, 0)
	}
	return DefaultFirstListWait
}

// waitForStarts waits until no upstream server is starting, or until by,
// or until ctx ends. changed hears of each change of a server's state. It
// reports whether it was still before by.
func (s *Server) waitForStarts(ctx context.Context, by time.Time, changed <-chan struct{}) bool {
	wait := time.Until(by)
	if wait <= 0 {
		return false
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		if len(s.engine().Tools.Starting()) == 0 {
			return true
		}
		select {
		case <-changed:
		case <-timer.C:
			return true
		case <-ctx.Done():
			return true
		}
	}
}

// addExecuteTools adds execute and call_tool_chain; execute's description
// holds the tools' API. Adding them again replaces them, and the SDK tells
// the clients that the list changed.
func (s *Server) addExecuteTools(srv *sdk.Server, toolsAPI string) {
	lim := s.engine().Limits.Or(codecell.DefaultLimits)
	for _, t := range []struct{ name, title, lang string }{
		{"execute", "Run code in a sandbox", "python"},
		{"call_tool_chain", "Run code that chains tool calls", "typescript"},
	} {
		srv.AddTool(&sdk.Tool{
			Name:        t.name,
			Title:       t.title,
			Description: s.executeDescription(t.name, t.lang, toolsAPI),
			InputSchema: json.RawMessage(executeSchema(t.name, t.lang, lim)),
			Annotations: &sdk.ToolAnnotations{OpenWorldHint: ptr(false)},
		}, s.guarded(t.name, s.handleExecute(t.name, t.lang)))
	}
}

// guarded runs a tool's handler so that a panic in it costs that call: the
// client gets an error result, the log gets the stack, and the server, which
// the SDK does not protect from its handlers, goes on.
func (s *Server) guarded(tool string, h sdk.ToolHandler) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (res *sdk.CallToolResult, err error) {
		defer func() {
			if p := recover(); p != nil {
				if s.Logger != nil {
					s.Logger.Error("codecell panicked in an MCP tool", "mcp_tool", tool, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				}
				res, err = toolError(fmt.Sprintf("codecell failed while handling this call (%v); this is a fault in codecell, not in the request: its log has the details", p)), nil
			}
		}()
		if env := duplicateArguments(tool, req.Params.Arguments); req.Params != nil && env != nil {
			if tool == "execute" || tool == "call_tool_chain" {
				return s.refusal(ctx, &codecell.Exec{}, env), nil
			}
			return refused(env), nil
		}
		return h(ctx, req)
	}
}

const instructions = `codecell runs code in a sandbox. Instead of calling tools one by one, write one short program that calls them (code mode): use execute (Python by default) or call_tool_chain (TypeScript). Find tools with search_tools or list_tools, and their types with tools_info.`

// executeSchema is the input schema of execute, or of call_tool_chain
// (TypeScript, and no live sessions). It is in every client's prompt: the
// descriptions are short, and what the server checks anyway (a session's
// name) is not spelled out.
func executeSchema(tool, lang string, lim codecell.Limits) string {
	out := `{"type":"object","properties":{"code":{"type":"string"},`
	if tool != "call_tool_chain" {
		out += `"language":{"enum":["python","javascript","typescript","bash","sh"],"default":"` + lang + `"},`
	}
	out += `"timeout_seconds":{"type":"number","minimum":0.001,"maximum":` + fmt.Sprint(maxTimeout(lim).Seconds()) + `,"description":"` + fmt.Sprint(lim.Timeout.Seconds()) + ` by default"},` +
		`"session":{"type":"string","description":"a name you choose: runs with the same session share files"}`
	if tool != "call_tool_chain" {
		// Packages to install first; kept short: it is in every prompt.
		out += `,"packages":{"description":"{\"python\":[\"humanize\"]}"}`
		out += `,"live":{"type":"boolean","description":"with a new session: keep its Python interpreter, so variables persist"},` +
			`"restart":{"type":"boolean","description":"restart a live session's interpreter first"},` +
			`"fork_from":{"type":"string","description":"a new session starts as a copy of this one"}`
	}
	return out + `},"required":["code"]}`
}

// waitingNote says, in a line, what a server that is not ready means for
// a program.
func waitingNote(st codecell.SourceStatus) string {
	switch st.State {
	case codecell.SourceStarting:
		return fmt.Sprintf("(MCP server %q is still starting%s: its tools are listed once it is ready; a program that calls one now waits for it.)", st.Name, forHowLong(st.Since))
	case codecell.SourceIdle:
		return fmt.Sprintf("(MCP server %q has not started: it starts when a program calls one of its tools.)", st.Name)
	case codecell.SourceClosed:
		return fmt.Sprintf("(MCP server %q was closed: codecell is shutting down.)", st.Name)
	default:
		why := fmt.Sprint(st.Err)
		var env *codecell.Envelope
		if errors.As(st.Err, &env) {
			why = env.Message
			// The note ends by saying that a call starts it again.
			hints := slices.DeleteFunc(slices.Clone(env.Hints), func(h string) bool { return strings.HasSuffix(h, "starts it again") })
			if len(hints) > 0 {
				why += " (" + strings.Join(hints, "; ") + ")"
			}
		}
		return fmt.Sprintf("(MCP server %q is unavailable: %s. A program that calls one of its tools starts it again.)", st.Name, why)
	}
}

func forHowLong(since time.Time) string {
	if since.IsZero() {
		return ""
	}
	return fmt.Sprintf(" (for %s)", time.Since(since).Round(time.Second))
}

// tools lists, without waiting for a server that is starting, the tools
// programs may call by the Engine's policy, and the servers that are not
// ready.
func (s *Server) tools(ctx context.Context) ([]codecell.Tool, []codecell.SourceStatus) {
	all, waiting := s.engine().Tools.Available(ctx)
	var out []codecell.Tool
	for _, t := range all {
		if s.engine().Policy.Tools.Permits(t.Name) {
			out = append(out, t)
		}
	}
	return out, waiting
}
