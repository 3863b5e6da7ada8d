package mcp

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codecell-dev/codecell"
	csession "github.com/codecell-dev/codecell/session"
	"github.com/codecell-dev/codecell/tooldoc"
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
	// ForkFrom makes the session, which must be new, a fork of this one
	// (session.Store.Fork): its files and a live session's Python state.
	ForkFrom string `json:"fork_from"`
	// Packages are installed before the program runs (codecell.Exec.Packages).
	Packages codecell.Packages `json:"packages"`
}

// executeArgNames are the arguments execute and call_tool_chain take.
var executeArgNames = []string{"code", "language", "timeout_seconds", "session", "live", "restart", "fork_from", "packages"}

// unknownArgument refuses an argument the tool does not take, naming the
// one meant: a misspelt timeout_seconds or session would otherwise be
// dropped without a word, and the program run with the default timeout or
// in a fresh workspace. The REST API refuses unknown fields likewise.
func unknownArgument(tool string, raw json.RawMessage) *codecell.Envelope {
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return nil
	}
	names := slices.Sorted(maps.Keys(fields))
	for _, f := range names {
		if slices.Contains(executeArgNames, f) {
			continue
		}
		msg := fmt.Sprintf("%s takes no argument %q", tool, f)
		near := codecell.Suggest(f, executeArgNames)
		if near == "" && len(f) >= 3 {
			// A shortening: lang, timeout.
			if i := slices.IndexFunc(executeArgNames, func(n string) bool { return strings.HasPrefix(n, f) }); i >= 0 {
				near = executeArgNames[i]
			}
		}
		if near != "" {
			msg += fmt.Sprintf("; did you mean %q?", near)
		}
		return codecell.Errorf(codecell.KindValidation, codecell.CodeInvalidRequest, "%s", msg).WithHints(
			"its arguments are " + strings.Join(executeArgNames, ", ") + "; send only those, and the program again")
	}
	return nil
}

// maxTimeout bounds the time limit a client may ask for, so that no client
// holds a sandbox for long: 10 minutes, or the configured limit if longer.
func maxTimeout(lim codecell.Limits) time.Duration {
	return max(10*time.Minute, lim.Timeout)
}

// handleExecute runs a program. A program whose tool calls a person must
// approve asks the client: with an elicitation request while the call is
// served, or, on protocol versions that do not let a server send requests
// then, by answering the call with input requests that the client answers
// by calling again (see pausedRuns).
func (s *Server) handleExecute(name, defaultLang string) sdk.ToolHandler {
	run := s.runExecute(name, defaultLang)
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		if req.Params.RequestState != "" {
			return s.paused.resume(ctx, req)
		}
		if !askByRoundTrips(req.Session) {
			return run(ctx, req, elicitApprover(req.Session))
		}
		return s.paused.start(ctx, req, run)
	}
}

