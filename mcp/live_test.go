package mcp

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/testenv"
	csession "github.com/codecell-dev/codecell/session"
	"github.com/codecell-dev/codecell/tier/native"
)

// A live session over MCP: execute with live on a new session's first call
// keeps its interpreter, later calls find their variables, restart starts
// afresh, and live on a session that keeps files is refused.
func TestLiveSessionMCP(t *testing.T) {
	testenv.RequireNative(t, native.Default.Probe)
	store, err := csession.NewStore(t.TempDir(), time.Hour, 10)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	s := &Server{Engine: &codecell.Engine{Tier: native.Name, Tools: &codecell.Toolbox{}}, Sessions: store}
	cs := connectInProcess(t, s)
	call := func(args map[string]any) codecell.Result {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "execute", Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		var r codecell.Result
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		if r.SessionState != "" && !strings.Contains(resultText(res), "interpreter "+r.SessionState) {
			t.Errorf("the text does not say the interpreter's state: %s", resultText(res))
		}
		return r
	}
	r := call(map[string]any{"session": "nb", "live": true, "code": "cities = {'Oslo': 3, 'Lima': 19}\nlen(cities)"})
	if r.Status != codecell.StatusSuccess || string(r.Value) != "2" || r.SessionState != codecell.SessionKept {
		t.Fatalf("%+v", r)
	}
	r = call(map[string]any{"session": "nb", "code": "max(cities, key=cities.get)"})
	if string(r.Value) != `"Lima"` {
		t.Fatalf("the second call: %s %+v %q", r.Value, r.Error, r.Stderr)
	}
	info, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "session_info", Arguments: map[string]any{"session": "nb"}})
	if err != nil || info.IsError || !strings.Contains(resultText(info), "cities: dict = {'Lima': 19, 'Oslo': 3}") || !strings.Contains(resultText(info), "session nb: live, 2 executions") {
		t.Fatalf("session_info: %v %s", err, resultText(info))
	}
	if info, _ := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "session_info", Arguments: map[string]any{"session": "never"}}); !info.IsError {
		t.Fatalf("session_info made a session: %s", resultText(info))
	}
	r = call(map[string]any{"session": "nb", "restart": true, "code": "'cities' in globals()"})
	if string(r.Value) != "false" {
		t.Fatalf("after restart: %s", r.Value)
	}
	r = call(map[string]any{"session": "files", "code": "1"})
	if r.Status != codecell.StatusSuccess || r.SessionState != "" {
		t.Fatalf("%+v", r)
	}
	r = call(map[string]any{"session": "files", "live": true, "code": "1"})
	if r.Status != codecell.StatusBlocked || r.Error == nil || !strings.Contains(r.Error.Message, "keeps files only") {
		t.Fatalf("%+v", r)
	}
}
