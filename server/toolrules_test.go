package server_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/api"
)

// A session's rates count the calls of all its executions, over REST: the
// session's second call of a tool allowed once per session is refused, in
// the next execution too; a session of its own starts from nothing.
func TestSessionToolRate(t *testing.T) {
	t.Parallel()
	f := newLocalFixture(t, nil)
	if err := f.srv.Engine.Tools.Add(codecell.Tool{Name: "ping", Call: func(context.Context, json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`"pong"`), nil
	}}); err != nil {
		t.Fatal(err)
	}
	spec := api.SessionSpec{Policy: &api.Policy{Tools: &codecell.ToolPolicy{Rates: []codecell.ToolRate{{Tool: "ping", PerSession: 1}}}}}
	code := "try:\n    r = await call_tool('ping')\nexcept ToolError as e:\n    r = e.envelope['error_code']\nr\n"
	ses := f.session(t, spec)
	other := f.session(t, spec)
	for i, c := range []struct{ session, want string }{
		{ses.ID, `"pong"`}, {ses.ID, `"TOOL_RATE_LIMITED"`}, {other.ID, `"pong"`},
	} {
		res, err := f.c.Execute(context.Background(), c.session, api.Execution{Language: "python", Code: code})
		if err != nil {
			t.Fatal(err)
		}
		if string(res.Value) != c.want {
			t.Fatalf("execution %d: value %s, want %s (%+v)", i+1, res.Value, c.want, res.Error)
		}
	}
}
