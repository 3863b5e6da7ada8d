//go:build linux

package native_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/tier/native"
)

// A handle lasts as long as its cell: one a later cell reads is refused,
// never another cell's result under the same name.
func TestLiveHandleOfAnEarlierCell(t *testing.T) {
	e := &codecell.Engine{Tier: native.Name, Tools: &codecell.Toolbox{}}
	err := e.Tools.Add(codecell.Tool{Name: "echo", Call: func(_ context.Context, params json.RawMessage) (json.RawMessage, error) {
		var in struct{ V string }
		if err := json.Unmarshal(params, &in); err != nil {
			return nil, err
		}
		return json.Marshal(in.V)
	}})
	if err != nil {
		t.Fatal(err)
	}
	s := newLiveSession(t, e)
	wantKept(t, s.cell("h = await call_tool('echo', {'V': 'first cell'}, {'as': 'handle'})\nawait h.text()"), "first cell")
	res := s.cell(`mine = await call_tool('echo', {'V': 'second cell'}, {'as': 'handle'})
try:
    r = await h.text()
except ToolError as e:
    r = e.envelope['error_code']
[r, await mine.text()]`)
	wantKept(t, res, nil)
	var got []string
	if err := json.Unmarshal(res.Value, &got); err != nil || len(got) != 2 || got[0] != codecell.CodeNoSuchHandle || got[1] != "second cell" {
		t.Errorf("the first cell's handle read in the second: %s", res.Value)
	}
}

// A call a cell leaves in flight is answered (cancelled) when the cell
// ends: the thread that waits for it goes on, in a later cell, rather than
// waiting for good.
func TestLiveCallLeftInFlight(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	e := &codecell.Engine{Tier: native.Name, Tools: &codecell.Toolbox{}}
	for _, tool := range []codecell.Tool{
		{Name: "slow", Call: func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-release:
				return json.RawMessage(`"late"`), nil
			}
		}},
		{Name: "ping", Call: func(context.Context, json.RawMessage) (json.RawMessage, error) { return json.RawMessage(`"pong"`), nil }},
	} {
		if err := e.Tools.Add(tool); err != nil {
			t.Fatal(err)
		}
	}
	s := newLiveSession(t, e)
	// slow's request is written before ping's: the host has it once ping
	// is answered.
	wantKept(t, s.cell(`import threading
out = []
def wait():
    try:
        out.append(call_tool_sync('slow', {}))
    except ToolError as e:
        out.append(e.envelope['error_code'])
waiter = threading.Thread(target=wait, daemon=True)
waiter.start()
while not getattr(call_tool_sync.__self__, 'waiting', None):
    pass
call_tool_sync('ping')`), "pong")
	res := s.cell("waiter.join(5)\n[waiter.is_alive(), out]")
	wantKept(t, res, nil)
	if string(res.Value) != `[false, ["TOOL_FAILED"]]` && string(res.Value) != `[false,["TOOL_FAILED"]]` {
		t.Errorf("the call left in flight: %s", res.Value)
	}
}
