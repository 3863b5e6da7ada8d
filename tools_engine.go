package codecell

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/codecell-dev/codecell/bridge"
)

// toolFD is the program's file descriptor for the tool channel: the second
// of Job.ExtraFiles.
const toolFD = 4

// maxTrace bounds the tool calls a Result lists: a program that keeps
// calling past its limit gets refusals, not an ever longer trace.
const maxTrace = 200

// toolSession serves one Exec's tool calls and keeps their trace.
type toolSession struct {
	eng    *Engine
	x      *Exec
	lim    Limits
	execID string
	log    *slog.Logger

	calls     atomic.Int64
	usage     ToolUsage // this Exec's calls, for the rates
	handles   handles   // results kept on the host for the program
	approvals approvals
	mu        sync.Mutex
	trace     []ToolCall
	unlisted  [2]int // calls past maxTrace: within the limit, and refused past it

	child  *os.File // the program's end, handed to the tier
	conn   net.Conn // the host's end
	cancel context.CancelFunc
	done   chan struct{}
}

// startTools opens the tool channel and serves it until stop.
func (e *Engine) startTools(ctx context.Context, x *Exec, lim Limits, execID string) (*toolSession, error) {
	fds, err := socketpair()
	if err != nil {
		return nil, err
	}
	host := os.NewFile(uintptr(fds[0]), "tools")
	conn, err := net.FileConn(host)
	host.Close()
	if err != nil {
		unix.Close(fds[1])
		return nil, err
	}
	s := &toolSession{
		eng: e, x: x, lim: lim, execID: execID, log: e.Logger,
		child: os.NewFile(uintptr(fds[1]), "tools"),
		conn:  conn,
		done:  make(chan struct{}),
	}
	ctx, s.cancel = context.WithCancel(ctx)
	go func() {
		defer close(s.done)
		bridge.Serve(ctx, conn, s.handle)
	}()
	return s, nil
}

// stop ends the channel once the program is gone: calls still in flight are
// cancelled, and their outcome is in the trace.
func (s *toolSession) stop() []ToolCall {
	s.child.Close()
	s.cancel()
	// The read ends, not the channel: the calls in flight write their
	// answers (cancelled) before it closes, for a live interpreter's
	// threads that wait for them. The program's end is gone or read by a
	// relay; an answer no one reads holds the end a second at most.
	now := time.Now()
	_ = s.conn.SetReadDeadline(now)
	_ = s.conn.SetWriteDeadline(now.Add(time.Second))
	<-s.done
	s.conn.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.trace
}

// unlistedWarning says how many calls past the trace's bound were left out
// of it, and how many of those the limit refused, or "" when none were: a
// run allowed more calls than a Result lists made calls that were served
// and are not in its trace.
func (s *toolSession) unlistedWarning() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	within, refused := s.unlisted[0], s.unlisted[1]
	switch {
	case within+refused == 0:
		return ""
	case within == 0:
		return fmt.Sprintf("%d more tool calls, refused past the limit, are not listed", refused)
	}
	return fmt.Sprintf("%d more tool calls are not listed: %d within the tool call limit, %d refused past it", within+refused, within, refused)
}

// begin records a call in the trace, in the order calls were made, and
// returns a function that records its outcome: tool, when not empty, is
// the tool the name reached (everything.get-sum for everything.get_sum),
// which the trace and the log then name.
func (s *toolSession) begin(name string, overLimit bool) func(tool string, err *Envelope, rule string, approval *ToolApproval) {
	start := time.Now()
	s.mu.Lock()
	i := len(s.trace)
	if i >= maxTrace {
		if overLimit {
			s.unlisted[1]++
		} else {
			s.unlisted[0]++
		}
		s.mu.Unlock()
		return func(string, *Envelope, string, *ToolApproval) {}
	}
	s.trace = append(s.trace, ToolCall{Name: name})
	s.mu.Unlock()
	return func(tool string, env *Envelope, rule string, approval *ToolApproval) {
		d := time.Since(start)
		if tool != "" {
			name = tool
		}
		s.mu.Lock()
		c := &s.trace[i]
		c.Name = name
		c.DurationMS = float64(d.Microseconds()) / 1000
		c.OK, c.Rule, c.Approval = env == nil, rule, approval
		if env != nil {
			c.ErrorKind, c.ErrorCode = env.Kind, env.Code
		}
		s.mu.Unlock()
		if s.log != nil {
			attrs := []any{"exec_id", s.execID, "call", i + 1, "tool", name, "duration_ms", c.DurationMS, "ok", env == nil}
			if env != nil {
				attrs = append(attrs, "error_code", env.Code)
			}
			s.log.Info("tool_call", attrs...)
		}
	}
}