// runExecute is execute's handler, given whom to ask about calls that need
// a person's approval.
func (s *Server) runExecute(name, defaultLang string) func(context.Context, *sdk.CallToolRequest, codecell.Approver) (*sdk.CallToolResult, error) {
	return func(ctx context.Context, req *sdk.CallToolRequest, approver codecell.Approver) (*sdk.CallToolResult, error) {
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
		if env := unknownArgument(name, req.Params.Arguments); env != nil {
			return s.refusal(ctx, &codecell.Exec{Language: cmp.Or(args.Language, defaultLang), Code: args.Code}, env), nil
		}
		if args.Language == "" {
			args.Language = defaultLang
		}
		x := &codecell.Exec{Language: args.Language, Code: args.Code, Approver: approver, Packages: args.Packages}
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
		var forkNotes []string
		if args.ForkFrom != "" && args.Session == "" {
			return refusal(codecell.Errorf(codecell.KindValidation, codecell.CodeInvalidRequest, "fork_from makes a new session, which session names").WithHints(
				`name the new session: {"session": "try-2", "fork_from": "` + args.ForkFrom + `", "code": "..."}`)), nil
		}
		if args.Session == "" {
			d, remove, err := s.engine().TempWorkspace()
			if err != nil {
				return refusal(codecell.Errorf(codecell.KindInternal, codecell.CodeSandboxFailure, "making the run's workspace: %v", err).WithHints(
					"retry; if it persists, see codecell's log")), nil
			}
			defer remove()
			x.Workspace, dir = d, d
		} else {
			if s.Sessions == nil {
				return refusal(codecell.Errorf(codecell.KindValidation, codecell.CodeInvalidRequest, "this server keeps no sessions").WithHints(
					"leave session out: each run gets a fresh workspace")), nil
			}
			if args.ForkFrom != "" {
				notes, env := s.fork(ctx, p, args)
				if env != nil {
					return refusal(env), nil
				}
				forkNotes = notes
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
		res.Warnings = append(forkNotes, res.Warnings...)
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

// fork makes session args.Session a fork of args.ForkFrom, and says what
// was not copied.
func (s *Server) fork(ctx context.Context, p *csession.Principal, args executeArgs) ([]string, *codecell.Envelope) {
	if args.Live || args.Restart {
		return nil, codecell.Errorf(codecell.KindValidation, codecell.CodeInvalidRequest,
			"fork_from makes a session like the one forked, live or not: live and restart do not apply").WithHints("leave live and restart out")
	}
	_, reports, err := s.Sessions.Fork(ctx, p, args.ForkFrom, args.Session, s.engine().Limits.Or(codecell.DefaultLimits))
	switch {
	case errors.Is(err, codecell.ErrLiveBusy) || errors.Is(err, csession.ErrBusy):
		env := codecell.Errorf(codecell.KindLimit, codecell.CodeInvalidRequest, "session %q is running a program: it can be forked once that ends", args.ForkFrom).WithHints("fork it again when its program is done")
		env.Retryable = true
		return nil, env
	case errors.Is(err, csession.ErrNotFound):
		return nil, codecell.Errorf(codecell.KindValidation, codecell.CodeInvalidRequest, "there is no session %q of yours to fork", args.ForkFrom).WithHints(
			"fork_from names a session an earlier execute made (its session argument)")
	case errors.Is(err, csession.ErrNameTaken):
		return nil, codecell.Errorf(codecell.KindValidation, codecell.CodeInvalidRequest,
			"session %q already exists: fork_from applies when a session is made", args.Session).WithHints(
			"name a new session to fork into", "or leave fork_from out to run in this one")
	case err != nil:
		var env *codecell.Envelope
		if errors.As(err, &env) {
			return nil, env
		}
		if errors.Is(err, csession.ErrTooMany) || errors.Is(err, csession.ErrPrincipalFull) {
			return nil, sessionRefusal(p, s.Sessions, err)
		}
		return nil, codecell.Errorf(codecell.KindValidation, codecell.CodeInvalidRequest, "session %q could not be forked: %v", args.ForkFrom, err).WithHints(
			"restart it (restart: true) and fork again, or fork it without the variables that are too large")
	}
	var notes []string
	for _, r := range reports {
		if r.Note != "" {
			notes = append(notes, r.Note)
		}
		for _, sk := range r.Skipped {
			notes = append(notes, fmt.Sprintf("the fork did not copy %s (%s): %s", sk.Name, sk.Type, sk.Reason))
		}
	}
	return notes, nil
}

// liveRefusal refuses live and restart where the session cannot honour
// them.
func liveRefusal(ses *csession.Session, args executeArgs) *codecell.Envelope {
	switch {
	case args.Live && ses.Live == nil:
		return codecell.Errorf(codecell.KindValidation, codecell.CodeInvalidRequest,
			"session %q already exists and keeps files only: live applies when a session is made", args.Session).WithHints(
			"name a new session to make a live one; to give it files, make it first (execute with live: true), then write_file into it",
			"or leave live out to run in this one")
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
		// Each tool and outcome once, with how many times, in the order
		// they came: a loop of calls costs a line, not a line per call.
		type key struct{ name, outcome string }
		var order []key
		times := map[key]int{}
		for _, c := range res.ToolCalls {
			k := key{c.Name, "ok"}
			if !c.OK {
				k.outcome = c.ErrorCode
			}
			if times[k] == 0 {
				order = append(order, k)
			}
			times[k]++
		}
		var calls []string
		for _, k := range order {
			c := k.name + " " + k.outcome
			if times[k] > 1 {
				c += fmt.Sprintf(" ×%d", times[k])
			}
			calls = append(calls, c)
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

// DefaultPromptBudgetTokens is the size, in estimated tokens, execute's
// description is kept to when the Server sets none.
const DefaultPromptBudgetTokens = 2000

// CharsPerToken is the characters EstimateTokens takes for a token.
const CharsPerToken = 4

// EstimateTokens estimates the tokens a text takes in a model's context as
// its characters / 4, rounded up: near what the common tokenizers make of
// English and code, an estimate rather than a count.
func EstimateTokens(s string) int {
	return (utf8.RuneCountInString(s) + CharsPerToken - 1) / CharsPerToken
}

// promptRoom is how many characters execute's description may hold, or -1
// for no bound.
func (s *Server) promptRoom() int {
	switch b := s.PromptBudgetTokens; {
	case b < 0:
		return -1
	case b == 0:
		return DefaultPromptBudgetTokens * CharsPerToken
	default:
		return b * CharsPerToken
	}
}

// executeDescription is the description of execute (the rules of code
// mode, then toolsAPI), or of call_tool_chain, which points to execute's
// rather than repeat it.
func (s *Server) executeDescription(tool, lang, toolsAPI string) string {
	if tool == "call_tool_chain" {
		return chainDescription
	}
	return s.rules(lang) + toolsAPI
}

const chainDescription = "Runs a TypeScript program: execute with language typescript, under execute's rules. Chain the calls in one program, `const r = await tools.server.tool({...})`, several at once with `await Promise.all([...])`, and return only what you need."

// rules is the part of execute's description that teaches code mode: the
// sandbox's limits, how a program calls tools, what the guardrails refuse.
func (s *Server) rules(lang string) string {
	lim := s.engine().Limits.Or(codecell.DefaultLimits)
	g := s.engine().Policy.Guard
	var b strings.Builder
	name := map[string]string{"python": "Python", "typescript": "TypeScript"}[lang]
	fmt.Fprintf(&b, "Runs a program in a sandbox (no network; %v, %d MiB, %d tool calls, %d characters of code); returns its output and value. %s unless language says otherwise.\n\n",
		lim.Timeout, lim.Memory>>20, lim.ToolCalls, lim.CodeSize, name)
	b.WriteString("Write one program instead of many tool calls: it can call the tools (below, or found with search_tools), at once where they are independent, and return only what you need.\n")
	b.WriteString("- Top-level await works. `return` at top level ends the program with a value; otherwise the value of the last expression is returned (as JSON). print / console.log go to stdout.\n")
	b.WriteString("- Python: `r = await tools.server.tool(key=value)` or `await call_tool(\"server.tool\", {...})`; several at once with `await asyncio.gather(...)`; a `-` in a name is written `_` (or `tools[\"server.get-sum\"](...)`). A failure raises ToolError (`e.envelope` holds the error).\n")
	b.WriteString("- JavaScript/TypeScript: `await tools.server.tool({...})` or `await callTool(\"server.tool\", {...})`; at once with `await Promise.all([...])`. A failure throws an Error with `.envelope`.\n")
	b.WriteString("- Shell: `codecell-tool server.tool '{...}'` prints the result as JSON.\n")
	b.WriteString("- Files persist between calls that give the same session (see read_file, write_file). Images the program saves come back with the result.\n")
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
	return b.String()
}

// toolsAPI describes the tools programs can call, for execute's
// description, in the room the prompt budget leaves after the rules.
func (s *Server) toolsAPI(ctx context.Context) string {
	tools, waiting := s.tools(ctx)
	room := s.promptRoom()
	if room >= 0 {
		room = max(room-utf8.RuneCountInString(s.rules("python")), 0)
	}
	return toolsSection(tools, waiting, room)
}

// The listings of tools in execute's description, from the fullest to the
// shortest; toolsSection takes the first that fits.
const (
	headDeclarations = "The tools, as TypeScript declarations (the same names and params from Python):\n"
	headSignatures   = "The tools (tools_info gives their full TypeScript declarations; search_tools finds tools by what they do):\n"
	headNames        = "The tools, by server (a tool is called as server.tool; search_tools finds tools by what they do and gives their signatures, tools_info gives their TypeScript declarations):\n"
	headCounts       = "%d tools, too many to list here: search_tools finds tools by what they do and gives their signatures, list_tools lists a server's tools, tools_info gives their TypeScript declarations. A tool is called as server.tool.\n"
)

// summaryChars bounds a tool's one-line description in listings.
const summaryChars = 100

// toolsSection describes tools, and the servers in waiting, in at most room
// characters (any length when room is negative): the tools' TypeScript
// declarations if they fit, else a line per tool with its signature, else
// the servers with their tools' names and one-line descriptions, else the
// servers with how many tools each has (as many servers as fit). Each
// shorter listing says how to find what it leaves out.
func toolsSection(tools []codecell.Tool, waiting []codecell.SourceStatus, room int) string {
	fits := func(s string) bool { return room < 0 || utf8.RuneCountInString(s) <= room }
	var notes strings.Builder
	for _, st := range waiting {
		notes.WriteString(waitingNote(st))
		notes.WriteByte('\n')
	}
	if len(tools) == 0 {
		msg := "No tools are configured: programs can compute, read and write their workspace."
		if len(waiting) > 0 {
			msg = "No tools are ready yet: this description is updated when they are."
		}
		if !fits(notes.String() + msg) {
			notes.Reset()
			fmt.Fprintf(&notes, "(%d MCP servers are not ready: list_tools says why.)\n", len(waiting))
		}
		return notes.String() + msg
	}
	// The notes, or when they leave no room, a line that counts them.
	if len(waiting) > 0 && !fits(notes.String()+fmt.Sprintf(headCounts, len(tools))) {
		notes.Reset()
		fmt.Fprintf(&notes, "(%d MCP servers are not ready: list_tools says why.)\n", len(waiting))
	}
	pre := notes.String()
	tools = slices.SortedFunc(slices.Values(tools), func(a, b codecell.Tool) int { return strings.Compare(a.Name, b.Name) })
	// The declarations and the signatures both hold, for each tool, its
	// name and more than 24 characters of syntax (`name(params: X) =>
	// Promise<Y>`): past that floor neither is written, which for
	// hundreds of tools would take long for nothing.
	floor := utf8.RuneCountInString(pre)
	for _, t := range tools {
		floor += utf8.RuneCountInString(t.Name) + 24
	}
	if room < 0 || floor <= room {
		if ts := pre + headDeclarations + tooldoc.TypeScript(tools); fits(ts) {
			return ts
		}
		var sigs strings.Builder
		sigs.WriteString(pre + headSignatures)
		for _, t := range tools {
			sigs.WriteString(tooldoc.Signature(t))
			if d := tooldoc.Summary(t.Description, summaryChars); d != "" {
				sigs.WriteString(" — " + d)
			}
			sigs.WriteByte('\n')
		}
		if fits(sigs.String()) {
			return sigs.String()
		}
	}
	groups := byServer(tools)
	var names strings.Builder
	names.WriteString(pre + headNames)
	for _, g := range groups {
		fmt.Fprintf(&names, "%s: %s\n", g.label(), count(len(g.tools), "tool"))
		for _, t := range g.tools {
			names.WriteString("  " + g.short(t.Name))
			if d := tooldoc.Summary(t.Description, summaryChars); d != "" {
				names.WriteString(" — " + d)
			}
			names.WriteByte('\n')
		}
	}
	if fits(names.String()) {
		return names.String()
	}
	var counts strings.Builder
	counts.WriteString(pre)
	fmt.Fprintf(&counts, headCounts, len(tools))
	more := func(n int) string {
		return fmt.Sprintf("… and %s more (list_tools lists them).\n", count(n, "server"))
	}
	for i, g := range groups {
		// Each line added leaves room for the line that counts the rest.
		line := fmt.Sprintf("%s: %s\n", g.label(), count(len(g.tools), "tool"))
		after := ""
		if left := len(groups) - i - 1; left > 0 {
			after = more(left)
		}
		if !fits(counts.String() + line + after) {
			counts.WriteString(more(len(groups) - i))
			break
		}
		counts.WriteString(line)
	}
	return counts.String()
}

// serverTools are the tools of one upstream server, or ("" server) the
// tools that belong to none.
type serverTools struct {
	server string
	tools  []codecell.Tool
}

func (g serverTools) label() string {
	if g.server == "" {
		return "(no server)"
	}
	return g.server
}

// short is a tool's name within its server's listing.
func (g serverTools) short(name string) string {
	if g.server == "" {
		return name
	}
	return strings.TrimPrefix(name, g.server+".")
}

// byServer groups tools by the server their names start with (the part
// before the first dot), the servers in order of name.
func byServer(tools []codecell.Tool) []serverTools {
	idx := map[string]int{}
	var out []serverTools
	for _, t := range tools {
		server, _, dotted := strings.Cut(t.Name, ".")
		if !dotted {
			server = ""
		}
		i, ok := idx[server]
		if !ok {
			i = len(out)
			idx[server] = i
			out = append(out, serverTools{server: server})
		}
		out[i].tools = append(out[i].tools, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].server < out[j].server })
	return out
}

// count is "1 tool", "13 tools".
func count(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
