package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codecell-dev/codecell"
	csession "github.com/codecell-dev/codecell/session"
)

type executeArgs struct {
	Code           string   `json:"code"`
	Language       string   `json:"language"`
	TimeoutSeconds *float64 `json:"timeout_seconds"`
	Session        string   `json:"session"`
	// Live makes the session, on its first use, a live one; Restart starts
	// a live session's interpreters afresh before the program.
	Live    bool `json:"live"`
	Restart bool `json:"restart"`
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
			lim := s.engine().Limits.Or(codecell.DefaultLimits)
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
		// dir is the workspace the images of the result are read from
		// after the run: the session's, or one of the call's own, which
		// lives until the result is made.
		var dir string
		if args.Session == "" {
			d, err := os.MkdirTemp(s.engine().TempDir, "codecell-mcp-")
			if err != nil {
				return refusal(codecell.Errorf(codecell.KindInternal, codecell.CodeSandboxFailure, "making the run's workspace: %v", err).WithHints(
					"retry; if it persists, see codecell's log")), nil
			}
			defer os.RemoveAll(d)
			x.Workspace, dir = d, d
		} else {
			if s.Sessions == nil {
				return refusal(codecell.Errorf(codecell.KindValidation, codecell.CodeInvalidRequest, "this server keeps no sessions").WithHints(
					"leave session out: each run gets a fresh workspace")), nil
			}
			// The caller's session of that id or name, made on first use:
			// never another principal's.
			var made *codecell.Live
			ses, err := s.Sessions.AcquireOr(p, args.Session, func() csession.Options {
				if args.Live {
					made = s.engine().NewLive()
				}
				return csession.Options{Live: made}
			})
			if err != nil {
				if made != nil {
					made.Close()
				}
				return refusal(sessionRefusal(p, s.Sessions, err)), nil
			}
			if env := liveRefusal(ses, args); env != nil {
				ses.Release()
				return refusal(env), nil
			}
			if args.Restart {
				ses.Live.Restart()
			}
			dir = ses.Workspace
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
		release, refused := s.admit(p)
		if refused != nil {
			return refusal(refused), nil
		}
		defer release()
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
		res, err := s.engine().Run(ctx, x)
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
		images, shown, notes := resultImages(dir, res.Files, args.Session, s.Sessions != nil)
		res.Warnings = append(res.Warnings, notes...)
		out := s.result(res, renderResultShowing(res, shown))
		for _, im := range images {
			out.Content = append(out.Content, im)
		}
		return out, nil
	}
}

// liveRefusal refuses live and restart where the session cannot honour
// them.
func liveRefusal(ses *csession.Session, args executeArgs) *codecell.Envelope {
	switch {
	case args.Live && ses.Live == nil:
		return codecell.Errorf(codecell.KindValidation, codecell.CodeInvalidRequest,
			"session %q already exists and keeps files only: live applies when a session is made", args.Session).WithHints(
			"name a new session to make a live one", "or leave live out to run in this one")
	case args.Restart && ses.Live == nil:
		return codecell.Errorf(codecell.KindValidation, codecell.CodeInvalidRequest,
			"session %q keeps files only: it has no interpreter to restart", args.Session).WithHints(
			"leave restart out", "make a live session with live: true on a new session name")
	}
	return nil
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
	res := s.engine().Refuse(ctx, x, env)
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
	return renderResultShowing(res, nil)
}

// renderResultShowing is renderResult for a result that shows the images
// of the files in shown.
func renderResultShowing(res *codecell.Result, shown map[string]bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "status: %s", res.Status)
	if res.ExitCode >= 0 {
		fmt.Fprintf(&b, " (exit code %d)", res.ExitCode)
	}
	if res.Tier != "" {
		fmt.Fprintf(&b, ", %d ms, tier %s", res.DurationMS, res.Tier)
	}
	if res.SessionState != "" {
		fmt.Fprintf(&b, ", interpreter %s", res.SessionState)
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
		fmt.Fprintf(&b, "file %s: %s (%d bytes", f.Change, f.Path, f.Size)
		if f.MIME != "" {
			fmt.Fprintf(&b, ", %s", f.MIME)
		}
		if shown[f.Path] {
			b.WriteString(", shown below")
		}
		b.WriteString(")\n")
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