// maxToolName bounds the name a call may give: a source's name, a dot and
// an MCP tool's name fit in it. A longer name is no tool's, and looking it
// up (the policy's patterns, the nearest names for a hint) would cost the
// host time in proportion to its length.
const maxToolName = 256

// cutName is the start of a name too long to be a tool's, as the trace and
// the messages show it.
func cutName(name string) string {
	cut := 64
	for cut > 0 && !utf8.RuneStart(name[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", name[:cut], len(name))
}

// handle takes one call, in the order the program made them: it is counted
// against the limit and recorded in the trace here, and served (the policy,
// the lookup, the timeout, the size of the result) concurrently with others.
// Reading a handle is not a call: it is neither counted nor traced.
func (s *toolSession) handle(r bridge.Request) bridge.Call {
	if r.Method == bridge.MethodHandleRead {
		return func(context.Context) (json.RawMessage, error) {
			res, env := s.handles.read(r.Handle, r.Offset, r.Length, s.lim.ToolResult)
			if env != nil {
				return nil, &bridge.Error{Envelope: json.RawMessage(env.JSON())}
			}
			return res, nil
		}
	}
	name, params, asHandle := r.Name, r.Arguments, r.As == "handle"
	overLimit := s.calls.Add(1) > int64(s.lim.ToolCalls)
	tooLong := len(name) > maxToolName
	if tooLong {
		// No tool's name: the trace and the log keep its start.
		name = cutName(name)
	}
	end := s.begin(name, overLimit)
	return func(ctx context.Context) (json.RawMessage, error) {
		var res json.RawMessage
		var env *Envelope
		var rule, tool string
		var approval *ToolApproval
		switch {
		case overLimit:
			env = Errorf(KindLimit, CodeToolCallLimit, "this program has already made %d tool calls, its limit", s.lim.ToolCalls).WithHints(
				"make fewer calls: batch work into one call where the tool allows it, or work on what earlier calls returned",
				"ask for a higher tool call limit")
		case tooLong:
			env = Errorf(KindTool, CodeToolNotFound, "no tool is named %q: a tool's name is at most %d bytes", name, maxToolName).WithHints(
				"call a tool by its name, as the list of available tools gives it")
		default:
			// Bounded by the run as a whole: a tool source that does not
			// list its tools, as a tool that does not return, must not
			// hold the run's end.
			type served struct {
				res        json.RawMessage
				env        *Envelope
				rule, tool string
				approval   *ToolApproval
			}
			o, _, err := detach(ctx, func() (served, error) {
				var o served
				o.res, o.env, o.rule, o.approval = s.call(ctx, name, params, asHandle, &o.tool)
				return o, nil
			})
			res, env, rule, tool, approval = o.res, o.env, o.rule, o.tool, o.approval
			if err != nil {
				env = Errorf(KindInternal, CodeToolFailed, "the call to %s was cancelled: the program ended", name)
			}
		}
		end(tool, env, rule, approval)
		if env != nil {
			return nil, &bridge.Error{Envelope: json.RawMessage(env.JSON())}
		}
		return res, nil
	}
}

func (s *toolSession) call(ctx context.Context, name string, params json.RawMessage, asHandle bool, tool *string) (json.RawMessage, *Envelope, string, *ToolApproval) {
	var rule string
	var approval *ToolApproval
	max := int64(s.lim.ToolResult)
	if asHandle {
		max = s.handles.room(s.lim.ToolHandles)
	}
	res, env := s.callTool(ctx, name, params, &rule, &approval, max, asHandle, tool)
	if env != nil || !asHandle {
		return res, env, rule, approval
	}
	res, env = s.handles.keep(name, res, s.lim.ToolHandles)
	return res, env, rule, approval
}

// callTool serves one call; rule is set to the policy's rule that decided
// it, if one did, and called to the tool's name once the name is resolved.
func (s *toolSession) callTool(ctx context.Context, name string, params json.RawMessage, rule *string, approval **ToolApproval, max int64, asHandle bool, called *string) (json.RawMessage, *Envelope) {
	var tool Tool
	found, allowed := false, s.permits(name)
	if allowed {
		var err *Envelope
		if tool, found, err = s.find(ctx, name); err != nil {
			return nil, err
		}
	}
	if !found && strings.Contains(name, "_") {
		// An attribute's spelling of a name it cannot write
		// (tools.everything.get_sum for "everything.get-sum"): the one tool
		// it spells, under that tool's own policy.
		if alias := s.spelled(ctx, name); alias != "" {
			if !s.permits(alias) {
				return nil, Errorf(KindTool, CodeToolNotAllowed, "the tool %q (called as %q) is not allowed for this program", alias, name).WithHints(
					"use only the tools listed as available")
			}
			var err *Envelope
			if tool, found, err = s.find(ctx, alias); err != nil {
				return nil, err
			}
		}
	}
	if !found && !allowed {
		return nil, Errorf(KindTool, CodeToolNotAllowed, "the tool %q is not allowed for this program", name).WithHints(
			"use only the tools listed as available")
	}
	if !found {
		return nil, s.notFound(ctx, name)
	}
	*called = tool.Name
	if len(params) == 0 || string(params) == "null" {
		params = json.RawMessage("{}")
	}
	ask, env := s.perCall(tool.Name, params, rule)
	if env != nil {
		return nil, env
	}
	if ask != "" {
		if *approval, env = s.ask(ctx, tool.Name, params, ask); env != nil {
			return nil, env
		}
	}
	cctx, cancel := context.WithTimeout(ctx, s.lim.ToolTimeout)
	defer cancel()
	res, abandoned, callErr := detach(cctx, func() (json.RawMessage, error) { return safeCall(cctx, tool, params) })
	if abandoned && s.log != nil {
		s.log.Warn("tool_abandoned", "exec_id", s.execID, "tool", tool.Name,
			"reason", "the tool did not return when its call's context ended; it runs on in the background")
	}
	if callErr != nil {
		var env *Envelope
		switch {
		case errors.As(callErr, &env):
		case cctx.Err() == context.DeadlineExceeded:
			env = Errorf(KindTimeout, CodeToolTimeout, "the tool %s did not answer within %s", name, s.lim.ToolTimeout).WithHints(
				"ask it for less at once, or try again later")
			env.Retryable = true
		case ctx.Err() != nil:
			env = Errorf(KindInternal, CodeToolFailed, "the call to %s was cancelled: the program ended", name)
		default:
			env = Errorf(KindTool, CodeToolFailed, "the tool %s failed: %v", name, callErr)
		}
		return nil, env
	}
	if int64(len(res)) > max {
		if asHandle {
			return nil, Errorf(KindLimit, CodeToolResultTooLarge, "the result of %s is %s of JSON, more than the %s left of the %s limit for results kept as handles", name, formatBytes(int64(len(res))), formatBytes(max), formatBytes(s.lim.ToolHandles)).WithHints(
				"ask the tool for less: a narrower query, fewer fields, one page at a time",
				"or ask for a higher tool_handles limit")
		}
		return nil, Errorf(KindLimit, CodeToolResultTooLarge, "the result of %s is %s of JSON, over the %s limit for one tool result", name, formatBytes(int64(len(res))), formatBytes(int64(s.lim.ToolResult))).WithHints(
			"ask the tool for less: a narrower query, fewer fields, one page at a time",
			`or ask for it as a handle, which stays on the host and is read in pages: call_tool(name, params, {"as": "handle"}) in Python, callTool(name, params, {as: "handle"}) in JavaScript`)
	}
	if !json.Valid(res) {
		return nil, Errorf(KindInternal, CodeToolFailed, "the tool %s returned something that is not JSON", name)
	}
	return res, nil
}

// detach runs f in a goroutine of its own and returns its outcome, or
// ctx's error as soon as ctx ends first (abandoned then): a tool or an
// approver that ignores its context costs its call's time, never the end
// of the run, which waits for every call it started. What f returns after
// that is dropped.
func detach[T any](ctx context.Context, f func() (T, error)) (v T, abandoned bool, err error) {
	type outcome struct {
		v   T
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		v, err := f()
		done <- outcome{v, err}
	}()
	select {
	case o := <-done:
		return o.v, false, o.err
	case <-ctx.Done():
		select {
		case o := <-done:
			return o.v, false, o.err
		default:
		}
		return v, true, ctx.Err()
	}
}

// safeCall runs a tool, turning a panic in it into an error: a broken tool
// must not take codecell down.
func safeCall(ctx context.Context, t Tool, params json.RawMessage) (res json.RawMessage, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the tool panicked: %v", p)
		}
	}()
	return t.Call(ctx, params)
}

