package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/api"
)

const (
	// DefaultCallTimeout bounds a call or a listing whose context has no
	// deadline. The host normally passes one per call.
	DefaultCallTimeout = 60 * time.Second
	// DefaultStartTimeout bounds starting a server and its MCP handshake
	// when its entry sets no start_timeout (api.DefaultMCPStartTimeout).
	DefaultStartTimeout = api.DefaultMCPStartTimeout

	// stopGrace is how long a stdio server has to exit once its stdin is
	// closed, and again once it was sent SIGTERM, before it is killed.
	stopGrace = 2 * time.Second
	// probeTimeout bounds the ping that checks a server after a call of it
	// timed out.
	probeTimeout = 5 * time.Second
	// discoverTimeout bounds the server/discover request the SDK sends
	// before initialize (SEP-2575). A server that knows the method answers
	// at once, one that does not should answer "method not found" at once;
	// but some ignore methods they do not know, and the SDK would wait for
	// them with the whole start timeout, leaving initialize none. On a
	// timeout the SDK falls back to initialize, as for any error.
	discoverTimeout = 5 * time.Second
	// maxErrorText bounds the server's words copied into an envelope.
	maxErrorText = 4 << 10
)

// Option configures an Upstream.
type Option func(*Upstream)

// WithLogger sets where the Upstream logs its starts, losses and restarts,
// and (at debug level) the lines a stdio server writes to stderr. The
// default discards them.
func WithLogger(l *slog.Logger) Option {
	return func(u *Upstream) {
		if l != nil {
			u.log = l
		}
	}
}

// WithCallTimeout sets the time limit of a call (or listing) whose context
// has no deadline; DefaultCallTimeout if not set, none if d <= 0.
func WithCallTimeout(d time.Duration) Option {
	return func(u *Upstream) { u.callTimeout = d }
}

// WithStartTimeout sets the time limit of starting the server and the MCP
// handshake; DefaultStartTimeout if not set.
func WithStartTimeout(d time.Duration) Option {
	return func(u *Upstream) {
		if d > 0 {
			u.startTimeout = d
		}
	}
}

// Upstream is one upstream MCP server, as a codecell.ToolSource. It connects
// on first use, keeps the session, and connects again after the server
// crashed or the connection broke; it never panics or takes the process
// down. It is safe for concurrent use, and calls run concurrently on one
// session.
type Upstream struct {
	name         string
	cfg          ServerConfig
	log          *slog.Logger
	callTimeout  time.Duration
	startTimeout time.Duration
	// discoverTimeout bounds server/discover within the start.
	discoverTimeout time.Duration

	// stop is cancelled by Close: it ends a start or a probe in progress.
	stop       context.Context
	cancelStop context.CancelFunc

	mu       sync.Mutex
	cur      *session // the live session, or nil
	starting *start   // the start in progress, or nil
	closed   bool
	bg       sync.WaitGroup // starts, probes and closes running in the background
	// status is the state Status reports: it changes under mu, and the
	// watchers hear of it after mu is released.
	status codecell.SourceStatus

	watchMu  sync.Mutex
	watchers map[int]func()
	nextW    int

	changes changeLog
}

// changeLog holds the log to a line a second of a server's tools changing:
// a server may say so as often as it likes, and each line would be logged.
type changeLog struct {
	mu    sync.Mutex
	last  time.Time
	quiet int // changes not logged since the last line
}

func (c *changeLog) note(log *slog.Logger) {
	c.mu.Lock()
	now := time.Now()
	if !c.last.IsZero() && now.Sub(c.last) < time.Second {
		c.quiet++
		c.mu.Unlock()
		return
	}
	quiet := c.quiet
	c.last, c.quiet = now, 0
	c.mu.Unlock()
	if quiet > 0 {
		log.Info("MCP server's tools changed", "changes_not_logged_since_the_last_line", quiet)
		return
	}
	log.Info("MCP server's tools changed")
}

var _ codecell.StartingSource = (*Upstream)(nil)

// NewUpstream returns the upstream server name declared by cfg. Nothing is
// started or checked until the first Tools or Call; a config that is not
// valid is reported then, as an envelope.
func NewUpstream(name string, cfg ServerConfig, opts ...Option) *Upstream {
	u := &Upstream{
		name:            name,
		cfg:             cfg,
		log:             slog.New(slog.DiscardHandler),
		callTimeout:     DefaultCallTimeout,
		startTimeout:    DefaultStartTimeout,
		discoverTimeout: discoverTimeout,
	}
	if cfg.StartTimeout > 0 {
		u.startTimeout = time.Duration(cfg.StartTimeout)
	}
	for _, o := range opts {
		o(u)
	}
	u.log = u.log.With("mcp_server", name)
	u.stop, u.cancelStop = context.WithCancel(context.Background())
	u.status = codecell.SourceStatus{Name: name, State: codecell.SourceIdle, Since: time.Now()}
	return u
}

