package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/api"
	"github.com/codecell-dev/codecell/client"
	"github.com/codecell-dev/codecell/server"
	"github.com/codecell-dev/codecell/session"
)

// Over REST, a call a rule says to ask about is an approval event on the
// execution's stream; the client answers it with POST
// /v1/executions/{exec}/approvals/{id}: one call approved, one refused with
// a reason. Another token cannot answer; an execution that is not
// streamed has no one to ask.
func TestApprovalsOverSSE(t *testing.T) {
	t.Parallel()
	const otherToken = "other-token-77aa"
	f := newLocalFixture(t, func(s *server.Server) {
		s.Tokens = append(s.Tokens, server.Token{Token: otherToken, Principal: session.Principal{Name: "other"}})
		s.Engine.Policy.Tools.Rules = []codecell.ToolRule{{Tool: "deploy", Action: "ask"}}
	})
	if err := f.srv.Engine.Tools.Add(codecell.Tool{Name: "deploy", Call: func(context.Context, json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`"deployed"`), nil
	}}); err != nil {
		t.Fatal(err)
	}
	other := client.New(f.http.URL, otherToken)
	var mu sync.Mutex
	var asked []codecell.ApprovalRequest
	var otherErr error
	f.c.Approve = func(ctx context.Context, r codecell.ApprovalRequest) api.ApprovalAnswer {
		mu.Lock()
		asked = append(asked, r)
		mu.Unlock()
		if strings.Contains(string(r.Arguments), "staging") {
			// Another token's answer is refused, and changes nothing.
			err := other.AnswerApproval(ctx, r.ExecID, r.ID, api.ApprovalAnswer{Approve: false, Reason: "other"})
			mu.Lock()
			otherErr = err
			mu.Unlock()
			return api.ApprovalAnswer{Approve: true}
		}
		return api.ApprovalAnswer{Reason: "not production"}
	}
	code := "out = [await tools.deploy(env='staging')]\ntry:\n    await tools.deploy(env='production')\nexcept ToolError as e:\n    out.append(e.envelope['message'])\nout\n"
	res, err := f.c.Stream(context.Background(), "", api.Execution{Language: "python", Code: code}, nil)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	var got []string
	if err := json.Unmarshal(res.Value, &got); err != nil || strings.Join(got, "|") != "deployed|the call to deploy was not approved by tester: not production" {
		t.Fatalf("value %s (%+v)", res.Value, res.Error)
	}
	if len(asked) != 2 || asked[0].ExecID != res.ID || asked[0].Tool != "deploy" {
		t.Errorf("asked %+v", asked)
	}
	var ce *client.Error
	if otherErr == nil || !errors.As(otherErr, &ce) || ce.Status != 404 || ce.Envelope.Code != server.CodeNoSuchApproval {
		t.Errorf("another token's answer: %v", otherErr)
	}
	if a := res.ToolCalls[0].Approval; a == nil || !a.Approved || a.By != "tester" {
		t.Errorf("trace %+v", res.ToolCalls)
	}
	// Not streamed: no one to ask.
	plain, err := f.c.Execute(context.Background(), "", api.Execution{Language: "python", Code: "try:\n    await tools.deploy()\nexcept ToolError as e:\n    r = e.envelope['message']\nr\n"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(plain.Value), "no one to ask") {
		t.Errorf("not streamed: %s", plain.Value)
	}
	// An answer to nothing.
	if err := f.c.AnswerApproval(context.Background(), "nope", "a1", api.ApprovalAnswer{Approve: true}); !errors.As(err, &ce) || ce.Status != 404 {
		t.Errorf("an answer to nothing: %v", err)
	}
}
