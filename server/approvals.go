package server

import (
	"context"
	"net/http"
	"sync"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/api"
	"github.com/codecell-dev/codecell/session"
)

// approvalBoard holds the tool calls that wait for a person's answer, asked
// on their execution's event stream, by execution and request ID.
type approvalBoard struct {
	mu      sync.Mutex
	waiting map[string]*waitingApproval
}

type waitingApproval struct {
	owner string
	reply chan codecell.Approval
}

// approver asks on stream, for p's execution.
func (b *approvalBoard) approver(p *session.Principal, stream *eventStream) codecell.Approver {
	owner := principalName(p)
	return func(ctx context.Context, r codecell.ApprovalRequest) (codecell.Approval, error) {
		key := r.ExecID + "/" + r.ID
		w := &waitingApproval{owner: owner, reply: make(chan codecell.Approval, 1)}
		b.mu.Lock()
		if b.waiting == nil {
			b.waiting = map[string]*waitingApproval{}
		}
		b.waiting[key] = w
		b.mu.Unlock()
		defer func() {
			b.mu.Lock()
			delete(b.waiting, key)
			b.mu.Unlock()
		}()
		stream.send(api.EventApproval, r)
		select {
		case a := <-w.reply:
			return a, nil
		case <-ctx.Done():
			return codecell.Approval{}, ctx.Err()
		}
	}
}

func principalName(p *session.Principal) string {
	if p == nil {
		return ""
	}
	return p.Name
}

// answerApproval takes a person's answer to a call that waits:
// {"approve": true} lets it go on, {"approve": false, "reason": "..."}
// refuses it. Only the execution's own principal may answer.
func (s *Server) answerApproval(w http.ResponseWriter, r *http.Request) {
	var a api.ApprovalAnswer
	if env := s.decodeSmall(w, r, &a); env != nil {
		writeError(w, env)
		return
	}
	p := caller(r)
	key := r.PathValue("exec") + "/" + r.PathValue("id")
	s.approvals.mu.Lock()
	wa := s.approvals.waiting[key]
	if wa != nil && wa.owner == principalName(p) {
		delete(s.approvals.waiting, key)
	} else {
		wa = nil
	}
	s.approvals.mu.Unlock()
	if wa == nil {
		writeError(w, codecell.Errorf(codecell.KindValidation, CodeNoSuchApproval, "no call of yours waits for approval %s of execution %s", r.PathValue("id"), r.PathValue("exec")).WithHints(
			"answer an approval event of an execution you are streaming, before its deadline; each is answered once"))
		return
	}
	by := principalName(p)
	if by == "" {
		by = "rest client"
	}
	wa.reply <- codecell.Approval{Approved: a.Approve, By: by, Reason: a.Reason}
	writeJSON(w, http.StatusOK, map[string]any{"approved": a.Approve})
}
