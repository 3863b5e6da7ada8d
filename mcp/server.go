package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codecell-dev/codecell"
	csession "github.com/codecell-dev/codecell/session"
	"github.com/codecell-dev/codecell/tooldoc"
)

// Server is codecell as an MCP server: the execute tool, which runs a
// program in the sandbox that may call the Engine's tools (code mode), and
// the tools a model uses to find those tools. Serve it over stdio (Run) or
// streamable HTTP (HTTPHandler).
type Server struct {
	// Engine runs the programs; its Tools are what programs may call.
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
	// Version is reported to clients.
	Version string
	// Logger receives a line per MCP tool call; nil means none.
	Logger *slog.Logger

	// MaxHTTPSessions bounds the MCP sessions open at once over HTTP; a
	// client that would open one more is refused with 429. Zero means
	// DefaultMaxHTTPSessions.
	MaxHTTPSessions int
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

	// Stats counts what clients did, for the HTTP service's metrics.
	Stats Stats

	inflight inflight
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

// openSessions are the MCP sessions that initialize requests opened and
// that are still open. The SDK's own list is no count of them: it also holds,
// for a moment, the temporary sessions of requests that need none.
type openSessions struct {
	mu  sync.Mutex
	ids map[string]bool
}

// admit reports whether one more session may open: fewer than max of those
// opened are still among srv's.
func (o *openSessions) admit(srv *sdk.Server, max int) bool {
	live := map[string]bool{}
	for ss := range srv.Sessions() {
		live[ss.ID()] = true
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for id := range o.ids {
		if !live[id] {
			delete(o.ids, id)
		}
	}
	return len(o.ids) < max
}

func (o *openSessions) add(id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ids == nil {
		o.ids = map[string]bool{}
	}
	o.ids[id] = true
}

// sessionRecorder notes the session an initialize response opens.
type sessionRecorder struct {
	http.ResponseWriter
	opened *openSessions
	done   bool
}

func (s *sessionRecorder) WriteHeader(code int) {
	if !s.done {
		s.done = true
		if id := s.Header().Get("Mcp-Session-Id"); id != "" && code < 300 {
			s.opened.add(id)
		}
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *sessionRecorder) Write(b []byte) (int, error) {
	if !s.done {
		s.WriteHeader(http.StatusOK)
	}
	return s.ResponseWriter.Write(b)
}

// Flush sends what is written so far: the SDK streams events.
func (s *sessionRecorder) Flush() {
	if !s.done {
		s.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(s.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the connection (flushes).
func (s *sessionRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// opensSession reports whether a request body holds an initialize request,
// alone or in a batch.
func opensSession(body []byte) bool {
	var one struct {
		Method string `json:"method"`
	}
	if json.Unmarshal(body, &one) == nil {
		return one.Method == "initialize"
	}
	var batch []struct {
		Method string `json:"method"`
	}
	if json.Unmarshal(body, &batch) == nil {
		for _, m := range batch {
			if m.Method == "initialize" {
				return true
			}
		}
	}
	return false
}

// Defaults of the bounds on MCP sessions over HTTP.
const (
	DefaultMaxHTTPSessions = 1000
	DefaultHTTPSessionIdle = 30 * time.Minute
)

// requestHeader tags each HTTP request, so that the execution it carries
// can be found when the request is dropped.
const requestHeader = "X-Codecell-Request"

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

// New builds the MCP server. It starts the upstream servers in the
// background and does not wait for them: the description of execute lists
// the tools of those ready and says which are still starting or failed,
// and is replaced (with notifications/tools/list_changed to the clients)
// whenever one of them changes, until ctx ends.
func (s *Server) New(ctx context.Context) *sdk.Server {
	version := s.Version
	if version == "" {
		version = "dev"
	}
	srv := sdk.NewServer(&sdk.Implementation{Name: "codecell", Version: version}, &sdk.ServerOptions{
		Instructions: instructions,
		Logger:       s.Logger,
	})
	s.Engine.Tools.Start()
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
	changed := make(chan struct{}, 1)
	stop := s.Engine.Tools.Watch(func() {
		select {
		case changed <- struct{}{}:
		default:
		}
		// Off the upstream's goroutine: describing lists the ready
		// servers' tools, which may ask one of them.
		go describe()
	})
	context.AfterFunc(ctx, stop)
	// initialize is answered at once. The first listings of tools wait a
	// moment (FirstListWait from now) for the servers still starting, so
	// that a server that starts in a blink is in the first list a client
	// sees; a slower one comes with notifications/tools/list_changed.
	readyBy := time.Now().Add(s.firstListWait())
	srv.AddReceivingMiddleware(func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(rctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			if method == "tools/list" {
				s.waitForStarts(rctx, readyBy, changed)
				describe()
			}
			return next(rctx, method, req)
		}
	})
	srv.AddTool(&sdk.Tool{
		Name:        "search_tools",
		Description: "Finds the tools a program can call, best match first, with a one-line description each. Then run code that calls them with execute.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"words describing what you want to do, such as \"open issues\""},"limit":{"type":"integer","minimum":1,"maximum":50,"default":10}},"required":["query"]}`),
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true},
	}, s.guarded("search_tools", s.handleSearch))
	srv.AddTool(&sdk.Tool{
		Name:        "list_tools",
		Description: "Lists every tool a program can call, with a one-line description each. A server's tools are named server.tool.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"server":{"type":"string","description":"only the tools of this server"}}}`),
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true},
	}, s.guarded("list_tools", s.handleList))
	srv.AddTool(&sdk.Tool{
		Name:        "tools_info",
		Description: "Gives the typed signatures of tools, by name: TypeScript declarations of their params and results, and their JSON Schemas.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"names":{"type":"array","items":{"type":"string"},"minItems":1,"maxItems":50}},"required":["names"]}`),
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true},
	}, s.guarded("tools_info", s.handleInfo))
	srv.AddTool(&sdk.Tool{
		Name:        "get_required_keys_for_tool",
		Description: "Gives the keys a tool's params must have, and the ones it may have.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`),
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true},
	}, s.guarded("get_required_keys_for_tool", s.handleRequiredKeys))
	return srv
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
// or until ctx ends. changed hears of each change of a server's state.
func (s *Server) waitForStarts(ctx context.Context, by time.Time, changed <-chan struct{}) {
	wait := time.Until(by)
	if wait <= 0 {
		return
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		_, waiting := s.Engine.Tools.Available(ctx)
		if !slices.ContainsFunc(waiting, func(st codecell.SourceStatus) bool { return st.State == codecell.SourceStarting }) {
			return
		}
		select {
		case <-changed:
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// addExecuteTools adds execute and call_tool_chain, whose descriptions
// hold the tools' API; adding them again replaces them, and the SDK tells
// the clients that the list changed.
func (s *Server) addExecuteTools(srv *sdk.Server, toolsAPI string) {
	lim := s.Engine.Limits.Or(codecell.DefaultLimits)
	srv.AddTool(&sdk.Tool{
		Name:        "execute",
		Title:       "Run code in a sandbox",
		Description: executeDescription("python", toolsAPI, lim, s.Engine.Policy.Guard),
		InputSchema: json.RawMessage(executeSchema("python", lim)),
		Annotations: &sdk.ToolAnnotations{OpenWorldHint: ptr(false)},
	}, s.guarded("execute", s.handleExecute("execute", "python")))
	srv.AddTool(&sdk.Tool{
		Name:        "call_tool_chain",
		Title:       "Run code that chains tool calls",
		Description: executeDescription("typescript", toolsAPI, lim, s.Engine.Policy.Guard),
		InputSchema: json.RawMessage(executeSchema("typescript", lim)),
		Annotations: &sdk.ToolAnnotations{OpenWorldHint: ptr(false)},
	}, s.guarded("call_tool_chain", s.handleExecute("call_tool_chain", "typescript")))
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
		return h(ctx, req)
	}
}

// Run serves MCP over stdin and stdout until the client goes away or ctx
// ends.
func (s *Server) Run(ctx context.Context) error {
	return s.RunIO(ctx, os.Stdin, os.Stdout)
}

// MaxMessage bounds one JSON-RPC message from a client, over stdio (a line)
// and over HTTP (a request body): past it, the message gets a JSON-RPC
// error (-32600) over stdio and 413 over HTTP, and the server goes on. A
// program's code is far smaller (the code-size limit), and a bound keeps a
// client from making codecell hold what it sends.
const MaxMessage = 4 << 20

// RunIO serves MCP over newline-delimited JSON-RPC on in and out. A line
// that is not a JSON-RPC message, or that is over MaxMessage, gets an error
// response from here and never reaches the SDK, whose stdio transport would
// end the whole session over it: a client's bad line must not take the
// server down.
func (s *Server) RunIO(ctx context.Context, in io.Reader, out io.Writer) error {
	w := &lineWriter{w: out}
	pr, pw := io.Pipe()
	go func() {
		err := filterLines(in, pw, w)
		// The client is gone: so are its executions.
		s.inflight.cancel(func(inflightRun) bool { return true })
		pw.CloseWithError(err)
	}()
	// Every line that reaches the SDK is at most MaxMessage long; its own
	// bound, which ends the session, is never reached.
	return s.New(ctx).Run(ctx, &sdk.IOTransport{Reader: pr, Writer: w, MaxLineLength: 2 * MaxMessage})
}

// filterLines passes on the lines of in that are JSON-RPC messages, and
// answers the others with a JSON-RPC error. It holds at most MaxMessage
// bytes of a line: a longer one is read to its end and dropped.
func filterLines(in io.Reader, good io.Writer, errs io.Writer) error {
	lr := &lineReader{r: bufio.NewReaderSize(in, 64<<10), max: MaxMessage}
	for {
		line, tooLong, err := lr.next()
		var reply []byte
		switch {
		case tooLong:
			reply = errorReply(-32600, idOf(line), fmt.Sprintf("invalid request: the message is over the %d MiB limit of one message", MaxMessage>>20))
		case len(bytes.TrimSpace(line)) > 0:
			reply = checkMessage(line)
			if reply == nil {
				// The write returns once the line is read: lr may reuse it.
				if _, werr := good.Write(line); werr != nil {
					return werr
				}
			}
		}
		if reply != nil {
			if _, werr := errs.Write(reply); werr != nil {
				return werr
			}
		}
		if err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
	}
}

// lineReader reads lines of at most max bytes into one buffer, reused from
// line to line.
type lineReader struct {
	r   *bufio.Reader
	max int
	buf []byte
}

// next reads one line, with its newline; it is valid until the next call.
// A line over max bytes is read to its end but not kept: next returns its
// first bytes, for its id, and tooLong.
func (lr *lineReader) next() (line []byte, tooLong bool, err error) {
	line = lr.buf[:0]
	defer func() { lr.buf = line[:0] }()
	for {
		chunk, err := lr.r.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) <= lr.max {
				if len(line)+len(chunk) > cap(line) {
					// Double, rather than append's slower growth for large
					// slices: less garbage on the way to a long line.
					grown := make([]byte, len(line), min(max(2*cap(line), len(line)+len(chunk)), lr.max))
					copy(grown, line)
					line = grown
				}
				line = append(line, chunk...)
			} else {
				tooLong = true
				line = append(line[:min(len(line), idPrefix)], chunk[:max(0, min(len(chunk), idPrefix-len(line)))]...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return line, tooLong, err
	}
}

// idPrefix is how much of an over-long message is kept to find its id.
const idPrefix = 64 << 10

// idOf finds the top-level "id" of a JSON-RPC message from its first bytes,
// or returns nil: a message cut short can still be answered by its id when
// the id comes before the cut, as clients write it.
func idOf(prefix []byte) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(prefix))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil
		}
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil
		}
		if key == "id" {
			if v := bytes.TrimSpace(value); len(v) > 0 && (v[0] == '"' || v[0] == '-' || v[0] >= '0' && v[0] <= '9') {
				return v
			}
			return nil
		}
	}
	return nil
}