// Start starts the server in the background, if it is not running or
// starting, and returns at once: a client of codecell need not wait for
// every upstream server before it can start work. Status says how far it
// got, and Watch hears when it is ready.
func (u *Upstream) Start() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed || u.starting != nil || (u.cur != nil && !u.cur.gone.Load()) {
		return
	}
	u.startLocked()
}

// Status says whether the server is starting, ready (its tools listed),
// failed (and why), or not started. It never waits.
func (u *Upstream) Status() codecell.SourceStatus {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.status
}

// Watch calls f after each change of the server's state, and after the
// server says its tools changed, until stop is called.
func (u *Upstream) Watch(f func()) (stop func()) {
	u.watchMu.Lock()
	defer u.watchMu.Unlock()
	if u.watchers == nil {
		u.watchers = map[int]func(){}
	}
	id := u.nextW
	u.nextW++
	u.watchers[id] = f
	return func() {
		u.watchMu.Lock()
		defer u.watchMu.Unlock()
		delete(u.watchers, id)
	}
}

// setStatusLocked records a new state; the caller holds mu, and calls
// notify once it has released it.
func (u *Upstream) setStatusLocked(state codecell.SourceState, err error) {
	u.status = codecell.SourceStatus{Name: u.name, State: state, Err: err, Since: time.Now()}
}

// notify tells the watchers that the state or the tools changed.
func (u *Upstream) notify() {
	u.watchMu.Lock()
	fs := make([]func(), 0, len(u.watchers))
	for _, f := range u.watchers {
		fs = append(fs, f)
	}
	u.watchMu.Unlock()
	for _, f := range fs {
		f()
	}
}

// Name is the server's name in mcpServers, the prefix of its tools.
func (u *Upstream) Name() string { return u.name }

// Tools lists the server's tools, starting it if it is not running. The
// list is kept until the server says it changed
// (notifications/tools/list_changed) or the session is replaced. Each
// Tool's Name is the server's own name for it; its schemas and
// description are the server's. The error is an *codecell.Envelope.
func (u *Upstream) Tools(ctx context.Context) ([]codecell.Tool, error) {
	for attempt := 0; ; attempt++ {
		// A start is bounded by the server's start timeout, the listing
		// by the call timeout: a server slower to start than a call may
		// take is waited for, and one that does not start is said to
		// have missed its start timeout.
		s, err := u.session(ctx)
		if err != nil {
			return nil, err
		}
		lctx, cancel := u.withDefaultTimeout(ctx)
		tools, err := s.listTools(lctx)
		if err == nil {
			cancel()
			return tools, nil
		}
		env, lost := u.failure(lctx, s, "tools/list", err, time.Time{})
		// Listing is safe to repeat: a session found broken is replaced once.
		again := lost && attempt == 0 && lctx.Err() == nil
		cancel()
		if again {
			continue
		}
		return nil, env
	}
}

// Close ends the session and, for a stdio server, the server process and
// every process of its process group: stdin is closed, then SIGTERM and
// SIGKILL follow at intervals of two seconds. Calls in flight end with the
// server (the SDK waits for them, so after five seconds the process group
// is killed). Calls made after Close fail. The error says that a process
// could not be stopped.
func (u *Upstream) Close() error {
	u.mu.Lock()
	if u.closed {
		u.mu.Unlock()
		return nil
	}
	u.closed = true
	s := u.cur
	u.cur = nil
	u.setStatusLocked(codecell.SourceClosed, nil)
	u.mu.Unlock()
	u.notify()
	u.cancelStop()
	var err error
	if s != nil {
		err = s.close()
	}
	u.bg.Wait()
	return err
}

// call calls the server's tool with the program's params. See the package
// doc for what it returns.
func (u *Upstream) call(ctx context.Context, tool string, params json.RawMessage) (json.RawMessage, error) {
	args, env := callArguments(u.name, tool, params)
	if env != nil {
		return nil, env
	}
	ctx, cancel := u.withDefaultTimeout(ctx)
	defer cancel()
	began := time.Now()
	for attempt := 0; ; attempt++ {
		s, err := u.session(ctx)
		if err != nil {
			return nil, err
		}
		res, err := s.cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
		if err == nil {
			return u.result(tool, res)
		}
		// Two errors say the tool did not run, so that sending the call
		// again on a new session cannot run it twice: ErrConnectionClosed,
		// the request was refused before it was written (the session was
		// closing, or its reader had stopped), and ErrSessionMissing, an
		// HTTP server that was restarted answered 404 for the old session.
		// Any other failure may have reached the tool.
		if (errors.Is(err, sdk.ErrConnectionClosed) || errors.Is(err, sdk.ErrSessionMissing)) && attempt == 0 && ctx.Err() == nil {
			u.drop(s, err, false)
			continue
		}
		env, _ := u.failure(ctx, s, u.name+"."+tool, err, began)
		return nil, env
	}
}