// perCall applies the layers' rules on arguments and their rates to a call
// of a tool the program may call by name.
// It returns, when a rule says to ask a person about the call, that rule.
func (s *toolSession) perCall(name string, params json.RawMessage, rule *string) (string, *Envelope) {
	layers := s.eng.policyLayers(s.x)
	var rates []ToolRate
	ask := ""
	for _, l := range layers {
		if l.p == nil {
			continue
		}
		r, ok := l.p.Tools.decide(name, params)
		if !ok {
			if r == nil {
				*rule = fmt.Sprintf("%s: no rule for %s matches these arguments", l.name, name)
				return "", Errorf(KindTool, CodeToolDenied, "the call to %s was refused: the %s policy has rules for its arguments, and none allows these", name, l.name).WithHints(
					"call it with arguments the policy allows: "+l.p.Tools.allowed(name),
					"or ask for the policy to be changed")
			}
			*rule = l.name + ": " + r.describe()
			return "", Errorf(KindTool, CodeToolDenied, "the call to %s was refused by the %s policy's rule: %s", name, l.name, r.describe()).WithHints(
				"call it with other arguments, or do without it")
		}
		if r != nil {
			*rule = l.name + ": " + r.describe()
			if r.Action == "ask" {
				ask = *rule
			}
		}
		rates = append(rates, l.p.Tools.Rates...)
	}
	if len(rates) == 0 {
		return ask, nil
	}
	r, bound, session := takeRate(name, rates, &s.usage, s.x.ToolUsage)
	if r == nil {
		return ask, nil
	}
	per := "execution"
	if session {
		per = "session"
	}
	*rule = fmt.Sprintf("rate: %s at most %d per %s", r.Tool, bound, per)
	return "", Errorf(KindLimit, CodeToolRateLimited, "the tools %s may be called at most %d times per %s, and were", r.Tool, bound, per).WithHints(
		"do more with each call, or work with what earlier calls returned")
}

