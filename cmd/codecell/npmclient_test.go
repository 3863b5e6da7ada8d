package main

// These tests drive codecell's MCP server with a client nobody here wrote:
// the official TypeScript SDK's, from npm, at a pinned version, through the
// small script in testdata/npmclient. The script only runs the plan and
// prints what the SDK returned; every assertion is here.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/proc"
	"github.com/codecell-dev/codecell/internal/testenv"
)

// npmSDKVersion is the version of @modelcontextprotocol/sdk whose client
// drives codecell here. Exact, so that a new release cannot change what
// these tests mean without a commit that says so.
const npmSDKVersion = "1.32.2"

// npmSkip skips a test that needs something from outside Go, or fails
// it when CODECELL_REQUIRE_UPSTREAM=1 (as in CI, where a skip would hide
// that the test did not run).
func npmSkip(t *testing.T, format string, args ...any) {
	t.Helper()
	testenv.Missing(t, "CODECELL_REQUIRE_UPSTREAM")(format, args...)
}

// npmSDK returns an npm prefix whose node_modules holds
// @modelcontextprotocol/sdk at npmSDKVersion: $CODECELL_TEST_MCP_SDK, or a
// copy npm installs, once, into a cache under the temporary directory.
func npmSDK(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		npmSkip(t, "node is not installed: %v", err)
	}
	if p := os.Getenv("CODECELL_TEST_MCP_SDK"); p != "" {
		if v := testenv.NPMVersion(p, "@modelcontextprotocol/sdk"); v != npmSDKVersion {
			t.Fatalf("CODECELL_TEST_MCP_SDK=%s holds @modelcontextprotocol/sdk %q, want %s", p, v, npmSDKVersion)
		}
		return p
	}
	return testenv.NPM(t, "@modelcontextprotocol/sdk", npmSDKVersion, testenv.Missing(t, "CODECELL_REQUIRE_UPSTREAM"))
}

// npmPlan is what client.mjs does: connect, run the steps, close.
type npmPlan struct {
	Transport map[string]any `json:"transport"`
	TimeoutMS int            `json:"timeout_ms"`
	Steps     []npmStep      `json:"steps"`
	// Elicit, when set, has the client answer elicitation requests:
	// accept those whose message holds AcceptIf, decline the others.
	Elicit *struct {
		AcceptIf string `json:"accept_if"`
	} `json:"elicit,omitempty"`
}

type npmStep struct {
	Op        string         `json:"op"` // listTools, callTool or ping
	Name      string         `json:"name,omitempty"`
	Arguments map[string]any `json:"arguments,omitempty"`
	TimeoutMS int            `json:"timeout_ms,omitempty"` // then the SDK gives up, and cancels the request
}

// npmLine is a line client.mjs prints: the connection, a step, or the close.
type npmLine struct {
	Op     string          `json:"op"`
	Step   *int            `json:"step"`
	MS     int             `json:"ms"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Message string `json:"message"`
		Code    any    `json:"code"`
	} `json:"error"`

	// connect
	Server *struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"server"`
	Capabilities map[string]json.RawMessage `json:"capabilities"`
	Protocol     *string                    `json:"protocol"` // the version negotiated, where the transport tells

	// elicit
	Message string `json:"message"`

	// close
	CloseMS int `json:"close_ms"`
	Exit    *struct {
		Code   *int    `json:"code"`
		Signal *string `json:"signal"`
	} `json:"exit"`
}

// npmRun is what a run of client.mjs printed.
type npmRun struct {
	Connect npmLine
	Steps   []npmLine
	Close   *npmLine
	Stderr  string // the script's, and for stdio codecell's
	// Elicited are the messages of the elicitation requests the client got.
	Elicited []string
}