// withDefaultTimeout bounds a call or listing by the call timeout when ctx
// has no deadline. Either way the context it returns is cancelled when the
// request is done: the SDK, after an HTTP server's answer it gave up on
// (an event that never ends), reads the rest of the stream to discard it
// until the request's context ends.
func (u *Upstream) withDefaultTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok || u.callTimeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, u.callTimeout)
}

// callArguments checks that the params are a JSON object, as MCP requires
// of a tool's arguments.
func callArguments(server, tool string, params json.RawMessage) (json.RawMessage, *codecell.Envelope) {
	trimmed := bytes.TrimSpace(params)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return json.RawMessage("{}"), nil
	}
	if trimmed[0] != '{' || !json.Valid(trimmed) {
		return nil, codecell.Errorf(codecell.KindValidation, codecell.CodeToolBadParams,
			"the params of %s.%s must be a JSON object", server, tool).WithHints(
			"pass an object whose fields the tool's input schema names, such as {\"query\": \"...\"}")
	}
	return json.RawMessage(trimmed), nil
}

// result turns a tool's result into the program's value, or into a
// TOOL_FAILED envelope when the tool reported an error.
func (u *Upstream) result(tool string, res *sdk.CallToolResult) (json.RawMessage, error) {
	if res.IsError {
		text := truncate(contentText(res.Content), maxErrorText)
		if text == "" {
			text = fmt.Sprintf("%s.%s failed, and its error result holds no text", u.name, tool)
		}
		env := codecell.Errorf(codecell.KindTool, codecell.CodeToolFailed, "%s", text)
		env.Meta = map[string]any{"server": u.name, "tool": tool}
		return nil, env
	}
	var v any
	switch {
	case res.StructuredContent != nil:
		v = res.StructuredContent
	case len(res.Content) == 0:
		return json.RawMessage("null"), nil
	case allText(res.Content):
		v = contentText(res.Content)
	default:
		v = res.Content
	}
	b, err := marshal(v)
	if err != nil {
		return nil, codecell.Errorf(codecell.KindUpstream, codecell.CodeUpstreamError,
			"the result of %s.%s cannot be encoded as JSON: %v", u.name, tool, err)
	}
	return b, nil
}

func allText(content []sdk.Content) bool {
	for _, c := range content {
		if _, ok := c.(*sdk.TextContent); !ok {
			return false
		}
	}
	return true
}

