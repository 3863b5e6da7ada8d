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
	"github.com/codecell-dev/codecell/mcp/upstream"
	csession "github.com/codecell-dev/codecell/session"
)

// newUpstream is an upstream server of the test MCP server, closed when the
// test ends.
func newUpstream(t *testing.T, name string, cfg upstream.ServerConfig) *upstream.Upstream {
	t.Helper()
	cfg.Command = testenv.MCPServer(t)
	u := upstream.NewUpstream(name, cfg)
	t.Cleanup(func() { u.Close() })
	return u
}

// A server that never answers does not hold up the client: initialize and
// tools/list are answered while it is still starting, execute's description
// says so, and when a slow server comes up the client hears that the list
// changed and finds its tools in the new description.
func TestUpstreamsStartInTheBackground(t *testing.T) {
	t.Parallel()
	fifo, open := testenv.Gate(t)
	hung := newUpstream(t, "hung", upstream.ServerConfig{Args: []string{"hang-at-start"}})
	slow := newUpstream(t, "slow", upstream.ServerConfig{Args: []string{"gate", fifo}})
	box := &codecell.Toolbox{}
	for _, u := range []*upstream.Upstream{hung, slow} {
		if err := box.AddSource(u); err != nil {
			t.Fatal(err)
		}
	}
	s := &Server{Engine: &codecell.Engine{Tier: "local", Tools: box}}

	changed := make(chan struct{}, 16)
	ctx := context.Background()
	cs := connectInProcessWith(t, s, &sdk.ClientOptions{
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) { changed <- struct{}{} },
	})

	// Both are still starting: the slow one cannot be anything else until
	// its gate opens, so everything below was answered without it.
	desc := executeDescriptionOf(t, cs)
	for _, want := range []string{`MCP server "hung" is still starting`, `MCP server "slow" is still starting`} {
		if !strings.Contains(desc, want) {
			t.Errorf("execute's description does not say %s:\n%s", want, desc)
		}
	}
	if st := slow.Status(); st.State != codecell.SourceStarting {
		t.Fatalf("the slow server is %s before its gate opened", st)
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "list_tools", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if text := resultText(res); !strings.Contains(text, `"slow" is still starting`) {
		t.Errorf("list_tools does not name the server still starting:\n%s", text)
	}

	open()
	testenv.WaitState(t, slow, codecell.SourceReady)
	for {
		desc = executeDescriptionOf(t, cs)
		if strings.Contains(desc, "slow.echo") {
			break
		}
		select {
		case <-changed:
		case <-time.After(60 * time.Second):
			t.Fatalf("no notifications/tools/list_changed brought the slow server's tools:\n%s", desc)
		}
	}
	if strings.Contains(desc, `"slow" is still starting`) {
		t.Errorf("the description still says the slow server is starting:\n%s", desc)
	}
	if !strings.Contains(desc, `"hung" is still starting`) {
		t.Errorf("the description no longer names the hung server:\n%s", desc)
	}
}

func executeDescriptionOf(t *testing.T, cs *sdk.ClientSession) string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range res.Tools {
		if tool.Name == "execute" {
			return tool.Description
		}
	}
	t.Fatal("no execute tool")
	return ""
}