// npmRunClient runs client.mjs with the plan and returns its lines.
func npmRunClient(t *testing.T, plan npmPlan) npmRun {
	t.Helper()
	prefix := npmSDK(t)
	// The script beside a node_modules that links to the SDK: ESM resolves
	// bare imports from the script's directory and ignores NODE_PATH.
	dir := t.TempDir()
	script, err := os.ReadFile(filepath.Join("testdata", "npmclient", "client.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "client.mjs"), script, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(prefix, "node_modules"), filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	input, err := json.Marshal(plan)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "client.mjs")
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(input)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// node and the codecell the SDK starts share a process group: a
	// deadline kills both.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	runErr := cmd.Run()

	run := npmRun{Stderr: stderr.String()}
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		var l npmLine
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("client.mjs printed %q: %v\nstderr:\n%s", line, err, run.Stderr)
		}
		switch {
		case l.Op == "connect":
			run.Connect = l
		case l.Op == "close":
			run.Close = &l
		case l.Op == "elicit":
			run.Elicited = append(run.Elicited, l.Message)
		default:
			run.Steps = append(run.Steps, l)
		}
	}
	if run.Connect.Error == nil && (runErr != nil || run.Close == nil || len(run.Steps) != len(plan.Steps)) {
		t.Fatalf("client.mjs: %v, %d of %d steps, closed %v\nstdout:\n%s\nstderr:\n%s",
			runErr, len(run.Steps), len(plan.Steps), run.Close != nil, stdout.String(), run.Stderr)
	}
	return run
}

// npmToolResult is a CallToolResult as the TypeScript SDK returns it.
type npmToolResult struct {
	Content []struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		Data     string `json:"data"` // an image's, base64
		MIMEType string `json:"mimeType"`
	} `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent"`
	IsError           bool            `json:"isError"`
	Meta              struct {
		Codecell struct {
			Run *struct {
				Status codecell.Status `json:"status"`
			} `json:"run"`
			Stats map[string]int64 `json:"stats"`
		} `json:"codecell"`
	} `json:"_meta"`
}

// images are the image contents of the result, decoded, by media type.
func (r *npmToolResult) images(t *testing.T) (mimes []string, data [][]byte) {
	t.Helper()
	for _, c := range r.Content {
		if c.Type != "image" {
			continue
		}
		b, err := base64.StdEncoding.DecodeString(c.Data)
		if err != nil {
			t.Fatalf("image data is not base64: %v", err)
		}
		mimes, data = append(mimes, c.MIMEType), append(data, b)
	}
	return mimes, data
}

