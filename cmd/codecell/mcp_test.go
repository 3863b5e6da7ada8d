package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/proc"
	"github.com/codecell-dev/codecell/internal/testenv"
)

// cliCommand is this test binary acting as the codecell CLI.
func cliCommand(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "CODECELL_TEST_AS_CLI=1")
	return cmd
}

func mcpConfig(t *testing.T) string {
	t.Helper()
	return writeFile(t, "codecell.json", `{"mcpServers": {"t": {"command": "`+testenv.MCPServer(t)+`"}}}`)
}

func deadlineCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// connectStdio starts `codecell mcp` and connects the official Go SDK's
// client to it.
func connectStdio(t *testing.T, cfg string) *sdk.ClientSession {
	t.Helper()
	return connectStdioWith(t, cfg, nil)
}

func connectStdioWith(t *testing.T, cfg string, opts *sdk.ClientOptions) *sdk.ClientSession {
	t.Helper()
	cmd := cliCommand("mcp", "--config", cfg, "--log", writeFile(t, "mcp.log", ""))
	client := sdk.NewClient(&sdk.Implementation{Name: "codecell-test", Version: "1"}, opts)
	cs, err := client.Connect(deadlineCtx(t, 30*time.Second), &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// call calls a tool and returns the result and its structured content as
// a Result (for execute) or raw JSON.
func call(t *testing.T, cs *sdk.ClientSession, name string, args any) (*sdk.CallToolResult, json.RawMessage) {
	t.Helper()
	res, err := cs.CallTool(deadlineCtx(t, 60*time.Second), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	structured, _ := json.Marshal(res.StructuredContent)
	return res, structured
}

func text(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func execute(t *testing.T, cs *sdk.ClientSession, tool string, args map[string]any) (*sdk.CallToolResult, *codecell.Result) {
	t.Helper()
	res, structured := call(t, cs, tool, args)
	var r codecell.Result
	if err := json.Unmarshal(structured, &r); err != nil {
		t.Fatalf("%s: the structured content is not a Result: %v\n%s", tool, err, structured)
	}
	return res, &r
}

// exerciseServer runs the same checks over any transport. reconnect, if not
// nil, opens a new session: an HTTP client closes its own after a refused
// request.
func exerciseServer(t *testing.T, cs *sdk.ClientSession, reconnect func() *sdk.ClientSession) {
	tools, err := cs.ListTools(deadlineCtx(t, 30*time.Second), nil)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]*sdk.Tool{}
	for _, tool := range tools.Tools {
		names[tool.Name] = tool
	}
	for _, want := range []string{"execute", "call_tool_chain", "search_tools", "list_tools", "tools_info", "get_required_keys_for_tool"} {
		if names[want] == nil {
			t.Fatalf("no tool %s among %v", want, names)
		}
	}
	if d := names["execute"].Description; !strings.Contains(d, "await call_tool(") || !strings.Contains(d, `"t.echo"`) {
		t.Errorf("execute's description should teach code mode and declare the upstream tools:\n%s", d)
	}

	res, r := execute(t, cs, "execute", map[string]any{"code": "r = await call_tool('t.echo', {'text': 'hi'})\nprint('called')\nr"})
	if r.Status != codecell.StatusSuccess || string(r.Value) != `{"text":"hi"}` || res.IsError || !strings.Contains(text(res), "status: success") || !strings.Contains(text(res), "called") {
		t.Errorf("execute python: %+v\n%s", r, text(res))
	}
	if meta, ok := res.Meta["codecell"].(map[string]any); !ok || meta["run"] == nil || meta["stats"] == nil {
		t.Errorf("_meta: %v", res.Meta)
	}
	_, r = execute(t, cs, "execute", map[string]any{"language": "javascript", "code": "await tools.t.echo({ text: 'js' })"})
	if r.Status != codecell.StatusSuccess || string(r.Value) != `{"text":"js"}` {
		t.Errorf("execute javascript: %+v", r)
	}
	_, r = execute(t, cs, "call_tool_chain", map[string]any{"code": "const r: unknown = await callTool('t.echo', { text: 'ts' });\nr"})
	if r.Status != codecell.StatusSuccess || string(r.Value) != `{"text":"ts"}` || r.Language != "typescript" {
		t.Errorf("call_tool_chain: %+v", r)
	}

	_, found := call(t, cs, "search_tools", map[string]any{"query": "echo back the text"})
	var search struct{ Tools []struct{ Name string } }
	if json.Unmarshal(found, &search) != nil || len(search.Tools) == 0 || search.Tools[0].Name != "t.echo" {
		t.Errorf("search_tools: %s", found)
	}
	_, info := call(t, cs, "tools_info", map[string]any{"names": []string{"t.echo", "t.ech"}})
	if !strings.Contains(string(info), "interface") || !strings.Contains(string(info), `did you mean \"t.echo\"?`) {
		t.Errorf("tools_info: %s", info)
	}
	_, keys := call(t, cs, "get_required_keys_for_tool", map[string]any{"name": "t.echo"})
	if !strings.Contains(string(keys), `"required":["text"]`) {
		t.Errorf("get_required_keys_for_tool: %s", keys)
	}
	_, list := call(t, cs, "list_tools", map[string]any{"server": "t"})
	if !strings.Contains(string(list), `"t.crash"`) {
		t.Errorf("list_tools: %s", list)
	}

	// Refused before running, each with an envelope that says what to do.
	for _, c := range []struct {
		name, code, want string
	}{
		{"empty", "  ", codecell.CodeEmptyCode},
		{"too large", strings.Repeat("x = 1\n", 2200), codecell.CodeCodeTooLarge},
		{"too many calls", strings.Repeat("await call_tool('t.echo', {'text': 'x'})\n", 31), codecell.CodeToolCallLimit},
	} {
		res, r := execute(t, cs, "execute", map[string]any{"code": c.code})
		if r.Status != codecell.StatusBlocked || r.Error == nil || r.Error.Code != c.want || !res.IsError || len(r.Error.Hints) == 0 {
			t.Errorf("%s: %+v", c.name, r)
		}
	}
	res, r = execute(t, cs, "execute", map[string]any{"code": "1/0"})
	if r.Status != codecell.StatusFailure || !res.IsError || !strings.Contains(text(res), "ZeroDivisionError") {
		t.Errorf("a failing program: %+v", r)
	}
	// Sessions keep their files.
	_, r = execute(t, cs, "execute", map[string]any{"session": "s1", "code": "open('note.txt', 'w').write('kept')"})
	if r.Status != codecell.StatusSuccess {
		t.Errorf("session, first run: %+v", r)
	}
	_, r = execute(t, cs, "execute", map[string]any{"session": "s1", "code": "open('note.txt').read()"})
	if string(r.Value) != `"kept"` {
		t.Errorf("session, second run: %+v", r)
	}
	// Bad calls: an unknown tool, arguments of the wrong shape, huge
	// arguments. The server says what is wrong and goes on.
	if _, err := cs.CallTool(deadlineCtx(t, 30*time.Second), &sdk.CallToolParams{Name: "nope", Arguments: map[string]any{}}); err == nil {
		t.Error("calling an unknown MCP tool should fail")
	}
	res, r = execute(t, cs, "execute", map[string]any{"code": 42})
	if r.Status != codecell.StatusBlocked || !res.IsError {
		t.Errorf("code as a number: %+v", r)
	}
	// Code under that bound and over the code size: the Engine refuses it.
	big, err := cs.CallTool(deadlineCtx(t, 30*time.Second), &sdk.CallToolParams{Name: "execute", Arguments: map[string]any{"code": strings.Repeat("#", 1<<20)}})
	if err != nil {
		t.Errorf("1 MiB of code: %v", err)
	} else if s, _ := json.Marshal(big.StructuredContent); !strings.Contains(string(s), codecell.CodeCodeTooLarge) {
		t.Errorf("1 MiB of code: %s", s)
	}
	// A message over 4 MiB is refused, and the server goes on: over stdio
	// with a JSON-RPC error, over HTTP with 413.
	if _, err := cs.CallTool(deadlineCtx(t, 30*time.Second), &sdk.CallToolParams{Name: "execute", Arguments: map[string]any{"code": strings.Repeat("#", 6<<20)}}); err == nil ||
		!strings.Contains(err.Error(), "Too Large") && !strings.Contains(err.Error(), "over the 4 MiB limit") {
		t.Errorf("6 MiB of code: %v", err)
	}
	if reconnect != nil {
		cs = reconnect()
	}
	_, r = execute(t, cs, "execute", map[string]any{"code": "'still up'"})
	if string(r.Value) != `"still up"` {
		t.Errorf("after the bad calls: %+v", r)
	}
}

func TestMCPStdio(t *testing.T) {
	exerciseServer(t, connectStdio(t, mcpConfig(t)), nil)
}

// startServe starts `codecell serve` on a free port and returns its MCP URL.
func startServe(t *testing.T, cfg string, env ...string) string {
	t.Helper()
	return startServed(t, env, "--config", cfg, "--log", writeFile(t, "serve.log", "")).base + "/mcp"
}

type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

func connectHTTP(t *testing.T, url, token string) *sdk.ClientSession {
	t.Helper()
	return connectHTTPWith(t, url, token, nil)
}

func connectHTTPWith(t *testing.T, url, token string, opts *sdk.ClientOptions) *sdk.ClientSession {
	t.Helper()
	client := sdk.NewClient(&sdk.Implementation{Name: "codecell-test", Version: "1"}, opts)
	transport := &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}}
	cs, err := client.Connect(deadlineCtx(t, 30*time.Second), transport, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func TestMCPHTTP(t *testing.T) {
	url := startServe(t, mcpConfig(t), "CODECELL_TOKENS=secret-1,secret-2")
	// Without a token: 401, with an envelope.
	resp, err := http.Post(url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), `"error_code":"UNAUTHORIZED"`) {
		t.Errorf("without a token: %d %s", resp.StatusCode, body)
	}
	health, err := http.Get(strings.TrimSuffix(url, "/mcp") + "/healthz")
	if err != nil || health.StatusCode != 200 {
		t.Errorf("/healthz: %v %v", health, err)
	}
	exerciseServer(t, connectHTTP(t, url, "secret-2"), func() *sdk.ClientSession { return connectHTTP(t, url, "secret-2") })

	// The counters of what the clients did, for Prometheus, behind the token.
	metricsURL := strings.TrimSuffix(url, "/mcp") + "/metrics"
	if resp, err := http.Get(metricsURL); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("/metrics without a token: %v %v", resp, err)
	}
	req, _ := http.NewRequest("GET", metricsURL, nil)
	req.Header.Set("Authorization", "Bearer secret-1")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, name := range []string{"executions", "chains", "searches", "discovery", "guardrail_blocks", "tool_calls"} {
		m := regexp.MustCompile(`(?m)^codecell_mcp_` + name + `_total (\d+)`).FindSubmatch(metrics)
		if m == nil || string(m[1]) == "0" {
			t.Errorf("/metrics: codecell_mcp_%s_total is missing or zero:\n%s", name, metrics)
		}
	}
}

func TestServeRefusesWithoutTokenOffLoopback(t *testing.T) {
	exit, _, stderr := cli(t, "", "serve", "--addr", "0.0.0.0:0")
	if exit != exitUsage || !strings.Contains(stderr, "loopback only") {
		t.Errorf("exit %d stderr %s", exit, stderr)
	}
}

// A client that goes away in the middle of an execution: the program is
// killed, nothing of it is left, and the server serves the next client.
func TestMCPClientDisconnects(t *testing.T) {
	url := startServe(t, mcpConfig(t))
	word := fmt.Sprintf("ccmcp%d", time.Now().UnixNano())
	cs := connectHTTP(t, url, "")
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan bool, 1)
	go func() {
		for i := 0; i < 500 && len(markedProcesses(word)) == 0; i++ {
			time.Sleep(20 * time.Millisecond)
		}
		started <- len(markedProcesses(word)) > 0
		cancel() // the client gives up on the call
		cs.Close()
	}()
	_, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "execute", Arguments: map[string]any{
		"language": "bash", "code": "exec -a " + word + " sleep 300"}})
	if err == nil {
		t.Fatal("the cancelled call returned a result")
	}
	if !<-started {
		t.Fatal("the program was not seen running before the client gave up: nothing was tested")
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(markedProcesses(word)) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if left := markedProcesses(word); len(left) > 0 {
		t.Errorf("the abandoned program is still running: %v", left)
	}
	_, r := execute(t, connectHTTP(t, url, ""), "execute", map[string]any{"code": "'next client'"})
	if string(r.Value) != `"next client"` {
		t.Errorf("the next client: %+v", r)
	}
}