func resultText(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// search_tools finds a tool by its params' names and descriptions too, and
// still ranks a match in the name first.
func TestSearchMatchesParams(t *testing.T) {
	tools := []codecell.Tool{
		{Name: "gh.list", Description: "Lists things.", InputSchema: []byte(`{"type":"object","properties":{"repository":{"type":"string","description":"owner/name of the repo"},"label":{"type":"string"}}}`)},
		{Name: "gh.get_issue", Description: "Gets one issue."},
		{Name: "fs.read", Description: "Reads a file.", InputSchema: []byte(`{"type":"object","properties":{"path":{"type":"string","description":"the file's path"}}}`)},
	}
	names := func(ts []codecell.Tool) string {
		var out []string
		for _, t := range ts {
			out = append(out, t.Name)
		}
		return strings.Join(out, ",")
	}
	if got := names(Search(tools, "label", 10)); got != "gh.list" {
		t.Errorf("label: %s", got)
	}
	if got := names(Search(tools, "owner", 10)); got != "gh.list" {
		t.Errorf("owner (in a param's description): %s", got)
	}
	if got := names(Search(tools, "issue repository", 10)); got != "gh.get_issue,gh.list" {
		t.Errorf("issue repository: %s", got)
	}
	if got := names(Search(tools, "nothing", 10)); got != "" {
		t.Errorf("nothing: %s", got)
	}
}

// Deleting a session ends the program that runs in it at once, over MCP as
// over REST, and the client is told why; an execution that asks for more
// than its session allows is refused, not quietly given less.
func TestDeletingTheSessionEndsTheMCPRun(t *testing.T) {
	t.Parallel()
	started := make(chan struct{}, 1)
	box := &codecell.Toolbox{}
	if err := box.Add(codecell.Tool{Name: "started", Call: func(context.Context, json.RawMessage) (json.RawMessage, error) {
		started <- struct{}{}
		return json.RawMessage("true"), nil
	}}); err != nil {
		t.Fatal(err)
	}
	store, err := csession.NewStore(t.TempDir(), time.Hour, 10)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	s := &Server{Engine: &codecell.Engine{Tier: "local", Tools: box}, Sessions: store}
	cs := connectInProcess(t, s)

	type outcome struct {
		res *sdk.CallToolResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "execute", Arguments: map[string]any{
			"session": "doomed", "code": "import time\nawait call_tool('started')\ntime.sleep(120)\n"}})
		done <- outcome{res, err}
	}()
	select {
	case <-started:
	case o := <-done:
		t.Fatalf("the program ended before it started: %v %s", o.err, resultText(o.res))
	}
	ses := store.List(csession.Local())
	if len(ses) != 1 {
		t.Fatalf("%d sessions", len(ses))
	}
	if err := store.Delete(csession.Local(), ses[0].ID); err != nil {
		t.Fatal(err)
	}
	var o outcome
	select {
	case o = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the run went on after its session was deleted")
	}
	if o.err != nil {
		t.Fatal(o.err)
	}
	var r codecell.Result
	b, _ := json.Marshal(o.res.StructuredContent)
	if err := json.Unmarshal(b, &r); err != nil || r.Error == nil || r.Error.Code != csession.CodeDeleted {
		t.Fatalf("result %s", b)
	}

	// A session with a timeout of 1s: asking for 2s is refused.
	made, err := store.Create(csession.Local(), csession.Options{Limits: codecell.Limits{Timeout: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "execute", Arguments: map[string]any{
		"session": made.ID, "code": "1", "timeout_seconds": 2}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ = json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &r); err != nil || r.Status != codecell.StatusBlocked || r.Error == nil || r.Error.Code != csession.CodeLimitTooHigh {
		t.Fatalf("result %s", b)
	}
}

// A server that failed to start is named in execute's description with
// why and what to change, and says once that a call starts it again.
func TestFailedUpstreamInTheDescription(t *testing.T) {
	t.Parallel()
	hung := upstream.NewUpstream("hung", upstream.ServerConfig{Command: testenv.MCPServer(t), Args: []string{"hang-at-start"}},
		upstream.WithStartTimeout(300*time.Millisecond))
	t.Cleanup(func() { hung.Close() })
	box := &codecell.Toolbox{}
	if err := box.AddSource(hung); err != nil {
		t.Fatal(err)
	}
	box.Start()
	testenv.WaitState(t, hung, codecell.SourceFailed)
	s := &Server{Engine: &codecell.Engine{Tier: "local", Tools: box}}
	desc := executeDescriptionOf(t, connectInProcessWith(t, s, nil))
	for _, want := range []string{`MCP server "hung" is unavailable`, "start timeout of 300ms", `raise "start_timeout" in mcpServers.hung`} {
		if !strings.Contains(desc, want) {
			t.Errorf("execute's description lacks %q:\n%s", want, desc)
		}
	}
	if n := strings.Count(desc, "starts it again"); n != 1 {
		t.Errorf("execute's description says %d times that a call starts the server again:\n%s", n, desc)
	}
}

// The discovery tools, called first thing, wait as the first listing does
// for the servers still starting: a search made before a server came up
// finds its tools, not none.
func TestDiscoveryWaitsForTheFirstStarts(t *testing.T) {
	t.Parallel()
	fifo, open := testenv.Gate(t)
	slow := newUpstream(t, "slow", upstream.ServerConfig{Args: []string{"gate", fifo}})
	box := &codecell.Toolbox{}
	if err := box.AddSource(slow); err != nil {
		t.Fatal(err)
	}
	s := &Server{Engine: &codecell.Engine{Tier: "local", Tools: box}, FirstListWait: time.Minute}
	cs := connectInProcessWith(t, s, nil)
	found := make(chan string, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "search_tools", Arguments: map[string]any{"query": "echo"}})
		if err != nil {
			found <- err.Error()
			return
		}
		found <- resultText(res)
	}()
	open()
	if text := <-found; !strings.Contains(text, "slow.echo") {
		t.Errorf("search_tools, called while the server started, did not find its tools:\n%s", text)
	}
}
