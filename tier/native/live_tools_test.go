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