// contentText joins the text items of content with newlines.
func contentText(content []sdk.Content) string {
	var texts []string
	for _, c := range content {
		if t, ok := c.(*sdk.TextContent); ok {
			texts = append(texts, t.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// marshal is json.Marshal without escaping <, > and &: the value goes to a
// program, not into HTML.
func marshal(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// truncate cuts s to at most n bytes, on a character boundary, and says so.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("… [%d more bytes]", len(s)-cut)
}

// failure turns an error of the SDK into an envelope, and drops the session
// when the error says it is broken (lost is then true). what names the
// request, such as "github.search" or "tools/list"; began is when a call
// began (zero for a listing).
func (u *Upstream) failure(ctx context.Context, s *session, what string, err error, began time.Time) (env *codecell.Envelope, lost bool) {
	var rpcErr *jsonrpc.Error
	switch {
	case ctx.Err() != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)):
		// The SDK has sent notifications/cancelled. A slow tool is no
		// reason to restart a server that other calls may be using; a hung
		// server is, and the probe tells one from the other.
		u.probe(s)
		if errors.Is(err, context.Canceled) {
			env = codecell.Errorf(codecell.KindTimeout, codecell.CodeToolTimeout,
				"%s was cancelled before MCP server %q answered", what, u.name)
		} else {
			env = codecell.Errorf(codecell.KindTimeout, codecell.CodeToolTimeout,
				"%s did not answer in time%s; the request was cancelled on MCP server %q", what, elapsed(began), u.name).WithHints(
				"try again with less work per call, or later: the server keeps running")
		}
		env.Retryable = true
		return env, false
	case !errors.Is(err, sdk.ErrConnectionClosed) && errors.As(err, &rpcErr) && !localRPCError(rpcErr):
		// The server answered, with an error: the session is fine.
		env = codecell.Errorf(codecell.KindUpstream, codecell.CodeUpstreamError,
			"MCP server %q refused %s: %s (JSON-RPC error %d)", u.name, what, truncate(rpcErr.Message, maxErrorText), rpcErr.Code)
		switch rpcErr.Code {
		case jsonrpc.CodeInvalidParams:
			env.WithHints("check the params (and the tool's name) against the tool's input schema: `codecell tools`")
		case jsonrpc.CodeInternalError:
			env.Retryable = true
			env.WithHints("the server failed inside; trying again may work")
		}
		return env, false
	}
	u.drop(s, err, false)
	if s.cmd != nil {
		// A server that crashed is reaped within moments; its exit status
		// and last words are worth that wait.
		select {
		case <-s.ended:
		case <-time.After(500 * time.Millisecond):
		}
	}
	if exit := s.exitError(); exit != nil {
		env = codecell.Errorf(codecell.KindUpstream, codecell.CodeUpstreamUnavailable,
			"the session with MCP server %q ended during %s (%v)%s", u.name, what, exit, s.stderrSuffix())
	} else {
		env = codecell.Errorf(codecell.KindUpstream, codecell.CodeUpstreamUnavailable,
			"the connection to MCP server %q broke during %s: %s%s", u.name, what, s.redact(err.Error()), s.stderrSuffix())
	}
	env.WithHints("try again: the server is started again on the next call")
	env.Retryable = true
	return env, true
}

// localRPCError reports whether a JSON-RPC error was made by the SDK for a
// connection that is closing, rather than sent by the server.
func localRPCError(e *jsonrpc.Error) bool {
	return e.Code == -32003 || e.Code == -32004 // "client is closing", "server is closing"
}

func elapsed(began time.Time) string {
	if began.IsZero() {
		return ""
	}
	return fmt.Sprintf(" (after %s)", time.Since(began).Round(time.Millisecond))
}

// session returns the live session, starting the server if there is none.
// Starts run in the background, bounded by the start timeout and not by
// ctx: a caller with a short deadline must not abort a slow first start
// (npx downloading the server) over and over again.
func (u *Upstream) session(ctx context.Context) (*session, error) {
	u.mu.Lock()
	if u.closed {
		u.mu.Unlock()
		return nil, codecell.Errorf(codecell.KindUpstream, codecell.CodeUpstreamUnavailable,
			"MCP server %q was closed: codecell is shutting down", u.name)
	}
	if s := u.cur; s != nil && !s.gone.Load() {
		u.mu.Unlock()
		return s, nil
	}
	st := u.starting
	if st == nil {
		st = u.startLocked()
	}
	u.mu.Unlock()
	select {
	case <-st.done:
		if st.err != nil {
			return nil, st.err
		}
		return st.s, nil
	case <-ctx.Done():
		env := codecell.Errorf(codecell.KindUpstream, codecell.CodeUpstreamUnavailable,
			"MCP server %q is still starting, and the call ended first (%v)", u.name, context.Cause(ctx)).WithHints(
			"try again shortly: the server keeps starting in the background")
		env.Retryable = true
		return nil, env
	}
}

type start struct {
	done chan struct{}
	s    *session
	err  *codecell.Envelope
}

// startLocked begins a start in the background; the caller holds mu.
func (u *Upstream) startLocked() *start {
	st := &start{done: make(chan struct{})}
	u.starting = st
	u.setStatusLocked(codecell.SourceStarting, nil)
	u.bg.Add(1)
	go func() {
		defer u.bg.Done()
		u.notify()
		u.start(st)
	}()
	return st
}

func (u *Upstream) start(st *start) {
	ctx, cancel := context.WithTimeout(u.stop, u.startTimeout)
	defer cancel()
	began := time.Now()
	// The log says, now and then, which server is keeping codecell waiting.
	dialed := make(chan struct{})
	go func() {
		tick := time.NewTicker(5 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-dialed:
				return
			case <-tick.C:
				u.log.Info("MCP server still starting", "for", time.Since(began).Round(time.Second).String(), "start_timeout", u.startTimeout.String())
			}
		}
	}()
	s, err := u.dial(ctx)
	close(dialed)
	if err == nil {
		// A server is ready once its tools are known: a client lists them
		// at once. A server that cannot list them is still usable by name.
		if tools, lerr := s.listTools(ctx); lerr != nil {
			u.log.Warn("MCP server started but did not list its tools", "error", s.redact(lerr.Error()))
		} else {
			u.log.Info("MCP server ready", "tools", len(tools), "after", time.Since(began).Round(time.Millisecond).String())
		}
	}
	u.mu.Lock()
	u.starting = nil
	closed := u.closed
	switch {
	case err == nil && !closed:
		u.cur = s
		u.setStatusLocked(codecell.SourceReady, nil)
	case err != nil && !closed:
		u.setStatusLocked(codecell.SourceFailed, err)
	}
	u.mu.Unlock()
	if err == nil && closed {
		s.close()
		err = codecell.Errorf(codecell.KindUpstream, codecell.CodeUpstreamUnavailable,
			"MCP server %q was closed: codecell is shutting down", u.name)
	}
	if !closed {
		u.notify()
	}
	if err == nil {
		// Notice a server that exits between calls, so that the next call
		// starts it again instead of failing first.
		go func() {
			s.endErr = s.cs.Wait()
			close(s.ended)
			u.drop(s, errors.New("the server ended the session"), false)
		}()
	}
	st.s, st.err = s, err
	close(st.done)
}

// dial starts the server, or connects to its URL, and does the MCP
// handshake.
func (u *Upstream) dial(ctx context.Context) (*session, *codecell.Envelope) {
	cfg, err := u.cfg.Expand(os.LookupEnv)
	if err == nil {
		err = cfg.Validate()
	}
	if err == nil && !api.ValidMCPServerName(u.name) {
		err = fmt.Errorf("server name %q: use 1 to 64 letters, digits, '_' and '-'", u.name)
	}
	if err != nil {
		return nil, codecell.Errorf(codecell.KindUpstream, codecell.CodeUpstreamUnavailable,
			"MCP server %q cannot be started: mcpServers.%s: %v", u.name, u.name, err).WithHints(
			"fix the server's entry in mcpServers (or codecell's environment); retrying will not help")
	}

	s := &session{up: u, redact: func(msg string) string { return msg }, ended: make(chan struct{})}
	client := sdk.NewClient(&sdk.Implementation{Name: "codecell", Version: "0"}, &sdk.ClientOptions{
		Logger: u.log,
		// No roots, sampling or elicitation: the calls come from a program,
		// with no user to ask. (Without this, the SDK advertises roots.)
		Capabilities:           &sdk.ClientCapabilities{},
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) { s.toolsChanged() },
	})
	client.AddSendingMiddleware(boundDiscovery(u.discoverTimeout))
	var transport sdk.Transport
	if cfg.URL != "" {
		httpTransport := http.DefaultTransport.(*http.Transport).Clone()
		s.closeIdle = httpTransport.CloseIdleConnections
		origin, _ := url.Parse(cfg.URL) // Validate parsed it
		transport = &sdk.StreamableClientTransport{
			Endpoint: cfg.URL,
			// Said explicitly: the SDK's streamable client takes 0 as no
			// limit, and would hold an event that never ends until memory
			// ran out. The same bound as a stdio server's line.
			MaxEventSize: sdk.DefaultMaxEventSize,
			HTTPClient: &http.Client{
				Transport:     &headerTransport{base: httpTransport, headers: cfg.Headers, host: origin.Host},
				CheckRedirect: sameOrigin(origin),
			},
		}
		// A URL may hold a secret from a ${VAR}, such as an API key in its
		// query, and the HTTP client's errors quote it: messages and logs
		// show the URL as declared.
		if cfg.URL != u.cfg.URL {
			s.redact = func(msg string) string { return strings.ReplaceAll(msg, cfg.URL, u.cfg.URL) }
		}
		u.log.Info("connecting to MCP server", "url", u.cfg.URL)
	} else {
		cmd := exec.Command(cfg.Command, cfg.Args...)
		cmd.Env = serverEnv(cfg.Env, os.LookupEnv)
		cmd.Dir = cfg.Cwd
		s.stderr = &stderrTail{log: u.log}
		cmd.Stderr = s.stderr
		// Wait returns this long after the server exited even if a process
		// it started still holds its stderr open.
		cmd.WaitDelay = stopGrace
		setProcessGroup(cmd)
		s.cmd = cmd
		transport = &sdk.CommandTransport{Command: cmd, TerminateDuration: stopGrace}
		u.log.Info("starting MCP server", "command", u.cfg.Command, "args", u.cfg.Args) // as declared: no secrets
	}
	rec := &recordingTransport{Transport: transport, cmd: s.cmd}
	// A server that has not answered by the start timeout is killed then:
	// the SDK would otherwise give it its grace periods before Connect
	// returns.
	stopKill := context.AfterFunc(ctx, rec.kill)
	cs, err := u.connect(ctx, client, rec)
	stopKill()
	if err != nil {
		// Client.Connect does not close the connection on every failure
		// path; closing it here stops and reaps the server (the SDK's
		// Close is idempotent).
		if conn := rec.connection(); conn != nil {
			closeBounded(conn.Close, s.cmd)
		}
		killProcessGroup(s.cmd)
		if s.closeIdle != nil {
			s.closeIdle()
		}
		what := "did not start"
		if cfg.URL != "" {
			what = "cannot be reached at " + u.cfg.URL
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) && u.stop.Err() == nil {
			env := codecell.Errorf(codecell.KindUpstream, codecell.CodeUpstreamUnavailable,
				"MCP server %q did not finish starting within its start timeout of %s%s", u.name, u.startTimeout, s.stderrSuffix()).WithHints(
				fmt.Sprintf("if it is only slow to start, raise \"start_timeout\" in mcpServers.%s; else check that it speaks MCP on stdin and stdout (or at its URL)", u.name),
				"a program's call of one of its tools starts it again")
			env.Retryable = true
			u.log.Warn("MCP server did not start", "error", env.Message)
			return nil, env
		}
		if u.stop.Err() != nil {
			u.log.Info("MCP server's start ended: codecell is stopping")
		} else {
			u.log.Warn("MCP server did not start", "error", s.redact(err.Error()))
		}
		env := codecell.Errorf(codecell.KindUpstream, codecell.CodeUpstreamUnavailable,
			"MCP server %q %s: %s%s", u.name, what, s.redact(err.Error()), s.stderrSuffix())
		var redirect *redirectError
		if errors.As(err, &redirect) {
			env.WithHints(fmt.Sprintf("if you trust %s, set \"url\" in mcpServers.%s to it; retrying will not help", redirect.to, u.name))
		} else if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
			env.WithHints("fix the server's \"command\" in mcpServers; retrying will not help")
		} else {
			env.Retryable = true
			env.WithHints("try again: the server is started again on the next call")
		}
		return nil, env
	}
	s.cs = cs
	attrs := []any{}
	if s.cmd != nil && s.cmd.Process != nil {
		attrs = append(attrs, "pid", s.cmd.Process.Pid)
	}
	if r := cs.InitializeResult(); r != nil {
		attrs = append(attrs, "protocol", r.ProtocolVersion)
		if r.ServerInfo != nil {
			attrs = append(attrs, "server", r.ServerInfo.Name, "version", r.ServerInfo.Version)
		}
	}
	u.log.Info("MCP server connected", attrs...)
	return s, nil
}

