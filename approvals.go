package codecell

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"
)

// ApprovalRequest is a tool call that a rule ("action": "ask") says a
// person must approve before it goes on. The program waits meanwhile.
type ApprovalRequest struct {
	// ID names the request among its Exec's: "a1", "a2", ….
	ID string `json:"id"`
	// ExecID is the Result's ID of the run that asks.
	ExecID string `json:"exec_id"`
	// Tool is the tool the program calls, and Arguments what it sends.
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	// Rule is the rule that asks, with its layer.
	Rule string `json:"rule"`
	// Deadline is when the call is refused if no one has answered.
	Deadline time.Time `json:"deadline"`
}

// Approval is a person's answer.
type Approval struct {
	Approved bool `json:"approved"`
	// By says who answered: a token's name, "mcp client", "terminal".
	By string `json:"by,omitempty"`
	// Reason is what they said, if anything; it reaches the program with
	// a refusal.
	Reason string `json:"reason,omitempty"`
}

// Approver asks a person about a call and returns their answer; it
// returns an error when it cannot ask (no one to ask, the client went
// away) or ctx ends first, and the call is refused.
type Approver func(ctx context.Context, r ApprovalRequest) (Approval, error)

// DefaultApprovalWait bounds how long a call waits for its approval. The
// run's time bounds it too: a call is refused once nine tenths of the time
// its run had left when it asked have passed, so that the program has the
// rest to handle the refusal (a run that asks needs a timeout long enough
// for a person to answer).
const DefaultApprovalWait = 5 * time.Minute

// approvalWait is how long a call may wait for its approval when its run
// ends at deadline (if ok).
func approvalWait(now, deadline time.Time, ok bool) time.Duration {
	if !ok {
		return DefaultApprovalWait
	}
	return min(DefaultApprovalWait, deadline.Sub(now)*9/10)
}

// ToolApproval is how a call that a rule said to ask about was decided, as
// the Result's tool trace shows it.
type ToolApproval struct {
	Approved bool   `json:"approved"`
	By       string `json:"by,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// WaitedMS is how long the program waited for the answer.
	WaitedMS float64 `json:"waited_ms"`
}

// approvals numbers an Exec's approval requests.
type approvals struct{ n atomic.Int64 }

// ask asks the Exec's Approver about a call, and returns the refusal to
// give the program, if it is not approved, with the trace's record.
func (s *toolSession) ask(ctx context.Context, name string, params json.RawMessage, rule string) (*ToolApproval, *Envelope) {
	start := time.Now()
	if s.x.Approver == nil {
		rec := &ToolApproval{Reason: "no one to ask"}
		return rec, Errorf(KindTool, CodeToolDenied, "the call to %s needs a person's approval (%s), and this run has no one to ask", name, rule).WithHints(
			"run it where a person can answer: over MCP with a client that supports elicitation, over REST with a stream (SSE), or with codecell run at a terminal",
			"or do without this tool")
	}
	runEnd, ok := ctx.Deadline()
	ctx, cancel := context.WithTimeout(ctx, approvalWait(start, runEnd, ok))
	defer cancel()
	deadline, _ := ctx.Deadline()
	req := ApprovalRequest{ID: "a" + strconv.FormatInt(s.approvals.n.Add(1), 10), ExecID: s.execID,
		Tool: name, Arguments: params, Rule: rule, Deadline: deadline}
	a, _, err := detach(ctx, func() (Approval, error) { return s.x.Approver(ctx, req) })
	rec := &ToolApproval{Approved: err == nil && a.Approved, By: a.By, Reason: a.Reason,
		WaitedMS: float64(time.Since(start).Microseconds()) / 1000}
	switch {
	case err != nil && (errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil):
		rec.Reason = "no answer in time"
		return rec, Errorf(KindTool, CodeToolDenied, "the call to %s needed a person's approval (%s), and no one answered in time", name, rule).WithHints(
			"do without this tool, or try again when someone can answer")
	case err != nil:
		rec.Reason = err.Error()
		return rec, Errorf(KindTool, CodeToolDenied, "the call to %s needed a person's approval (%s), and they could not be asked: %v", name, rule, err).WithHints(
			"do without this tool")
	case !a.Approved:
		msg := fmt.Sprintf("the call to %s was not approved", name)
		if a.By != "" {
			msg += " by " + a.By
		}
		if a.Reason != "" {
			msg += ": " + a.Reason
		}
		return rec, Errorf(KindTool, CodeToolDenied, "%s", msg).WithHints(
			"do without this tool, or call it with what the person would approve")
	}
	return rec, nil
}
