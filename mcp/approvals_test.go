package mcp

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codecell-dev/codecell"
)

// A tool a rule says to ask about: the MCP client is asked with an
// elicitation request; it approves one call and declines another, and the
// program sees each outcome. A client that cannot be asked gets the call
// refused, with the reason.
func TestApprovalsByElicitation(t *testing.T) {
	t.Parallel()
	box := &codecell.Toolbox{}
	if err := box.Add(codecell.Tool{Name: "deploy", Call: func(_ context.Context, p json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`"deployed"`), nil
	}}); err != nil {
		t.Fatal(err)
	}
	s := &Server{Engine: &codecell.Engine{Tier: "local", Tools: box, Policy: codecell.Policy{Tools: codecell.ToolPolicy{
		Rules: []codecell.ToolRule{{Tool: "deploy", Action: "ask"}}}}}}
	var messages []string
	handler := func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
		messages = append(messages, req.Params.Message)
		if strings.Contains(req.Params.Message, `"env": "staging"`) {
			return &sdk.ElicitResult{Action: "accept"}, nil
		}
		return &sdk.ElicitResult{Action: "decline", Content: map[string]any{"note": "not production on a Friday"}}, nil
	}
	// connect connects a client of a protocol version ("" the latest): the
	// latest asks by round trips, older ones by a request while the call
	// is served.
	connect := func(version string, opts *sdk.ClientOptions) *sdk.ClientSession {
		ctx := context.Background()
		ct, st := sdk.NewInMemoryTransports()
		ss, err := s.SDKServer(ctx).Connect(ctx, st, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ss.Close() })
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, opts).Connect(ctx, ct, &sdk.ClientSessionOptions{ProtocolVersion: version})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	code := `out = [await tools.deploy(env="staging")]
try:
    await tools.deploy(env="production")
except ToolError as e:
    out.append(e.envelope["message"])
out
`
	call := func(cs *sdk.ClientSession) codecell.Result {
		res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "execute", Arguments: map[string]any{"code": code}})
		if err != nil {
			t.Fatal(err)
		}
		var r codecell.Result
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("%v: %s", err, b)
		}
		return r
	}
	for _, version := range []string{"", "2025-06-18"} {
		messages = nil
		r := call(connect(version, &sdk.ClientOptions{ElicitationHandler: handler}))
		var got []string
		if err := json.Unmarshal(r.Value, &got); err != nil || strings.Join(got, "|") != "deployed|the call to deploy was not approved by mcp client: not production on a Friday" {
			t.Fatalf("value %s (%+v)", r.Value, r.Error)
		}
		if len(messages) != 2 || !strings.Contains(messages[0], "deploy") || !strings.Contains(messages[0], "config: ask deploy") {
			t.Errorf("the client was asked %q", messages)
		}
		if a := r.ToolCalls[0].Approval; a == nil || !a.Approved || a.By != "mcp client" {
			t.Errorf("trace %+v", r.ToolCalls)
		}
	}
	// A client without elicitation cannot be asked.
	messages = nil
	r := call(connectInProcess(t, s))
	if r.Error == nil || r.Error.Code != "TOOL_FAILED" && !strings.Contains(r.Error.Message, "no one to ask") {
		t.Fatalf("without elicitation: %+v %s", r.Error, r.Value)
	}
	if len(messages) != 0 {
		t.Errorf("a client without elicitation was asked")
	}
}

// A call that continues an execution that is not waiting (a forged or
// stale request state) is refused, and runs nothing.
func TestResumeUnknownExecution(t *testing.T) {
	t.Parallel()
	s := testServer(t)
	cs := connectInProcess(t, s)
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "execute", Arguments: map[string]any{"code": "print(1)"}, RequestState: "0123456789abcdef"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(resultText(res), "no longer waiting") {
		t.Fatalf("%+v %s", res, resultText(res))
	}
	if s.Stats.Executions.Load() != 0 {
		t.Fatal("a program ran")
	}
}