// connect does the MCP handshake, and returns when ctx ends even if the
// SDK's Connect has not: after a failed initialize it closes the session,
// which first waits for the notifications/cancelled it sends, up to five
// seconds to an HTTP server that holds requests open. Connect is then left
// to return in the background, and a session it made is closed.
func (u *Upstream) connect(ctx context.Context, client *sdk.Client, t sdk.Transport) (*sdk.ClientSession, error) {
	type connected struct {
		cs  *sdk.ClientSession
		err error
	}
	done := make(chan connected, 1)
	go func() {
		cs, err := client.Connect(ctx, t, nil)
		done <- connected{cs, err}
	}()
	select {
	case r := <-done:
		return r.cs, r.err
	case <-ctx.Done():
	}
	// The start that called connect is counted in bg, so Close waits for
	// this too.
	u.bg.Add(1)
	go func() {
		defer u.bg.Done()
		if r := <-done; r.cs != nil {
			r.cs.Close()
		}
	}()
	return nil, context.Cause(ctx)
}

// boundDiscovery bounds the server/discover request by d, so that a server
// that never answers it holds up the start by d only: the SDK then falls
// back to initialize with the start's own context.
func boundDiscovery(d time.Duration) sdk.Middleware {
	return func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			if method != "server/discover" || d <= 0 {
				return next(ctx, method, req)
			}
			ctx, cancel := context.WithTimeout(ctx, d)
			defer cancel()
			return next(ctx, method, req)
		}
	}
}