func markedProcesses(word string) []int {
	var pids []int
	for _, p := range proc.List() {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.PID))
		if err == nil && strings.Contains(string(b), word) && p.State != 'Z' {
			pids = append(pids, p.PID)
		}
	}
	return pids
}

// Malformed JSON-RPC on stdio gets an error response, and the server goes
// on.
func TestMCPMalformedInput(t *testing.T) {
	cmd := cliCommand("mcp")
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func() string {
		select {
		case l := <-lines:
			return l
		case <-time.After(20 * time.Second):
			t.Fatal("no answer")
		}
		return ""
	}
	fmt.Fprintln(in, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if l := next(); !strings.Contains(l, `"serverInfo"`) {
		t.Fatalf("initialize: %s", l)
	}
	fmt.Fprintln(in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	fmt.Fprintln(in, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"execute","arguments":{"code":"1+1"}`) // cut short
	fmt.Fprintln(in, `not json at all`)
	fmt.Fprintln(in, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"execute","arguments":{"code":"6*7"}}}`)
	var got string
	for i := 0; i < 4; i++ {
		l := next()
		if strings.Contains(l, `"id":3`) {
			got = l
			break
		}
	}
	if !strings.Contains(got, `"value":42`) {
		t.Errorf("after malformed input the server should still answer: %s", got)
	}
}

// A hung upstream server does not hold up `codecell mcp`: the client's
// initialize and tools/list are answered while it is still starting, the
// other server's tools are declared, and execute's description names the
// one still starting.
func TestMCPWithAHungUpstream(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	cfg := writeFile(t, "codecell.json", `{"mcpServers": {"t": {"command": "`+testenv.MCPServer(t)+`"}, "hung": {"command": "`+sleep+`", "args": ["300"]}}}`)
	changed := make(chan struct{}, 16)
	cs := connectStdioWith(t, cfg, &sdk.ClientOptions{
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) { changed <- struct{}{} },
	})
	timeout := time.After(60 * time.Second)
	for {
		desc := executeDescription(t, cs)
		// Its start timeout is 60 s: "still starting" means nobody waited.
		if !strings.Contains(desc, `MCP server "hung" is still starting`) {
			t.Fatalf("execute's description:\n%s", desc)
		}
		if strings.Contains(desc, `"t.echo"`) {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("the ready server's tools never came:\n%s", desc)
		}
	}
}

// Upstream servers that misbehave in every way a server may (one ignores
// server/discover, one never answers initialize, one never answers
// tools/list, one floods notifications) hold up neither `codecell mcp` nor
// `codecell serve`, nor each other: initialize and tools/list are answered
// at once, the good server's tools come first, and the one that ignores
// server/discover comes once the discovery's bound has passed, not its
// start timeout.
func TestMCPWithMisbehavingUpstreams(t *testing.T) {
	server := testenv.MCPServer(t)
	raw := func(mode string) string { return `{"command": "` + server + `", "args": ["raw", "` + mode + `"]}` }
	cfg := `{"mcpServers": {"t": {"command": "` + server + `"}, "legacy": ` + raw("legacy") +
		`, "silent": ` + raw("silent") + `, "nolist": ` + raw("no-list") + `, "flood": ` + raw("flood") + `}}`
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			changed := make(chan struct{}, 1)
			opts := &sdk.ClientOptions{
				ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
					select {
					case changed <- struct{}{}:
					default:
					}
				},
			}
			began := time.Now()
			var cs *sdk.ClientSession
			if transport == "stdio" {
				cs = connectStdioWith(t, writeFile(t, "codecell.json", cfg), opts)
			} else {
				url := startServe(t, writeFile(t, "codecell.json", cfg), "CODECELL_TOKENS=tok")
				began = time.Now()
				cs = connectHTTPWith(t, url, "tok", opts)
			}
			t.Logf("initialize answered after %s", time.Since(began))
			timeout := time.After(50 * time.Second) // under the 60 s start timeout
			seen := map[string]bool{}
			for {
				desc := executeDescription(t, cs)
				for _, name := range []string{`"t.echo"`, `"legacy.echo"`, `"flood.echo"`} {
					if !seen[name] && strings.Contains(desc, name) {
						seen[name] = true
						t.Logf("%s in execute's description after %s", name, time.Since(began))
					}
				}
				if seen[`"t.echo"`] && seen[`"legacy.echo"`] && seen[`"flood.echo"`] {
					if !strings.Contains(desc, `MCP server "silent" is still starting`) {
						t.Errorf("execute's description does not name the silent server:\n%s", desc)
					}
					return
				}
				select {
				case <-changed:
				case <-timeout:
					t.Fatalf("tools missing after %s (seen %v):\n%s", time.Since(began), seen, desc)
				}
			}
		})
	}
}

// executeDescription lists cs's tools and returns execute's description
// ("" when there is no execute).
func executeDescription(t *testing.T, cs *sdk.ClientSession) string {
	t.Helper()
	tools, err := cs.ListTools(deadlineCtx(t, 30*time.Second), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		if tool.Name == "execute" {
			return tool.Description
		}
	}
	return ""
}
