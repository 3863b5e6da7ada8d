package mcp

import (
	"context"
	"encoding/json"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codecell-dev/codecell"
	csession "github.com/codecell-dev/codecell/session"
)

// A client that sends execute calls without waiting for their answers gets
// at most MaxRunning programs running at once: one more is refused,
// retryably, and runs nothing; once a program ends, the next one runs.
func TestRunningProgramsBounded(t *testing.T) {
	t.Parallel()
	started := make(chan struct{}, 4)
	proceed := make(chan struct{})
	ran := make(chan struct{}, 4)
	box := &codecell.Toolbox{}
	for _, tool := range []codecell.Tool{
		{Name: "hold", Call: func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
			started <- struct{}{}
			select {
			case <-proceed:
			case <-ctx.Done():
			}
			return json.RawMessage("true"), nil
		}},
		{Name: "ran", Call: func(context.Context, json.RawMessage) (json.RawMessage, error) {
			ran <- struct{}{}
			return json.RawMessage("true"), nil
		}},
	} {
		if err := box.Add(tool); err != nil {
			t.Fatal(err)
		}
	}
	s := &Server{Engine: &codecell.Engine{Tier: "local", Tools: box}, MaxRunning: 2}
	cs := connectInProcess(t, s)
	call := func(code string) codecell.Result {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "execute",
			Arguments: map[string]any{"code": code}})
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
	held := make(chan codecell.Result, 2)
	for range 2 {
		go func() { held <- call("await call_tool('hold')\nprint('held')") }()
	}
	<-started
	<-started
	r := call("await call_tool('ran')")
	if r.Error == nil || r.Error.Code != csession.CodeTooManyExecutions || !r.Error.Retryable {
		t.Fatalf("a third program while two run: %+v, want a retryable %s", r.Error, csession.CodeTooManyExecutions)
	}
	if len(ran) != 0 {
		t.Fatal("the refused program ran")
	}
	close(proceed)
	for range 2 {
		if r := <-held; r.Error != nil || r.Stdout != "held\n" {
			t.Fatalf("a held program: %+v", r)
		}
	}
	if r := call("await call_tool('ran')"); r.Error != nil || len(ran) != 1 {
		t.Fatalf("a program after the others ended: %+v", r.Error)
	}
}