func (r *npmToolResult) text() string {
	var b strings.Builder
	for _, c := range r.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

// npmCheck is a step of the scenario and what its line must show.
type npmCheck struct {
	name  string
	step  npmStep
	check func(t *testing.T, l npmLine)
}

func npmExec(tool, language, code, session string) npmStep {
	args := map[string]any{"code": code}
	if language != "" {
		args["language"] = language
	}
	if session != "" {
		args["session"] = session
	}
	return npmStep{Op: "callTool", Name: tool, Arguments: args}
}

// toolResult decodes a step's CallToolResult; a protocol error fails.
func npmCallResult(t *testing.T, l npmLine) *npmToolResult {
	t.Helper()
	if l.Error != nil {
		t.Fatalf("the SDK threw: %s (code %v)", l.Error.Message, l.Error.Code)
	}
	var r npmToolResult
	if err := json.Unmarshal(l.Result, &r); err != nil {
		t.Fatalf("%v\n%s", err, l.Result)
	}
	return &r
}

// npmExecResult decodes an execute or call_tool_chain result and checks that
// its text, isError and structured Result agree on the status.
func npmExecResult(t *testing.T, l npmLine, status codecell.Status) (*codecell.Result, *npmToolResult) {
	t.Helper()
	r := npmCallResult(t, l)
	var res codecell.Result
	if err := json.Unmarshal(r.StructuredContent, &res); err != nil {
		t.Fatalf("structuredContent is not a Result: %v\n%s", err, l.Result)
	}
	if res.Status != status || r.IsError != (status != codecell.StatusSuccess) || !strings.Contains(r.text(), "status: "+string(status)) {
		t.Fatalf("status %q isError %v, want %q and %v; text:\n%s\nstructured: %s", res.Status, r.IsError, status, status != codecell.StatusSuccess, r.text(), r.StructuredContent)
	}
	if m := r.Meta.Codecell; m.Run == nil || m.Run.Status != status || m.Stats == nil {
		t.Errorf("_meta.codecell: %+v", m)
	}
	return &res, r
}

func npmWantValue(t *testing.T, res *codecell.Result, want string) {
	t.Helper()
	var got, w any
	if err := json.Unmarshal(res.Value, &got); err != nil {
		t.Fatalf("value %s: %v (stderr %s)", res.Value, err, res.Stderr)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, w) {
		t.Errorf("value %s, want %s", res.Value, want)
	}
}

func npmWantBlocked(code string) func(*testing.T, npmLine) {
	return func(t *testing.T, l npmLine) {
		res, r := npmExecResult(t, l, codecell.StatusBlocked)
		if res.Error == nil || res.Error.Code != code || !strings.Contains(r.text(), code) {
			t.Errorf("error %+v, want %s; text:\n%s", res.Error, code, r.text())
		}
		if len(res.ToolCalls) != 0 {
			t.Errorf("a refused program called tools: %+v", res.ToolCalls)
		}
	}
}

// npmBlob is binary content for write_file: every byte value.
var npmBlob = func() []byte {
	b := make([]byte, 256)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}()

// npmWantFigure checks that an execute result shows the PNG its program
// drew, as MCP image content, and names it in the text and the file list;
// into, when not nil, receives the image.
func npmWantFigure(t *testing.T, l npmLine, name string, into *[]byte) {
	t.Helper()
	var ran codecell.Result
	if json.Unmarshal(npmCallResult(t, l).StructuredContent, &ran) == nil && strings.Contains(ran.Stderr, "No module named 'matplotlib'") {
		npmSkip(t, "the sandbox's Python has no matplotlib (Debian: python3-matplotlib)")
		return
	}
	res, r := npmExecResult(t, l, codecell.StatusSuccess)
	mimes, data := r.images(t)
	if len(mimes) != 1 || mimes[0] != "image/png" || !bytes.HasPrefix(data[0], []byte("\x89PNG\r\n\x1a\n")) || len(data[0]) < 1000 {
		t.Fatalf("images %v (%d); text:\n%s", mimes, len(data), r.text())
	}
	if len(res.Files) != 1 || res.Files[0].Path != name || res.Files[0].MIME != "image/png" || res.Files[0].Size != int64(len(data[0])) {
		t.Errorf("files %+v", res.Files)
	}
	if want := fmt.Sprintf("file created: %s (%d bytes, image/png, shown below)", name, len(data[0])); !strings.Contains(r.text(), want) {
		t.Errorf("the text lacks %q:\n%s", want, r.text())
	}
	if into != nil {
		*into = data[0]
	}
}

// npmScenario is what a model does with codecell, through the SDK: the
// same for every transport. upstreamPID receives the pid of the upstream
// MCP server, which the last steps ask it for.
func npmScenario(upstreamPID *int) []npmCheck {
	var figure []byte // the plot, as execute showed it
	chainOf := func(n int) string {
		var b strings.Builder
		b.WriteString("n = 0\n")
		for i := range n {
			fmt.Fprintf(&b, "n += len((await call_tool(\"t.echo\", {\"text\": \"%d\"}))[\"text\"]) > 0\n", i)
		}
		b.WriteString("n\n")
		return b.String()
	}
	return []npmCheck{
		{"listTools", npmStep{Op: "listTools"}, func(t *testing.T, l npmLine) {
			var r struct {
				Tools []struct {
					Name        string          `json:"name"`
					Description string          `json:"description"`
					InputSchema json.RawMessage `json:"inputSchema"`
				} `json:"tools"`
			}
			if l.Error != nil || json.Unmarshal(l.Result, &r) != nil {
				t.Fatalf("%+v %s", l.Error, l.Result)
			}
			var names []string
			for _, tool := range r.Tools {
				names = append(names, tool.Name)
				if tool.Name == "execute" {
					// The typed API of the upstream tools, in TypeScript.
					for _, want := range []string{`"t.echo"`, "echo(params: TEchoParams)", "text: string"} {
						if !strings.Contains(tool.Description, want) {
							t.Errorf("execute's description lacks %s:\n%s", want, tool.Description)
						}
					}
					var schema struct {
						Required []string `json:"required"`
					}
					if json.Unmarshal(tool.InputSchema, &schema) != nil || !slices.Equal(schema.Required, []string{"code"}) {
						t.Errorf("execute's input schema: %s", tool.InputSchema)
					}
				}
			}
			slices.Sort(names)
			if want := []string{"call_tool_chain", "execute", "get_required_keys_for_tool", "list_files", "list_tools", "read_file", "search_tools", "session_info", "tools_info", "view_image", "write_file"}; !slices.Equal(names, want) {
				t.Errorf("tools %v, want %v", names, want)
			}
		}},
		{"execute python calls t.echo", npmExec("execute", "", "r = await call_tool(\"t.echo\", {\"text\": \"hi\"})\nr", ""), func(t *testing.T, l npmLine) {
			res, _ := npmExecResult(t, l, codecell.StatusSuccess)
			npmWantValue(t, res, `{"text":"hi"}`)
			if len(res.ToolCalls) != 1 || res.ToolCalls[0].Name != "t.echo" || !res.ToolCalls[0].OK || res.Language != "python" {
				t.Errorf("language %s tool calls %+v", res.Language, res.ToolCalls)
			}
		}},
		{"execute javascript calls tools.t.echo", npmExec("execute", "javascript", `await tools.t.echo({text: "js"})`, ""), func(t *testing.T, l npmLine) {
			res, _ := npmExecResult(t, l, codecell.StatusSuccess)
			npmWantValue(t, res, `{"text":"js"}`)
		}},
		{"call_tool_chain is typescript", npmExec("call_tool_chain", "", "const r: { text: string } = await tools.t.echo({ text: \"ts\" });\nr", ""), func(t *testing.T, l npmLine) {
			res, _ := npmExecResult(t, l, codecell.StatusSuccess)
			npmWantValue(t, res, `{"text":"ts"}`)
			if res.Language != "typescript" {
				t.Errorf("language %q", res.Language)
			}
		}},
		{"search_tools", npmStep{Op: "callTool", Name: "search_tools", Arguments: map[string]any{"query": "echo"}}, func(t *testing.T, l npmLine) {
			r := npmCallResult(t, l)
			var found struct {
				Tools []struct{ Name string } `json:"tools"`
			}
			if err := json.Unmarshal(r.StructuredContent, &found); err != nil || r.IsError || len(found.Tools) == 0 || found.Tools[0].Name != "t.echo" {
				t.Errorf("isError %v, %s", r.IsError, r.StructuredContent)
			}
		}},
		{"tools_info", npmStep{Op: "callTool", Name: "tools_info", Arguments: map[string]any{"names": []string{"t.echo", "t.ech"}}}, func(t *testing.T, l npmLine) {
			r := npmCallResult(t, l)
			var info struct {
				Tools []struct {
					Name, TypeScript, Error string
					InputSchema             json.RawMessage `json:"input_schema"`
				} `json:"tools"`
			}
			if err := json.Unmarshal(r.StructuredContent, &info); err != nil || len(info.Tools) != 2 {
				t.Fatalf("%v %s", err, r.StructuredContent)
			}
			if got := info.Tools[0]; got.Name != "t.echo" || got.Error != "" || !strings.Contains(got.TypeScript, "echo(params: TEchoParams)") || len(got.InputSchema) == 0 {
				t.Errorf("t.echo: %+v", got)
			}
			if got := info.Tools[1]; got.Name != "t.ech" || !strings.Contains(got.Error, `did you mean "t.echo"`) {
				t.Errorf("t.ech: %+v", got)
			}
		}},
		{"get_required_keys_for_tool", npmStep{Op: "callTool", Name: "get_required_keys_for_tool", Arguments: map[string]any{"name": "t.echo"}}, func(t *testing.T, l npmLine) {
			r := npmCallResult(t, l)
			var keys struct{ Required, Optional []string }
			if err := json.Unmarshal(r.StructuredContent, &keys); err != nil || r.IsError || !slices.Equal(keys.Required, []string{"text"}) {
				t.Errorf("isError %v %s", r.IsError, r.StructuredContent)
			}
		}},
		{"empty code", npmExec("execute", "", "", ""), npmWantBlocked("EMPTY_CODE")},
		{"code too large", npmExec("execute", "", strings.Repeat("x = 1\n", 13_000/6+1), ""), npmWantBlocked("CODE_TOO_LARGE")},
		{"31 tool call sites", npmExec("execute", "", chainOf(31), ""), npmWantBlocked("TOOL_CALL_LIMIT")},
		{"30 tool call sites run", npmExec("execute", "", chainOf(30), ""), func(t *testing.T, l npmLine) {
			res, _ := npmExecResult(t, l, codecell.StatusSuccess)
			npmWantValue(t, res, "30")
			if len(res.ToolCalls) != 30 {
				t.Errorf("%d tool calls, want 30", len(res.ToolCalls))
			}
		}},
		{"a raise", npmExec("execute", "", "def f():\n    raise ValueError('boom')\nf()\n", ""), func(t *testing.T, l npmLine) {
			res, _ := npmExecResult(t, l, codecell.StatusFailure)
			if res.Error == nil || res.Error.Code != "SANDBOX_RUNTIME_ERROR" || !strings.Contains(res.Error.Message, "boom") || !strings.Contains(res.Stderr, "ValueError") {
				t.Errorf("error %+v stderr %q", res.Error, res.Stderr)
			}
		}},
		{"unknown MCP tool", npmStep{Op: "callTool", Name: "nope", Arguments: map[string]any{}}, func(t *testing.T, l npmLine) {
			if l.Error == nil || !strings.Contains(l.Error.Message, "nope") {
				t.Fatalf("want the SDK to throw a protocol error naming the tool; got error %+v result %s", l.Error, l.Result)
			}
			t.Logf("the SDK threw: %s (code %v)", l.Error.Message, l.Error.Code)
		}},
		{"session writes", npmExec("execute", "", "with open('note.txt', 'w') as f:\n    f.write('kept')\n'written'", "s1"), func(t *testing.T, l npmLine) {
			res, _ := npmExecResult(t, l, codecell.StatusSuccess)
			if len(res.Files) != 1 || res.Files[0].Path != "note.txt" || res.Files[0].Change != codecell.Created {
				t.Errorf("files %+v", res.Files)
			}
		}},
		{"session reads back", npmExec("execute", "", "open('note.txt').read()", "s1"), func(t *testing.T, l npmLine) {
			res, _ := npmExecResult(t, l, codecell.StatusSuccess)
			npmWantValue(t, res, `"kept"`)
		}},
		// The SDK gives up on a run and sends notifications/cancelled:
		// codecell stops the program, so it never writes "finished".
		{"a cancelled run", npmStep{Op: "callTool", Name: "execute", TimeoutMS: 1500, Arguments: map[string]any{"session": "c",
			"code": "import time\nopen('c.txt', 'w').write('started')\ntime.sleep(2)\nopen('c.txt', 'w').write('finished')"}},
			func(t *testing.T, l npmLine) {
				if l.Error == nil || fmt.Sprint(l.Error.Code) != "-32001" {
					t.Errorf("want the SDK's request timeout (-32001); got error %+v result %s", l.Error, l.Result)
				}
			}},
		{"the cancelled run was stopped", npmExec("execute", "", "import os, time\ntime.sleep(1.5)\nopen('c.txt').read() if os.path.exists('c.txt') else 'absent'", "c"), func(t *testing.T, l npmLine) {
			res, _ := npmExecResult(t, l, codecell.StatusSuccess)
			if string(res.Value) == `"finished"` {
				t.Errorf("the program ran on after the client cancelled it")
			}
		}},
		{"no session, fresh workspace", npmExec("execute", "", "import os\nos.path.exists('note.txt')", ""), func(t *testing.T, l npmLine) {
			res, _ := npmExecResult(t, l, codecell.StatusSuccess)
			npmWantValue(t, res, "false")
		}},
		// Figures and files: a model sees the plot its program drew, and
		// moves files in and out of a session.
		{"a matplotlib figure", npmExec("execute", "", "import matplotlib.pyplot as plt\nplt.plot([1, 4, 9, 16])\nplt.title('squares')\nplt.savefig('squares.png')\n'drawn'", "plots"),
			func(t *testing.T, l npmLine) { npmWantFigure(t, l, "squares.png", &figure) }},
		{"a figure shown without a session", npmExec("execute", "", "import matplotlib.pyplot as plt\nplt.bar([1, 2], [3, 5])\nplt.show()", ""),
			func(t *testing.T, l npmLine) { npmWantFigure(t, l, "figure-1.png", nil) }},
		{"write_file text", npmStep{Op: "callTool", Name: "write_file", Arguments: map[string]any{"session": "plots", "path": "data/in.csv", "content": "x,y\n1,2\n3,4\n"}},
			func(t *testing.T, l npmLine) {
				r := npmCallResult(t, l)
				var w struct {
					Path string
					Size int64
					MIME string
				}
				if err := json.Unmarshal(r.StructuredContent, &w); err != nil || r.IsError || w.Path != "data/in.csv" || w.Size != 12 || w.MIME != "text/plain; charset=utf-8" {
					t.Errorf("%v %s %s", err, r.StructuredContent, r.text())
				}
			}},
		{"write_file base64", npmStep{Op: "callTool", Name: "write_file", Arguments: map[string]any{"session": "plots", "path": "data/blob.bin", "encoding": "base64",
			"content": base64.StdEncoding.EncodeToString(npmBlob)}},
			func(t *testing.T, l npmLine) {
				if r := npmCallResult(t, l); r.IsError {
					t.Errorf("%s", r.text())
				}
			}},
		{"the session's program reads them", npmExec("execute", "", "import csv, hashlib\n[sum(int(r['y']) for r in csv.DictReader(open('data/in.csv'))), hashlib.sha256(open('data/blob.bin', 'rb').read()).hexdigest()]", "plots"),
			func(t *testing.T, l npmLine) {
				res, _ := npmExecResult(t, l, codecell.StatusSuccess)
				sum := sha256.Sum256(npmBlob)
				npmWantValue(t, res, fmt.Sprintf(`[6, %q]`, hex.EncodeToString(sum[:])))
			}},
		{"read_file the figure", npmStep{Op: "callTool", Name: "read_file", Arguments: map[string]any{"session": "plots", "path": "squares.png"}},
			func(t *testing.T, l npmLine) {
				if figure == nil {
					npmSkip(t, "no figure was drawn")
					return
				}
				r := npmCallResult(t, l)
				var got struct{ Encoding, Content, MIME string }
				if err := json.Unmarshal(r.StructuredContent, &got); err != nil || r.IsError || got.Encoding != "base64" || got.MIME != "image/png" {
					t.Fatalf("%v %s", err, r.text())
				}
				if b, _ := base64.StdEncoding.DecodeString(got.Content); !bytes.Equal(b, figure) {
					t.Errorf("read_file gave %d bytes, not the %d of the figure execute showed", len(b), len(figure))
				}
			}},
		{"read_file text", npmStep{Op: "callTool", Name: "read_file", Arguments: map[string]any{"session": "plots", "path": "data/in.csv"}},
			func(t *testing.T, l npmLine) {
				if r := npmCallResult(t, l); r.IsError || !strings.HasSuffix(r.text(), "x,y\n1,2\n3,4\n") {
					t.Errorf("%s", r.text())
				}
			}},
		{"list_files", npmStep{Op: "callTool", Name: "list_files", Arguments: map[string]any{"session": "plots"}},
			func(t *testing.T, l npmLine) {
				r := npmCallResult(t, l)
				var list struct{ Files []struct{ Path, Type string } }
				var got []string
				if err := json.Unmarshal(r.StructuredContent, &list); err != nil || r.IsError {
					t.Fatalf("%v %s", err, r.text())
				}
				for _, f := range list.Files {
					got = append(got, f.Path)
				}
				want := []string{"data", "data/blob.bin", "data/in.csv"}
				if figure != nil {
					want = append(want, "squares.png")
				}
				if !slices.Equal(got, want) {
					t.Errorf("files %v, want %v", got, want)
				}
			}},
		{"view_image", npmStep{Op: "callTool", Name: "view_image", Arguments: map[string]any{"session": "plots", "path": "squares.png"}},
			func(t *testing.T, l npmLine) {
				if figure == nil {
					npmSkip(t, "no figure was drawn")
					return
				}
				r := npmCallResult(t, l)
				if mimes, data := r.images(t); r.IsError || len(mimes) != 1 || mimes[0] != "image/png" || !bytes.Equal(data[0], figure) {
					t.Errorf("images %v: %s", mimes, r.text())
				}
			}},
		{"read_file outside the workspace", npmStep{Op: "callTool", Name: "read_file", Arguments: map[string]any{"session": "plots", "path": "../../etc/passwd"}},
			func(t *testing.T, l npmLine) {
				r := npmCallResult(t, l)
				if !r.IsError || !strings.Contains(r.text(), "INVALID_PATH") || !strings.Contains(r.text(), "hint: ") || strings.Contains(r.text(), "root:") {
					t.Errorf("%s", r.text())
				}
			}},
		// Last: after all of the above the server still works.
		{"still serving", npmExec("execute", "", "(await call_tool(\"t.pid\", {}))[\"pid\"]", ""), func(t *testing.T, l npmLine) {
			res, _ := npmExecResult(t, l, codecell.StatusSuccess)
			if err := json.Unmarshal(res.Value, upstreamPID); err != nil || *upstreamPID <= 0 {
				t.Errorf("t.pid gave %s", res.Value)
			}
		}},
		{"ping", npmStep{Op: "ping"}, func(t *testing.T, l npmLine) {
			if l.Error != nil {
				t.Errorf("ping: %+v", l.Error)
			}
		}},
	}
}

// npmRunScenario runs npmScenario over a transport and checks each step as
// a subtest. It returns the run, and the upstream server's pid.
func npmRunScenario(t *testing.T, transport map[string]any) (npmRun, int) {
	t.Helper()
	var upstreamPID int
	checks := npmScenario(&upstreamPID)
	plan := npmPlan{Transport: transport, TimeoutMS: 60_000}
	for _, c := range checks {
		plan.Steps = append(plan.Steps, c.step)
	}
	run := npmRunClient(t, plan)
	if run.Connect.Error != nil {
		t.Fatalf("connecting: %s\nstderr:\n%s", run.Connect.Error.Message, run.Stderr)
	}
	if run.Connect.Server == nil || run.Connect.Server.Name != "codecell" || run.Connect.Capabilities["tools"] == nil {
		t.Errorf("the server introduced itself as %+v with capabilities %v", run.Connect.Server, run.Connect.Capabilities)
	}
	if p := run.Connect.Protocol; p != nil {
		t.Logf("protocol version %s", *p)
	}
	for i, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			l := run.Steps[i]
			if l.Step == nil || *l.Step != i {
				t.Fatalf("line %d is step %v", i, l.Step)
			}
			c.check(t, l)
		})
	}
	if t.Failed() {
		t.Logf("stderr of the client:\n%s", run.Stderr)
	}
	return run, upstreamPID
}