// permits applies the Engine's tool policy and the Exec's: each can only
// narrow.
func (s *toolSession) permits(name string) bool {
	if sp := s.x.SessionPolicy; sp != nil && !sp.Tools.Permits(name) {
		return false
	}
	return s.eng.Policy.Tools.Permits(name) && s.x.Policy.Tools.Permits(name)
}

// find looks for the tool among the Exec's own, then the Engine's.
func (s *toolSession) find(ctx context.Context, name string) (Tool, bool, *Envelope) {
	for _, t := range s.x.Tools {
		if t.Name == name {
			return t, true, nil
		}
	}
	t, ok, err := s.eng.Tools.Find(ctx, name)
	if err != nil {
		env := Errorf(KindUpstream, CodeUpstreamUnavailable, "%v", err).WithHints(
			"try again: a server that crashed is started again on the next call")
		env.Retryable = true
		return Tool{}, false, env
	}
	return t, ok, nil
}

// spelled returns the one tool that name spells (see SameTool), or "" when
// none does or more than one does.
func (s *toolSession) spelled(ctx context.Context, name string) string {
	var names []string
	for _, t := range s.x.Tools {
		if SameTool(t.Name, name) {
			names = append(names, t.Name)
		}
	}
	names = append(names, s.eng.Tools.Spelled(ctx, name)...)
	if len(names) != 1 || names[0] == name {
		return ""
	}
	return names[0]
}

// notFound says the tool does not exist, and which allowed names are near.
func (s *toolSession) notFound(ctx context.Context, name string) *Envelope {
	env := Errorf(KindTool, CodeToolNotFound, "no tool named %q", name)
	var names []string
	for _, t := range s.x.Tools {
		if s.permits(t.Name) {
			names = append(names, t.Name)
		}
	}
	// Not List: a server still starting must not hold up the error.
	tools, _ := s.eng.Tools.Available(ctx)
	for _, t := range tools {
		if s.permits(t.Name) {
			names = append(names, t.Name)
		}
	}
	if near := nearest(name, names); near != "" {
		env.Hints = append(env.Hints, fmt.Sprintf("did you mean %q?", near))
	}
	switch {
	case len(names) == 0:
		env.Hints = append(env.Hints, "no tools are available to this program")
	case len(names) <= 20:
		env.Hints = append(env.Hints, "the tools are: "+strings.Join(names, ", "))
	default:
		env.Hints = append(env.Hints, fmt.Sprintf("%d tools are available; list them with `codecell tools`", len(names)))
	}
	return env
}
