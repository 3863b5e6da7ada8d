package mcp

import (
	"context"
	"encoding/json"
	"path/filepath"
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
	cs, _ := connectNativeSessions(t)
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

// On the native tier, the file tools reach a live session's files and a
// files session's: a file written between cells is in the next cell's
// workspace (and the interpreter keeps its variables), a cell's files are
// read back, and images come back from the sandbox with the result, with a
// session or without one.
func TestFilesNativeMCP(t *testing.T) {
	testenv.RequireNative(t, native.Default.Probe)
	store, err := csession.NewStore(t.TempDir(), time.Hour, 10)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	s := &Server{Engine: &codecell.Engine{Tier: native.Name, Tools: &codecell.Toolbox{}, TempDir: t.TempDir()}, Sessions: store}
	cs := connectInProcess(t, s)
	images := func(res *sdk.CallToolResult) (out []string) {
		for _, c := range res.Content {
			if im, ok := c.(*sdk.ImageContent); ok {
				out = append(out, im.MIMEType+":"+string(im.Data[8:]))
			}
		}
		return out
	}
	png := `open('plot.png','wb').write(b'\x89PNG\r\n\x1a\n' + WORD)`

	r, _ := run(t, cs, map[string]any{"session": "nb", "live": true, "code": "x = 41"})
	if r.Status != codecell.StatusSuccess || r.SessionState != codecell.SessionKept {
		t.Fatalf("%+v", r)
	}
	call(t, cs, "write_file", map[string]any{"session": "nb", "path": "in/data.txt", "content": "between cells"}, nil)
	r, res := run(t, cs, map[string]any{"session": "nb", "code": "x += 1\n" + strings.ReplaceAll(png, "WORD", "b'live'") + "\nopen('out.txt','w').write(str(x))\nopen('in/data.txt').read()"})
	if string(r.Value) != `"between cells"` || r.SessionState != codecell.SessionKept {
		t.Fatalf("the cell after write_file: %s %+v %q", r.Value, r.Error, r.Stderr)
	}
	if got := images(res); len(got) != 1 || got[0] != "image/png:live" {
		t.Fatalf("the live cell's images: %v\n%s", got, resultText(res))
	}
	var got fileRead
	call(t, cs, "read_file", map[string]any{"session": "nb", "path": "out.txt"}, &got)
	if got.Content != "42" {
		t.Fatalf("read_file of the cell's file: %+v", got)
	}
	if res := call(t, cs, "view_image", map[string]any{"session": "nb", "path": "plot.png"}, nil); res.IsError || images(res)[0] != "image/png:live" {
		t.Fatalf("view_image: %s", resultText(res))
	}
	var list fileList
	call(t, cs, "list_files", map[string]any{"session": "nb"}, &list)
	if len(list.Files) != 4 { // in, in/data.txt, out.txt, plot.png
		t.Fatalf("list_files: %+v", list.Files)
	}

	call(t, cs, "write_file", map[string]any{"session": "plain", "path": "run.sh", "content": "echo from the script", "mode": "755"}, nil)
	r, _ = run(t, cs, map[string]any{"session": "plain", "language": "bash", "code": "./run.sh"})
	if r.Stdout != "from the script\n" {
		t.Fatalf("the files session: %+v %q", r.Error, r.Stdout)
	}

	r, res = run(t, cs, map[string]any{"code": strings.ReplaceAll(png, "WORD", "b'one-shot'")})
	if got := images(res); r.Status != codecell.StatusSuccess || len(got) != 1 || got[0] != "image/png:one-shot" {
		t.Fatalf("the images of a run without a session: %v\n%s", got, resultText(res))
	}
	if left, _ := filepath.Glob(filepath.Join(s.Engine.TempDir, "codecell-ws-*")); len(left) > 0 {
		t.Fatalf("left behind: %v", left)
	}
}

// connectNativeSessions connects a client in this process to a server
// that runs on the native tier and keeps sessions in store, as live
// sessions need.
func connectNativeSessions(t *testing.T) (*sdk.ClientSession, *csession.Store) {
	t.Helper()
	testenv.RequireNative(t, native.Default.Probe)
	store, err := csession.NewStore(t.TempDir(), time.Hour, 10)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	return connectInProcess(t, &Server{Engine: &codecell.Engine{Tier: native.Name, Tools: &codecell.Toolbox{}}, Sessions: store}), store
}
