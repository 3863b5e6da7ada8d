package mcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codecell-dev/codecell"
)

// approvalSchema is the form a client shows for a call a rule says to ask
// about: accepting approves it, declining or dismissing refuses it; the
// note, if any, reaches the program with a refusal.
var approvalSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"note": map[string]any{"type": "string", "title": "Note", "description": "optional: a word for the program, such as why not"},
	},
}

// maxShownArguments bounds the arguments an approval request shows.
const maxShownArguments = 2000

// elicitApprover asks the client's user about a call, with the protocol's
// elicitation request; nil when the client cannot be asked (it did not
// declare elicitation), so that such calls are refused with a reason.
func elicitApprover(ss *sdk.ServerSession) codecell.Approver {
	if ss == nil {
		return nil
	}
	if ip := ss.InitializeParams(); ip == nil || ip.Capabilities == nil || ip.Capabilities.Elicitation == nil {
		return nil
	}
	return func(ctx context.Context, r codecell.ApprovalRequest) (codecell.Approval, error) {
		res, err := ss.Elicit(ctx, approvalRequest(r))
		if err != nil {
			if ctx.Err() != nil {
				return codecell.Approval{}, ctx.Err()
			}
			return codecell.Approval{}, fmt.Errorf("asking the MCP client: %w", err)
		}
		if res.Action != "accept" && res.Action != "decline" && res.Action != "cancel" {
			return codecell.Approval{}, fmt.Errorf("the MCP client answered with action %q", res.Action)
		}
		return approvalOf(res), nil
	}
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// askByRoundTrips reports whether a client is asked by multi-round-trip
// requests (protocol 2026-07-28 on, where a server may not send a request
// while it serves one): the call is answered with input requests, and the
// client calls again with the answers. Nil when it declared no elicitation.
func askByRoundTrips(ss *sdk.ServerSession) bool {
	if ss == nil {
		return false
	}
	ip := ss.InitializeParams()
	return ip != nil && ip.Capabilities != nil && ip.Capabilities.Elicitation != nil && ip.ProtocolVersion >= "2026-07-28"
}

// pausedRuns are executions waiting for a client's answer to an input
// request, by the request state the client echoes back when it calls again.
type pausedRuns struct {
	mu   sync.Mutex
	runs map[string]*pausedRun
}

// pausedRun is one execution that may ask its client several times.
type pausedRun struct {
	token, owner string
	asks         chan pendingAsk // the program's requests for approval
	done         chan runOutcome // the execution's answer, once
	current      *pendingAsk     // the request the client was given, if any
	cancel       context.CancelFunc
	mu           sync.Mutex
}

type pendingAsk struct {
	req   codecell.ApprovalRequest
	reply chan codecell.Approval
}

type runOutcome struct {
	res *sdk.CallToolResult
	err error
}

// keepUnclaimed is how long the answer of an execution whose client went
// quiet is kept for it before it is dropped.
const keepUnclaimed = time.Minute

// start runs an execution whose client is asked by round trips, and
// answers the call with its result, or with its first input request.
func (p *pausedRuns) start(ctx context.Context, req *sdk.CallToolRequest, run func(context.Context, *sdk.CallToolRequest, codecell.Approver) (*sdk.CallToolResult, error)) (*sdk.CallToolResult, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	pr := &pausedRun{token: hex.EncodeToString(b[:]), owner: principalOf(req).Name,
		asks: make(chan pendingAsk), done: make(chan runOutcome, 1)}
	// The execution outlives this call when it asks: it ends with its
	// client's MCP session (see inflight), its own limits, or cancel.
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	pr.cancel = cancel
	p.mu.Lock()
	if p.runs == nil {
		p.runs = map[string]*pausedRun{}
	}
	p.runs[pr.token] = pr
	p.mu.Unlock()
	approver := func(ctx context.Context, r codecell.ApprovalRequest) (codecell.Approval, error) {
		a := pendingAsk{req: r, reply: make(chan codecell.Approval, 1)}
		select {
		case pr.asks <- a:
		case <-ctx.Done():
			return codecell.Approval{}, ctx.Err()
		}
		select {
		case ans := <-a.reply:
			return ans, nil
		case <-ctx.Done():
			return codecell.Approval{}, ctx.Err()
		}
	}
	go func() {
		res, err := run(runCtx, req, approver)
		pr.done <- runOutcome{res, err}
		cancel()
		time.AfterFunc(keepUnclaimed, func() { p.drop(pr.token) })
	}()
	return p.wait(ctx, pr)
}

// wait answers a call of pr's client: with the execution's result when it
// ends, or with the next request of the program's for approval.
func (p *pausedRuns) wait(ctx context.Context, pr *pausedRun) (*sdk.CallToolResult, error) {
	select {
	case o := <-pr.done:
		p.drop(pr.token)
		return o.res, o.err
	case a := <-pr.asks:
		pr.mu.Lock()
		pr.current = &a
		pr.mu.Unlock()
		return &sdk.CallToolResult{InputRequests: sdk.InputRequestMap{a.req.ID: approvalRequest(a.req)}, RequestState: pr.token}, nil
	case <-ctx.Done():
		// The client gave up on the call: the execution ends too.
		pr.cancel()
		p.drop(pr.token)
		return nil, ctx.Err()
	}
}

// resume takes a client's answer to an input request and goes on waiting.
func (p *pausedRuns) resume(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	p.mu.Lock()
	pr := p.runs[req.Params.RequestState]
	p.mu.Unlock()
	if pr == nil || pr.owner != principalOf(req).Name {
		return toolError("this call continues an execution that is no longer waiting (it ended, or waited too long for its answer): run the program again"), nil
	}
	pr.mu.Lock()
	a := pr.current
	pr.current = nil
	pr.mu.Unlock()
	if a != nil {
		ans := codecell.Approval{By: "mcp client", Reason: "no answer was given"}
		if r, ok := req.Params.InputResponses[a.req.ID].(*sdk.ElicitResult); ok {
			ans = approvalOf(r)
		}
		a.reply <- ans
	}
	return p.wait(ctx, pr)
}

func (p *pausedRuns) drop(token string) {
	p.mu.Lock()
	delete(p.runs, token)
	p.mu.Unlock()
}

// approvalRequest is the elicitation that asks about a call.
func approvalRequest(r codecell.ApprovalRequest) *sdk.ElicitParams {
	args := string(r.Arguments)
	if len(args) > maxShownArguments {
		args = args[:maxShownArguments] + "… (" + fmt.Sprint(len(r.Arguments)) + " bytes in all)"
	}
	msg := fmt.Sprintf("A program wants to call the tool %s with:\n%s\n\nAllow this call? (%s)", r.Tool, args, r.Rule)
	return &sdk.ElicitParams{Mode: "form", Message: msg, RequestedSchema: approvalSchema}
}

// approvalOf reads a client's answer.
func approvalOf(res *sdk.ElicitResult) codecell.Approval {
	note, _ := res.Content["note"].(string)
	note = strings.TrimSpace(note)
	switch res.Action {
	case "accept":
		return codecell.Approval{Approved: true, By: "mcp client", Reason: note}
	case "decline":
		return codecell.Approval{By: "mcp client", Reason: firstNonEmpty(note, "declined")}
	}
	return codecell.Approval{By: "mcp client", Reason: "dismissed without an answer"}
}