// npmConfig writes a configuration with the test MCP server as "t".
func npmConfig(t *testing.T) string {
	t.Helper()
	return writeFile(t, "codecell.json", fmt.Sprintf(`{"mcpServers": {"t": {"command": %q}}}`, testenv.MCPServer(t)))
}

// npmWaitExited waits until pid has exited (or is a zombie nobody reaped).
func npmWaitExited(pid int, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		p, ok := proc.Stat(pid)
		if !ok || p.Dead() {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("process %d is still running (state %c) after %v", pid, p.State, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestNPMClientStdio(t *testing.T) {
	t.Parallel()
	npmSDK(t) // first: without node there is nothing to do
	cfg := npmConfig(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	run, upstreamPID := npmRunScenario(t, map[string]any{
		"type": "stdio", "command": self, "args": []string{"mcp", "--config", cfg},
		"env": map[string]string{"CODECELL_TEST_AS_CLI": "1", "TMPDIR": os.TempDir()},
	})
	// Closing the client ends codecell's stdin: codecell exits 0 on its own,
	// before the SDK's SIGTERM 2 s later, and takes its upstream with it.
	if c := run.Close; c.Error != nil || c.Exit == nil || c.Exit.Code == nil || *c.Exit.Code != 0 || c.Exit.Signal != nil || c.CloseMS >= 2000 {
		t.Errorf("close: error %+v, after %d ms, exit %+v; stderr:\n%s", c.Error, c.CloseMS, c.Exit, run.Stderr)
	} else {
		t.Logf("codecell mcp exited 0 %d ms after the client closed", c.CloseMS)
	}
	if upstreamPID > 0 {
		if err := npmWaitExited(upstreamPID, 10*time.Second); err != nil {
			t.Errorf("the upstream MCP server outlived codecell: %v", err)
		}
	}
}

func TestNPMClientHTTP(t *testing.T) {
	t.Parallel()
	srv := startServed(t, []string{"CODECELL_TOKENS=secret"}, "--config", npmConfig(t))
	mcpURL := srv.base + "/mcp"

	t.Run("no token is 401", func(t *testing.T) {
		init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}`
		for _, auth := range []string{"", "Bearer wrong", "secret"} {
			req, err := http.NewRequestWithContext(t.Context(), "POST", mcpURL, strings.NewReader(init))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var env codecell.Envelope
			if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") ||
				json.Unmarshal(body, &env) != nil || env.Code != "UNAUTHORIZED" || env.Message == "" || len(env.Hints) == 0 {
				t.Errorf("Authorization %q: %s %s\n%s", auth, resp.Status, resp.Header.Get("Content-Type"), body)
			}
		}
	})

	t.Run("the SDK with a wrong token", func(t *testing.T) {
		run := npmRunClient(t, npmPlan{Transport: map[string]any{"type": "http", "url": mcpURL, "token": "wrong"}, TimeoutMS: 30_000})
		if run.Connect.Error == nil || !strings.Contains(fmt.Sprint(run.Connect.Error.Code), "401") || !strings.Contains(run.Connect.Error.Message, "UNAUTHORIZED") {
			t.Errorf("connect: %+v", run.Connect.Error)
		}
	})

	_, upstreamPID := npmRunScenario(t, map[string]any{"type": "http", "url": mcpURL, "token": "secret"})

	// SIGTERM ends codecell serve: it exits 0, and its upstream with it.
	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	select {
	case <-srv.done:
		if srv.err != nil {
			t.Errorf("codecell serve after SIGTERM: %v\n%s", srv.err, srv.log())
		} else {
			t.Logf("codecell serve exited 0 %v after SIGTERM", time.Since(start).Round(time.Millisecond))
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("codecell serve still runs 15 s after SIGTERM:\n%s", srv.log())
	}
	if upstreamPID > 0 {
		if err := npmWaitExited(upstreamPID, 10*time.Second); err != nil {
			t.Errorf("the upstream MCP server outlived codecell serve: %v", err)
		}
	}
}

// The TypeScript SDK's client, asked to approve tool calls a rule says to
// ask about (elicitation): it approves one and declines the other, and the
// program sees each answer; the Result's trace says who decided.
func TestNPMClientApprovals(t *testing.T) {
	t.Parallel()
	npmSDK(t)
	cfg := writeFile(t, "codecell.json", fmt.Sprintf(`{"mcpServers": {"t": {"command": %q}}, "tools": {"rules": [{"tool": "t.echo", "action": "ask"}]}}`, testenv.MCPServer(t)))
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	code := "out = [await tools.t.echo(text='approve me')]\ntry:\n    await tools.t.echo(text='not this')\nexcept ToolError as e:\n    out.append(e.envelope['message'])\nout\n"
	plan := npmPlan{
		Transport: map[string]any{"type": "stdio", "command": self, "args": []string{"mcp", "--config", cfg},
			"env": map[string]string{"CODECELL_TEST_AS_CLI": "1", "TMPDIR": os.TempDir()}},
		TimeoutMS: 60_000,
		Steps:     []npmStep{{Op: "callTool", Name: "execute", Arguments: map[string]any{"code": code}}},
	}
	plan.Elicit = &struct {
		AcceptIf string `json:"accept_if"`
	}{AcceptIf: "approve me"}
	run := npmRunClient(t, plan)
	if run.Connect.Error != nil || len(run.Steps) != 1 || run.Steps[0].Error != nil {
		t.Fatalf("connect %+v, steps %+v\nstderr:\n%s", run.Connect.Error, run.Steps, run.Stderr)
	}
	var tr struct {
		StructuredContent codecell.Result `json:"structuredContent"`
	}
	if err := json.Unmarshal(run.Steps[0].Result, &tr); err != nil {
		t.Fatal(err)
	}
	res := tr.StructuredContent
	var got []any
	if err := json.Unmarshal(res.Value, &got); err != nil || len(got) != 2 || fmt.Sprint(got[1]) != "the call to t.echo was not approved by mcp client: declined by the test client" {
		t.Fatalf("value %s (%+v)", res.Value, res.Error)
	}
	if len(run.Elicited) != 2 || !strings.Contains(run.Elicited[0], "t.echo") {
		t.Errorf("the client was asked %q", run.Elicited)
	}
	if len(res.ToolCalls) != 2 || res.ToolCalls[0].Approval == nil || !res.ToolCalls[0].Approval.Approved || res.ToolCalls[1].Approval == nil || res.ToolCalls[1].Approval.Approved {
		t.Errorf("trace %+v", res.ToolCalls)
	}
}