// errorReply is a JSON-RPC error response, as one line.
func errorReply(code int, id json.RawMessage, text string) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": text}})
	return append(b, '\n')
}

// checkMessage returns the error response for a line that is not a
// JSON-RPC 2.0 message, or nil.
func checkMessage(line []byte) []byte {
	var msg struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Result  json.RawMessage `json:"result"`
		Error   json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(line, &msg); err != nil {
		return errorReply(-32700, nil, "parse error: the line is not a JSON object: "+err.Error())
	}
	if msg.JSONRPC != "2.0" || (msg.Method == "" && msg.Result == nil && msg.Error == nil) {
		return errorReply(-32600, msg.ID, `invalid request: a JSON-RPC 2.0 message has "jsonrpc": "2.0" and a method (or a result)`)
	}
	return nil
}

// lineWriter writes whole lines at a time: the SDK's messages and the
// filter's error responses never interleave.
type lineWriter struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	if i := bytes.LastIndexByte(l.buf, '\n'); i >= 0 {
		if _, err := l.w.Write(l.buf[:i+1]); err != nil {
			return 0, err
		}
		l.buf = append(l.buf[:0], l.buf[i+1:]...)
	}
	return len(p), nil
}

func (l *lineWriter) Close() error { return nil }

// HTTPHandler serves MCP over streamable HTTP. A client that drops its
// request, or ends its session, cancels the calls it made: their programs
// are killed and cleaned up.
//
// Each MCP session holds memory until it ends: sessions idle for
// HTTPSessionIdle are closed, and at most MaxHTTPSessions are open at once,
// so that no client grows the server without bound by opening sessions.
//
// The handler authenticates no one: the principal of a request is the one
// its context carries (session.WithPrincipal), put there by the
// authentication in front of it, such as codecell serve's; a request that
// carries none is session.Local's. An MCP session opened by a request that
// presents a bearer token is bound to its principal: a request of another's
// that names it is refused (403), and cannot end its calls.
func (s *Server) HTTPHandler(ctx context.Context) http.Handler {
	srv := s.New(ctx)
	idle := s.HTTPSessionIdle
	if idle <= 0 {
		idle = DefaultHTTPSessionIdle
	}
	maxSessions := s.MaxHTTPSessions
	if maxSessions <= 0 {
		maxSessions = DefaultMaxHTTPSessions
	}
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, &sdk.StreamableHTTPOptions{
		Logger:                       s.Logger,
		PropagateRequestCancellation: true,
		// The same bound as a line over stdio; past it, 413.
		MaxRequestBodyBytes:        MaxMessage,
		SessionTimeout:             idle,
		DisableLocalhostProtection: s.HostChecked,
	})
	// The SDK binds an MCP session to the TokenInfo's UserID of the request
	// that opened it, and hands the TokenInfo to tool handlers; only its
	// bearer-token middleware puts one in a request. Its verifier trusts
	// the principal already found: the token was checked in front.
	bound := auth.RequireBearerToken(func(_ context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		p := csession.PrincipalFrom(r.Context())
		if p == nil {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: p.Name, Extra: map[string]any{principalKey: p}}, nil
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h)
	var next atomic.Int64
	var opened openSessions
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") == "" {
			// The whole body is read here (the SDK would read it anyway, to
			// the same bound), so that an initialize cannot hide after
			// other fields.
			body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxMessage))
			if err != nil {
				status := http.StatusBadRequest
				var tooLarge *http.MaxBytesError
				if errors.As(err, &tooLarge) {
					status = http.StatusRequestEntityTooLarge
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(status)
				_, _ = w.Write(errorReply(-32600, nil, fmt.Sprintf("invalid request: the body could not be read (%v); one message may be up to %d MiB", err, MaxMessage>>20)))
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			if opensSession(body) {
				if !opened.admit(srv, maxSessions) {
					w.Header().Set("Content-Type", "application/json")
					w.Header().Set("Retry-After", "10")
					w.WriteHeader(http.StatusTooManyRequests)
					_, _ = w.Write(errorReply(-32000, idOf(body), fmt.Sprintf("this server has its maximum of %d MCP sessions open: end sessions you no longer use (HTTP DELETE with their Mcp-Session-Id), or retry later; idle sessions close after %v", maxSessions, idle)))
					return
				}
				w = &sessionRecorder{ResponseWriter: w, opened: &opened}
			}
		}
		p := csession.PrincipalFrom(r.Context())
		owner := csession.LocalName
		if p != nil {
			owner = p.Name
		}
		switch r.Method {
		case http.MethodDelete:
			// Only the calls of the principal that ends the session: a
			// session id of another's ends nothing (the SDK refuses the
			// request itself).
			if id := r.Header.Get("Mcp-Session-Id"); id != "" {
				s.inflight.cancel(func(run inflightRun) bool { return run.session == id && run.owner == owner })
			}
		case http.MethodPost:
			// A header of the client's own by this name is replaced.
			tag := fmt.Sprintf("%d", next.Add(1))
			r.Header.Set(requestHeader, tag)
			stop := context.AfterFunc(r.Context(), func() {
				s.inflight.cancel(func(run inflightRun) bool { return run.request == tag })
			})
			defer stop()
		}
		if p != nil {
			// The token was checked: the SDK sees a placeholder (its
			// middleware wants one), never the token.
			r = r.Clone(r.Context())
			r.Header.Set("Authorization", "Bearer checked")
			bound.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// principalKey holds the principal in a TokenInfo's Extra.
const principalKey = "codecell.principal"

// principalOf is the principal of a tool call: the one HTTPHandler found
// for its request, else the local one (stdio, or a server with no token).
func principalOf(req *sdk.CallToolRequest) *csession.Principal {
	if req.Extra != nil && req.Extra.TokenInfo != nil {
		if p, ok := req.Extra.TokenInfo.Extra[principalKey].(*csession.Principal); ok && p != nil {
			return p
		}
		if id := req.Extra.TokenInfo.UserID; id != "" {
			return &csession.Principal{Name: id}
		}
	}
	return csession.Local()
}

const instructions = `codecell runs code in a sandbox. Instead of calling tools one by one, write one short program that calls them (code mode): use execute (Python by default) or call_tool_chain (TypeScript). Find tools with search_tools or list_tools, and their types with tools_info.`

func executeDescription(lang, toolsAPI string, lim codecell.Limits, g *codecell.GuardPolicy) string {
	var b strings.Builder
	name := map[string]string{"python": "Python", "typescript": "TypeScript"}[lang]
	fmt.Fprintf(&b, "Runs a program in a sandbox (no network; %v, %d MiB, at most %d tool calls and %d characters of code) and returns its output and its value. The language is %s unless you set language (python, javascript, typescript, bash, sh).\n\n",
		lim.Timeout, lim.Memory>>20, lim.ToolCalls, lim.CodeSize, name)
	b.WriteString("Write one program instead of many tool calls: it can call the tools below, at once where they are independent, and return only what you need.\n")
	b.WriteString("- Top-level await works. `return` at top level ends the program with a value; otherwise the value of the last expression is returned (as JSON). print / console.log go to stdout.\n")
	b.WriteString("- Python: `r = await tools.server.tool(key=value)` or `await call_tool(\"server.tool\", {...})`; several at once with `await asyncio.gather(...)`; a `-` in a name is written `_` (or `tools[\"server.get-sum\"](...)`). A failure raises ToolError (a RuntimeError) whose message is the error as JSON (`e.envelope` holds it parsed).\n")
	b.WriteString("- JavaScript/TypeScript: `await tools.server.tool({...})` or `await callTool(\"server.tool\", {...})`; at once with `await Promise.all([...])`. A failure throws an Error with `.envelope`.\n")
	b.WriteString("- Shell: `codecell-tool server.tool '{...}'` prints the result as JSON.\n")
	b.WriteString("- Files persist between calls that give the same session.\n")
	if g != nil && !g.Empty() {
		b.WriteString("- Refused before running (the error names the rule, line and column):")
		if len(g.Block) > 0 {
			fmt.Fprintf(&b, " %s;", strings.Join(g.Block, ", "))
		}
		if g.AllowedImports != nil {
			fmt.Fprintf(&b, " Python may import only %s;", strings.Join(g.AllowedImports, ", "))
		}
		if len(g.BlockedImports) > 0 {
			fmt.Fprintf(&b, " Python may not import %s;", strings.Join(g.BlockedImports, ", "))
		}
		if g.AllowedCommands != nil {
			fmt.Fprintf(&b, " shell may run only %s;", strings.Join(g.AllowedCommands, ", "))
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
	b.WriteString(toolsAPI)
	return b.String()
}

func executeSchema(lang string, lim codecell.Limits) string {
	return `{"type":"object","properties":{` +
		`"code":{"type":"string","description":"the program's source"},` +
		`"language":{"type":"string","enum":["python","javascript","typescript","bash","sh"],"default":"` + lang + `"},` +
		`"timeout_seconds":{"type":"number","minimum":0.001,"maximum":` + fmt.Sprint(maxTimeout(lim).Seconds()) + `,"description":"wall-clock limit; ` + fmt.Sprint(lim.Timeout.Seconds()) + ` by default"},` +
		`"session":{"type":"string","pattern":"^[A-Za-z0-9_-]{1,64}$","description":"a name of your choosing: programs run with the same session share their workspace's files"}` +
		`},"required":["code"]}`
}

// maxDescriptionAPI bounds the typed API in execute's description: past it,
// the description lists signatures, or only says how to find the tools.
const maxDescriptionAPI = 12_000

// toolsAPI describes the tools programs can call, for execute's
// description.
func (s *Server) toolsAPI(ctx context.Context) string {
	tools, waiting := s.tools(ctx)
	var b strings.Builder
	for _, st := range waiting {
		b.WriteString(waitingNote(st))
		b.WriteByte('\n')
	}
	if len(tools) == 0 {
		if len(waiting) == 0 {
			b.WriteString("No tools are configured: programs can compute, read and write their workspace.")
		} else {
			b.WriteString("No tools are ready yet: this description is updated when they are.")
		}
		return b.String()
	}
	if ts := tooldoc.TypeScript(tools); len(ts) <= maxDescriptionAPI {
		b.WriteString("The tools, as TypeScript declarations (the same names and params from Python):\n")
		b.WriteString(ts)
		return b.String()
	}
	var sigs strings.Builder
	for _, t := range tools {
		sigs.WriteString(tooldoc.Signature(t))
		sigs.WriteByte('\n')
	}
	if sigs.Len() <= maxDescriptionAPI {
		b.WriteString("The tools (tools_info gives their full types):\n")
		b.WriteString(sigs.String())
		return b.String()
	}
	fmt.Fprintf(&b, "%d tools are available: find them with search_tools, and their types with tools_info.", len(tools))
	return b.String()
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
			if len(env.Hints) > 0 {
				why += " (" + strings.Join(env.Hints, "; ") + ")"
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
	all, waiting := s.Engine.Tools.Available(ctx)
	var out []codecell.Tool
	for _, t := range all {
		if s.Engine.Policy.Tools.Permits(t.Name) {
			out = append(out, t)
		}
	}
	return out, waiting
}

type executeArgs struct {
	Code           string   `json:"code"`
	Language       string   `json:"language"`
	TimeoutSeconds *float64 `json:"timeout_seconds"`
	Session        string   `json:"session"`
}

// maxTimeout bounds the time limit a client may ask for, so that no client
// holds a sandbox for long: 10 minutes, or the configured limit if longer.
func maxTimeout(lim codecell.Limits) time.Duration {
	return max(10*time.Minute, lim.Timeout)
}

func (s *Server) handleExecute(name, defaultLang string) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		if name == "call_tool_chain" {
			s.Stats.Chains.Add(1)
		} else {
			s.Stats.Executions.Add(1)
		}
		p := principalOf(req)
		// The engine's line for the run says whose it is.
		ctx = csession.WithPrincipal(ctx, p)
		var args executeArgs
		if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
			return s.refusal(ctx, &codecell.Exec{}, codecell.Errorf(codecell.KindValidation, codecell.CodeInvalidRequest, "the arguments are not what %s takes: %v", name, err).WithHints(
				`send {"code": "...", "language": "python"}`)), nil
		}
		if args.Language == "" {
			args.Language = defaultLang
		}
		x := &codecell.Exec{Language: args.Language, Code: args.Code}
		refusal := func(env *codecell.Envelope) *sdk.CallToolResult { return s.refusal(ctx, x, env) }
		if t := args.TimeoutSeconds; t != nil {
			lim := s.Engine.Limits.Or(codecell.DefaultLimits)
			if top := maxTimeout(lim).Seconds(); !(*t >= 0.001 && *t <= top) {
				return refusal(codecell.Errorf(codecell.KindValidation, codecell.CodeInvalidRequest,
					"timeout_seconds is %v; it must be at least 0.001 and at most %v", *t, top).WithHints(
					fmt.Sprintf("leave timeout_seconds out for the default of %v seconds", lim.Timeout.Seconds()),
					"split long work across several runs that share a session")), nil
			}
			x.Limits.Timeout = time.Duration(*t * float64(time.Second))
		}
		// The execution also ends when its client goes away (see inflight),
		// or when its session is deleted.
		var run *csession.Run
		if args.Session != "" {
			if s.Sessions == nil {
				return refusal(codecell.Errorf(codecell.KindValidation, codecell.CodeInvalidRequest, "this server keeps no sessions").WithHints(
					"leave session out: each run gets a fresh workspace")), nil
			}
			// The caller's session of that id or name, made on first use:
			// never another principal's.
			ses, err := s.Sessions.Acquire(p, args.Session)
			if err != nil {
				return refusal(sessionRefusal(p, s.Sessions, err)), nil
			}
			// A session made over the REST API brings its tier, limits and
			// policy, which a run may only narrow.
			var env *codecell.Envelope
			if ctx, run, env = ses.Start(ctx, x); env != nil {
				return refusal(env), nil
			}
			defer run.End()
		}
		// After the session: a call that waits for its session's previous
		// program holds no slot meanwhile.
		if s.Admit != nil {
			release, refused := s.Admit(p)
			if refused != nil {
				return refusal(refused), nil
			}
			defer release()
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		inflight := inflightRun{cancel: cancel, owner: p.Name}
		if req.Session != nil {
			inflight.session = req.Session.ID()
		}
		if req.Extra != nil && req.Extra.Header != nil {
			inflight.request = req.Extra.Header.Get(requestHeader)
		}
		defer s.inflight.add(inflight)()
		res, err := s.Engine.Run(ctx, x)
		if err != nil {
			if run != nil && run.Deleted() {
				return refusal(csession.DeletedError()), nil
			}
			// The client went away: the program was killed and cleaned up.
			return nil, err
		}
		s.Stats.ToolCalls.Add(int64(len(res.ToolCalls)))
		if res.Status == codecell.StatusBlocked && res.Error != nil && res.Error.Kind == codecell.KindGuardrail {
			s.Stats.GuardrailBlocks.Add(1)
		}
		res = capped(res)
		return s.result(res, renderResult(res)), nil
	}
}

// sessionRefusal is the envelope for a session the caller cannot have.
func sessionRefusal(p *csession.Principal, store *csession.Store, err error) *codecell.Envelope {
	var env *codecell.Envelope
	switch {
	case errors.Is(err, csession.ErrPrincipalFull):
		env = codecell.Errorf(codecell.KindLimit, csession.CodeTooMany,
			"your token already holds as many sessions as it may (%d)", p.MaxSessions).WithHints(
			"run in a session you already have, or leave session out for a fresh workspace",
			"sessions you no longer use end after their idle timeout")
	case errors.Is(err, csession.ErrTooMany):
		env = codecell.Errorf(codecell.KindLimit, csession.CodeTooMany,
			"this server holds its maximum of %d sessions", store.Max()).WithHints(
			"run in a session you already have, or leave session out for a fresh workspace")
	default:
		return codecell.Errorf(codecell.KindValidation, codecell.CodeInvalidRequest, "session: %v", err).WithHints(
			"name the session with 1 to 64 letters, digits, '_' or '-'")
	}
	env.Retryable = true
	return env
}

// refusal is a program refused before it reached the Engine, as the
// Result the Engine makes of it.
func (s *Server) refusal(ctx context.Context, x *codecell.Exec, env *codecell.Envelope) *sdk.CallToolResult {
	res := s.Engine.Refuse(ctx, x, env)
	return s.result(res, renderResult(res))
}

// result is a tool result with the structured Result, the text a model
// reads, and the counters in _meta.
func (s *Server) result(structured any, text string) *sdk.CallToolResult {
	r := &sdk.CallToolResult{
		Content:           []sdk.Content{&sdk.TextContent{Text: text}},
		StructuredContent: structured,
		Meta:              sdk.Meta{"codecell": map[string]any{"stats": s.Stats.Snapshot()}},
	}
	if res, ok := structured.(*codecell.Result); ok {
		r.IsError = res.Status != codecell.StatusSuccess
		r.Meta["codecell"].(map[string]any)["run"] = map[string]any{
			"id": res.ID, "status": res.Status, "tool_calls": len(res.ToolCalls), "duration_ms": res.DurationMS, "tier": res.Tier,
		}
	}
	return r
}

// Sizes of what a model reads, in the text and in the structured Result
// alike: a client may put either in front of the model, so neither carries
// more than the other.
const (
	textStdout = 20_000
	textStderr = 10_000
)

// capped is res as an MCP result carries it: stdout and stderr kept to
// their first and last characters, the value dropped when it is larger than
// stdout may be, each with a warning that says what was left out and where
// the rest is.
func capped(res *codecell.Result) *codecell.Result {
	c := *res
	c.Warnings = append([]string{}, res.Warnings...)
	if n := utf8.RuneCountInString(c.Stdout); n > textStdout {
		c.Stdout, c.StdoutTruncated = clip(c.Stdout, textStdout), true
		c.Warnings = append(c.Warnings, fmt.Sprintf("stdout was %d characters; this result carries the first %d and the last %d: print less, or write the output to a file in a session's workspace", n, textStdout*4/5, textStdout/5))
	}
	if n := utf8.RuneCountInString(c.Stderr); n > textStderr {
		c.Stderr, c.StderrTruncated = clip(c.Stderr, textStderr), true
		c.Warnings = append(c.Warnings, fmt.Sprintf("stderr was %d characters; this result carries the first %d and the last %d", n, textStderr*4/5, textStderr/5))
	}
	if n := len(c.Value); n > textStdout {
		c.Value = nil
		c.Warnings = append(c.Warnings, fmt.Sprintf("the value was %d bytes of JSON; this result carries at most %d: return less, or write it to a file in a session's workspace", n, textStdout))
	}
	return &c
}

// renderResult writes a Result as a model reads it best: what happened
// first, then the value, the output, the error and what to do.
func renderResult(res *codecell.Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "status: %s", res.Status)
	if res.ExitCode >= 0 {
		fmt.Fprintf(&b, " (exit code %d)", res.ExitCode)
	}
	if res.Tier != "" {
		fmt.Fprintf(&b, ", %d ms, tier %s", res.DurationMS, res.Tier)
	}
	b.WriteByte('\n')
	if len(res.Value) > 0 {
		fmt.Fprintf(&b, "value: %s\n", res.Value)
	}
	if res.Stdout != "" {
		fmt.Fprintf(&b, "stdout:%s\n%s\n", truncatedNote(res.StdoutTruncated), clip(strings.TrimRight(res.Stdout, "\n"), textStdout))
	}
	if res.Stderr != "" {
		fmt.Fprintf(&b, "stderr:%s\n%s\n", truncatedNote(res.StderrTruncated), clip(strings.TrimRight(res.Stderr, "\n"), textStderr))
	}
	if e := res.Error; e != nil {
		fmt.Fprintf(&b, "error: %s: %s\n", e.Code, e.Message)
		for _, h := range e.Hints {
			fmt.Fprintf(&b, "hint: %s\n", h)
		}
	}
	if n := len(res.ToolCalls); n > 0 {
		var calls []string
		for _, c := range res.ToolCalls {
			outcome := "ok"
			if !c.OK {
				outcome = c.ErrorCode
			}
			calls = append(calls, fmt.Sprintf("%s %s", c.Name, outcome))
		}
		fmt.Fprintf(&b, "tool calls (%d): %s\n", n, strings.Join(calls, ", "))
	}
	for _, f := range res.Files {
		fmt.Fprintf(&b, "file %s: %s (%d bytes)\n", f.Change, f.Path, f.Size)
	}
	for _, w := range res.Warnings {
		fmt.Fprintf(&b, "warning: %s\n", w)
	}
	return strings.TrimRight(b.String(), "\n")
}

func truncatedNote(truncated bool) string {
	if truncated {
		return " (truncated at the output limit)"
	}
	return ""
}

// clip keeps the first and last parts of a long text.
func clip(s string, max int) string {
	r := []rune(s)
	if len(r) <= max {
		return s
	}
	head, tail := max*4/5, max/5
	return string(r[:head]) + fmt.Sprintf("\n[… %d characters left out here …]\n", len(r)-head-tail) + string(r[len(r)-tail:])
}

type toolSummary struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Signature   string `json:"signature"`
}

func summary(t codecell.Tool) toolSummary {
	return toolSummary{Name: t.Name, Description: firstLine(t.Description), Signature: tooldoc.Signature(t)}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

func (s *Server) handleSearch(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	s.Stats.Searches.Add(1)
	var args struct {
		Query string `json:"query"`
		Limit int    `json:"limit"`
	}
	if err := json.Unmarshal(req.Params.Arguments, &args); err != nil || strings.TrimSpace(args.Query) == "" {
		return toolError(`search_tools needs {"query": "words"}`), nil
	}
	if args.Limit <= 0 || args.Limit > 50 {
		args.Limit = 10
	}
	tools, waiting := s.tools(ctx)
	found := Search(tools, args.Query, args.Limit)
	out := struct {
		Tools []toolSummary `json:"tools"`
		Total int           `json:"total"`
	}{Tools: []toolSummary{}, Total: len(tools)}
	var b strings.Builder
	for _, t := range found {
		out.Tools = append(out.Tools, summary(t))
		fmt.Fprintf(&b, "%s — %s\n  %s\n", t.Name, firstLine(t.Description), tooldoc.Signature(t))
	}
	if len(found) == 0 {
		fmt.Fprintf(&b, "No tool matches %q among %d tools; list_tools lists them all.\n", args.Query, len(tools))
	}
	for _, st := range waiting {
		fmt.Fprintf(&b, "%s\n", waitingNote(st))
	}
	return s.result(out, strings.TrimRight(b.String(), "\n")), nil
}

// Search ranks tools by how well their names, descriptions and params
// match the query's words: a word in the name counts most, the start of a
// word in the name next, then a param's name, and a word in the
// description or a param's description least. Ties go by name.
func Search(tools []codecell.Tool, query string, limit int) []codecell.Tool {
	terms := words(query)
	type scored struct {
		t     codecell.Tool
		score int
	}
	var hits []scored
	for _, t := range tools {
		name, desc := words(t.Name), words(t.Description)
		params, paramDesc := paramWords(t.InputSchema)
		desc = append(desc, paramDesc...)
		score := 0
		for _, q := range terms {
			for _, w := range name {
				switch {
				case w == q:
					score += 6
				case strings.HasPrefix(w, q) || strings.HasPrefix(q, w) && len(w) >= 3:
					score += 3
				}
			}
			for _, w := range params {
				if w == q || len(q) >= 3 && strings.HasPrefix(w, q) {
					score += 2
				}
			}
			for _, w := range desc {
				if w == q || len(q) >= 4 && strings.HasPrefix(w, q) {
					score++
				}
			}
		}
		if score > 0 {
			hits = append(hits, scored{t, score})
		}
	}
	sort.SliceStable(hits, func(i, j int) bool {
		if hits[i].score != hits[j].score {
			return hits[i].score > hits[j].score
		}
		return hits[i].t.Name < hits[j].t.Name
	})
	out := make([]codecell.Tool, 0, min(limit, len(hits)))
	for i := 0; i < len(hits) && i < limit; i++ {
		out = append(out, hits[i].t)
	}
	return out
}

// paramWords returns the words of a tool's params' names, and of their
// descriptions, from its input schema's top-level properties.
func paramWords(schema json.RawMessage) (names, descs []string) {
	var s struct {
		Properties map[string]struct {
			Description string `json:"description"`
			Title       string `json:"title"`
		} `json:"properties"`
	}
	if len(schema) == 0 || json.Unmarshal(schema, &s) != nil {
		return nil, nil
	}
	for k, p := range s.Properties {
		names = append(names, words(k)...)
		descs = append(descs, words(p.Description)...)
		descs = append(descs, words(p.Title)...)
	}
	return names, descs
}

// words splits text into lowercase words, at anything that is not a letter
// or a digit, and at camelCase boundaries.
func words(s string) []string {
	var out []string
	var cur []rune
	flush := func() {
		if len(cur) > 1 {
			out = append(out, strings.ToLower(string(cur)))
		}
		cur = cur[:0]
	}
	prev := rune(0)
	for _, r := range s {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if unicode.IsUpper(r) && unicode.IsLower(prev) {
				flush()
			}
			cur = append(cur, r)
		default:
			flush()
		}
		prev = r
	}
	flush()
	return out
}

func (s *Server) handleList(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	s.Stats.Discovery.Add(1)
	var args struct {
		Server string `json:"server"`
	}
	_ = json.Unmarshal(req.Params.Arguments, &args)
	tools, waiting := s.tools(ctx)
	out := struct {
		Tools       []toolSummary `json:"tools"`
		Unavailable []string      `json:"unavailable,omitempty"`
	}{Tools: []toolSummary{}}
	var b strings.Builder
	for _, t := range tools {
		if args.Server != "" && !strings.HasPrefix(t.Name, args.Server+".") {
			continue
		}
		out.Tools = append(out.Tools, summary(t))
		fmt.Fprintf(&b, "%s — %s\n", t.Name, firstLine(t.Description))
	}
	for _, st := range waiting {
		if args.Server != "" && st.Name != args.Server {
			continue
		}
		note := waitingNote(st)
		out.Unavailable = append(out.Unavailable, strings.TrimSuffix(strings.TrimPrefix(note, "("), ")"))
		fmt.Fprintf(&b, "%s\n", note)
	}
	if len(out.Tools) == 0 {
		b.WriteString("No tools.")
	}
	return s.result(out, strings.TrimRight(b.String(), "\n")), nil
}

type toolInfo struct {
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	Signature    string          `json:"signature,omitempty"`
	TypeScript   string          `json:"typescript,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema,omitempty"`
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
	Error        string          `json:"error,omitempty"`
}

func (s *Server) handleInfo(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	s.Stats.Discovery.Add(1)
	var args struct {
		Names []string `json:"names"`
	}
	if err := json.Unmarshal(req.Params.Arguments, &args); err != nil || len(args.Names) == 0 {
		return toolError(`tools_info needs {"names": ["server.tool", ...]}`), nil
	}
	tools, waiting := s.tools(ctx)
	byName := map[string]codecell.Tool{}
	var names []string
	for _, t := range tools {
		byName[t.Name] = t
		names = append(names, t.Name)
	}
	out := struct {
		Tools []toolInfo `json:"tools"`
	}{}
	var b strings.Builder
	for _, n := range args.Names {
		t, ok := byName[n]
		if !ok {
			msg := notFound(n, names, waiting)
			out.Tools = append(out.Tools, toolInfo{Name: n, Error: msg})
			fmt.Fprintf(&b, "%s\n\n", msg)
			continue
		}
		ts := tooldoc.TypeScript([]codecell.Tool{t})
		out.Tools = append(out.Tools, toolInfo{Name: t.Name, Description: t.Description, Signature: tooldoc.Signature(t),
			TypeScript: ts, InputSchema: t.InputSchema, OutputSchema: t.OutputSchema})
		fmt.Fprintf(&b, "%s\n%s\n", t.Name, ts)
	}
	return s.result(out, strings.TrimRight(b.String(), "\n")), nil
}

func (s *Server) handleRequiredKeys(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	s.Stats.Discovery.Add(1)
	var args struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(req.Params.Arguments, &args); err != nil || args.Name == "" {
		return toolError(`get_required_keys_for_tool needs {"name": "server.tool"}`), nil
	}
	tools, waiting := s.tools(ctx)
	var names []string
	for _, t := range tools {
		names = append(names, t.Name)
		if t.Name != args.Name {
			continue
		}
		var schema struct {
			Required   []string                   `json:"required"`
			Properties map[string]json.RawMessage `json:"properties"`
		}
		_ = json.Unmarshal(t.InputSchema, &schema)
		out := struct {
			Name     string   `json:"name"`
			Required []string `json:"required"`
			Optional []string `json:"optional"`
		}{Name: t.Name, Required: []string{}, Optional: []string{}}
		required := map[string]bool{}
		for _, k := range schema.Required {
			required[k] = true
			out.Required = append(out.Required, k)
		}
		for k := range schema.Properties {
			if !required[k] {
				out.Optional = append(out.Optional, k)
			}
		}
		sort.Strings(out.Optional)
		text := fmt.Sprintf("%s requires: %s; may have: %s", t.Name, orNone(out.Required), orNone(out.Optional))
		return s.result(out, text), nil
	}
	return toolError(notFound(args.Name, names, waiting)), nil
}

// notFound says that no ready tool has the name: a near name, or that the
// server it names is not ready.
func notFound(name string, names []string, waiting []codecell.SourceStatus) string {
	server, _, _ := strings.Cut(name, ".")
	for _, st := range waiting {
		if st.Name == server {
			return fmt.Sprintf("%s is not known yet: %s", name, strings.TrimSuffix(strings.TrimPrefix(waitingNote(st), "("), ")"))
		}
	}
	msg := fmt.Sprintf("no tool named %q", name)
	if near := codecell.Suggest(name, names); near != "" {
		msg += fmt.Sprintf("; did you mean %q?", near)
	}
	return msg
}

func orNone(keys []string) string {
	if len(keys) == 0 {
		return "nothing"
	}
	return strings.Join(keys, ", ")
}

// toolError is a discovery tool's failure: a message for the model.
func toolError(msg string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: msg}}, IsError: true}
}

func ptr[T any](v T) *T { return &v }