// drop forgets a broken session, so that the next call starts the server
// again, and closes it in the background: killed at once if hung, else
// as Close does.
func (u *Upstream) drop(s *session, why error, hung bool) {
	if !s.gone.CompareAndSwap(false, true) {
		return
	}
	u.mu.Lock()
	lost := u.cur == s
	if lost {
		u.cur = nil
	}
	closed := u.closed
	if !closed {
		u.bg.Add(1)
		if lost && u.starting == nil {
			u.setStatusLocked(codecell.SourceFailed, fmt.Errorf("the session was lost (%s); it starts again when a program calls one of its tools", s.redact(why.Error())))
		}
	}
	u.mu.Unlock()
	if closed {
		return // Close closes it
	}
	if lost {
		u.notify()
	}
	u.log.Warn("MCP server session lost; the next call starts it again", "error", s.redact(why.Error()))
	go func() {
		defer u.bg.Done()
		if hung {
			// A hung server would only sit out the grace periods.
			killProcessGroup(s.cmd)
		}
		s.close()
	}()
}

// probe pings a server one of whose calls timed out, and drops the
// session if the server does not answer: it is hung, and only a restart
// helps.
func (u *Upstream) probe(s *session) {
	if s.gone.Load() || !s.probing.CompareAndSwap(false, true) {
		return
	}
	u.mu.Lock()
	if u.closed {
		u.mu.Unlock()
		s.probing.Store(false)
		return
	}
	u.bg.Add(1)
	u.mu.Unlock()
	go func() {
		defer u.bg.Done()
		defer s.probing.Store(false)
		ctx, cancel := context.WithTimeout(u.stop, probeTimeout)
		defer cancel()
		err := s.cs.Ping(ctx, nil)
		var rpcErr *jsonrpc.Error
		if err == nil || (errors.As(err, &rpcErr) && !localRPCError(rpcErr)) {
			return // it answered
		}
		if u.stop.Err() == nil {
			u.drop(s, fmt.Errorf("the server did not answer a ping after a call timed out: %w", err), true)
		}
	}()
}

// A session is one connection to the server: for stdio, one process.
type session struct {
	up        *Upstream
	cs        *sdk.ClientSession
	cmd       *exec.Cmd   // nil for HTTP
	stderr    *stderrTail // nil for HTTP
	closeIdle func()      // nil for stdio
	redact    func(string) string

	ended     chan struct{} // closed when the session has ended and, for stdio, the server was reaped
	endErr    error         // then: for stdio, how the server exited ("exit status 3")
	gone      atomic.Bool   // dropped or closed: the next call starts anew
	probing   atomic.Bool
	closeOnce sync.Once
	closeErr  error

	toolsGen atomic.Uint64 // incremented by notifications/tools/list_changed
	toolsMu  sync.Mutex
	tools    []codecell.Tool
	toolsOK  bool
}

func (s *session) toolsChanged() {
	s.toolsGen.Add(1)
	s.toolsMu.Lock()
	s.tools, s.toolsOK = nil, false
	s.toolsMu.Unlock()
	s.up.changes.note(s.up.log)
	s.up.notify()
}

func (s *session) listTools(ctx context.Context) ([]codecell.Tool, error) {
	s.toolsMu.Lock()
	if s.toolsOK {
		tools := slices.Clone(s.tools)
		s.toolsMu.Unlock()
		return tools, nil
	}
	s.toolsMu.Unlock()

	gen := s.toolsGen.Load()
	var tools []codecell.Tool
	for t, err := range s.cs.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		tools = append(tools, s.up.tool(t))
	}
	s.toolsMu.Lock()
	// A list that crossed a list_changed notification may be stale: it is
	// returned but not kept.
	if s.toolsGen.Load() == gen {
		s.tools, s.toolsOK = tools, true
	}
	s.toolsMu.Unlock()
	return slices.Clone(tools), nil
}

// tool makes a codecell.Tool of a server's tool. Its Call goes through the
// Upstream, so that it reaches whichever session is live.
func (u *Upstream) tool(t *sdk.Tool) codecell.Tool {
	name := t.Name
	desc := t.Description
	if desc == "" {
		desc = t.Title
	}
	return codecell.Tool{
		Name:         name,
		Description:  desc,
		InputSchema:  schemaJSON(t.InputSchema),
		OutputSchema: schemaJSON(t.OutputSchema),
		Call: func(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
			return u.call(ctx, name, params)
		},
	}
}

func schemaJSON(schema any) json.RawMessage {
	if schema == nil {
		return nil
	}
	b, err := json.Marshal(schema)
	if err != nil {
		return nil
	}
	return b
}

// close ends the session and, for stdio, the process group. It is bounded
// in time: a server that ignores both stdin and SIGTERM is killed, and a
// session that still does not end is abandoned with an error.
func (s *session) close() error {
	s.closeOnce.Do(func() {
		s.gone.Store(true)
		s.closeErr = closeBounded(s.cs.Close, s.cmd)
		// Processes the server started may have outlived it.
		killProcessGroup(s.cmd)
		if s.closeIdle != nil {
			s.closeIdle()
		}
	})
	return s.closeErr
}

// closeBounded runs a close of the SDK's: for stdio, it closes stdin, waits
// stopGrace, sends SIGTERM, waits stopGrace, then SIGKILL. But it first
// waits for calls in flight to end, which a hung server never does; so after
// the SDK's own schedule the whole process group is killed, which ends them.
func closeBounded(closeFn func() error, cmd *exec.Cmd) error {
	done := make(chan error, 1)
	go func() { done <- closeFn() }()
	timer := time.NewTimer(2*stopGrace + time.Second)
	defer timer.Stop()
	select {
	case <-done:
		// The SDK's error is the server's exit status, such as "signal:
		// terminated": the stop went as designed.
		return nil
	case <-timer.C:
	}
	killProcessGroup(cmd)
	timer.Reset(stopGrace)
	select {
	case <-done:
		return nil
	case <-timer.C:
		if cmd != nil && cmd.Process != nil {
			return fmt.Errorf("MCP server process %d did not stop", cmd.Process.Pid)
		}
		return errors.New("the MCP session did not close: calls are still in flight")
	}
}

// exitError is how a stdio server exited, if it has and not cleanly.
func (s *session) exitError() error {
	if s.cmd == nil {
		return nil
	}
	select {
	case <-s.ended:
		return s.endErr
	default:
		return nil
	}
}

// stderrSuffix logs the end of the server's stderr, for the person who runs
// codecell, and says so in the message. The message reaches the sandboxed
// program, which must not read what a server prints there: servers print
// their configuration and, now and then, their secrets.
func (s *session) stderrSuffix() string {
	if s == nil || s.stderr == nil {
		return ""
	}
	if tail := s.stderr.lastLines(1 << 10); tail != "" {
		if s.stderr.log != nil {
			s.stderr.log.Warn("MCP server failed; the end of its stderr", "stderr", tail)
		}
		return "; the end of its stderr is in codecell's log"
	}
	return ""
}

// recordingTransport keeps the connection it made, for closing it after a
// failed handshake.
type recordingTransport struct {
	sdk.Transport
	cmd *exec.Cmd // nil for HTTP

	mu   sync.Mutex
	conn sdk.Connection
	pid  int // the stdio server's, once started
}

func (t *recordingTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err == nil && t.cmd != nil {
		c = &boundedWrites{Connection: c}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.conn = c
	if t.cmd != nil && t.cmd.Process != nil {
		t.pid = t.cmd.Process.Pid
	}
	return c, err
}

// connection is the connection made, or nil.
func (t *recordingTransport) connection() sdk.Connection {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.conn
}

// kill kills the stdio server's process group, if it was started.
func (t *recordingTransport) kill() {
	t.mu.Lock()
	pid := t.pid
	t.mu.Unlock()
	if pid > 0 {
		killGroup(pid)
	}
}

// sameOrigin lets the HTTP client follow a server's redirects within the
// configured URL's origin only. The configured headers hold secrets meant
// for that origin (an API key, a bearer token), and Go's client sends
// headers other than Authorization and Cookie on to any host; a redirect
// elsewhere is refused, with the new URL, for the user to configure if
// they trust it.
func sameOrigin(origin *url.URL) func(*http.Request, []*http.Request) error {
	return func(r *http.Request, via []*http.Request) error {
		if r.URL.Scheme != origin.Scheme || r.URL.Host != origin.Host {
			return &redirectError{to: r.URL.Redacted()}
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
}

// redirectError is a redirect to another origin, refused.
type redirectError struct{ to string }

func (e *redirectError) Error() string {
	return "the server redirected to " + e.to + ", another origin, which codecell does not follow with the configured headers"
}

// boundedWrites makes a stdio connection's writes end with their context.
// The SDK writes to the server's stdin without regard to the context: a
// server that stops reading fills the pipe, and the write, and every call
// behind it, would wait until the server exits. A write given up on goes on
// in the background (the next ones queue behind it); the ping that follows
// a call's timeout cannot be written either, so the server is dropped as
// hung and killed, which ends the write.
type boundedWrites struct {
	sdk.Connection
}

func (c *boundedWrites) Write(ctx context.Context, msg jsonrpc.Message) error {
	if ctx.Done() == nil {
		return c.Connection.Write(ctx, msg)
	}
	done := make(chan error, 1)
	go func() { done <- c.Connection.Write(ctx, msg) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("writing to the MCP server, which is not reading: %w", context.Cause(ctx))
	}
}

// headerTransport adds the configured headers to every request to host (the
// configured URL's). The SDK's own protocol headers (Accept, Content-Type,
// Mcp-Session-Id, …) win.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
	host    string
}

func (t *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(t.headers) > 0 && r.URL.Host == t.host {
		r = r.Clone(r.Context())
		for k, v := range t.headers {
			if r.Header.Get(k) == "" {
				r.Header.Set(k, v)
			}
		}
	}
	return t.base.RoundTrip(r)
}

// stderrTail keeps the end of what a stdio server writes to stderr, for
// error messages, and logs it line by line at debug level.
type stderrTail struct {
	log  *slog.Logger
	mu   sync.Mutex
	tail []byte // the last tailSize bytes
	line []byte // a line not yet ended
}

const tailSize = 8 << 10

func (t *stderrTail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tail = append(t.tail, p...)
	if len(t.tail) > tailSize {
		t.tail = append(t.tail[:0], t.tail[len(t.tail)-tailSize:]...)
	}
	t.line = append(t.line, p...)
	for {
		i := bytes.IndexByte(t.line, '\n')
		if i < 0 {
			break
		}
		t.log.Debug("MCP server stderr", "line", string(t.line[:i]))
		t.line = t.line[i+1:]
	}
	if len(t.line) > maxErrorText { // a very long line is logged in pieces
		t.log.Debug("MCP server stderr", "line", string(t.line))
		t.line = t.line[:0]
	}
	return len(p), nil
}

// lastLines returns the last non-empty lines, at most n bytes, joined by
// " | ".
func (t *stderrTail) lastLines(n int) string {
	t.mu.Lock()
	text := strings.TrimSpace(strings.ToValidUTF8(string(t.tail), "?"))
	t.mu.Unlock()
	if len(text) > n {
		cut := len(text) - n
		for cut < len(text) && !utf8.RuneStart(text[cut]) {
			cut++
		}
		text = "…" + text[cut:]
	}
	var lines []string
	for _, l := range strings.Split(text, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, " | ")
}
