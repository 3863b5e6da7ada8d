package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/codecell-dev/codecell"
)

// A tool call whose arguments give a key twice is refused with a tool
// error result that names the key, for every tool; a key given twice
// elsewhere in a message (the tool's name) gets a JSON-RPC error. Nothing
// runs, and the next call is served.
func TestDuplicateKeysOverStdio(t *testing.T) {
	marker := t.TempDir() + "/ran"
	c := startStdio(t, testServer(t))
	c.send(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	c.reply(t, "0")
	c.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	call := func(id, params string) map[string]json.RawMessage {
		t.Helper()
		c.send(t, `{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":`+params+`}`)
		return c.reply(t, id)
	}
	type toolResult struct {
		IsError           bool            `json:"isError"`
		StructuredContent json.RawMessage `json:"structuredContent"`
		Content           []struct{ Text string }
	}
	refusedWith := func(msg map[string]json.RawMessage, key, path string) codecell.Envelope {
		t.Helper()
		var res toolResult
		if err := json.Unmarshal(msg["result"], &res); err != nil || !res.IsError {
			t.Fatalf("want a tool error result, got %s", msg["result"])
		}
		var env codecell.Envelope
		if err := json.Unmarshal(res.StructuredContent, &env); err != nil || env.Code == "" {
			// execute's refusal is a Result, which holds the envelope.
			var r codecell.Result
			if err := json.Unmarshal(res.StructuredContent, &r); err != nil || r.Error == nil || r.Status != codecell.StatusBlocked {
				t.Fatalf("neither an envelope nor a blocked Result: %s", res.StructuredContent)
			}
			env = *r.Error
		}
		if env.Kind != codecell.KindValidation || env.Code != codecell.CodeInvalidRequest || !strings.Contains(env.Message, `"`+key+`" twice`) ||
			!strings.Contains(env.Message, path) || !strings.Contains(strings.Join(env.Hints, " "), "give each key once") {
			t.Fatalf("the refusal does not name %q at %q and what to do: %+v", key, path, env)
		}
		return env
	}

	refusedWith(call("1", `{"name":"execute","arguments":{"language":"bash","code":"true","code":"touch `+marker+`"}}`), "code", "")
	refusedWith(call("2", `{"name":"call_tool_chain","arguments":{"code":"1","session":"a","session":"b"}}`), "session", "")
	refusedWith(call("3", `{"name":"execute","arguments":{"language":"bash","code":"true","packages":{"python":["a"],"python":["b"]}}}`), "python", "packages")
	refusedWith(call("4", `{"name":"search_tools","arguments":{"query":"x","limit":1,"limit":50}}`), "limit", "")
	refusedWith(call("5", `{"name":"tools_info","arguments":{"names":["a"],"names":["b"]}}`), "names", "")
	refusedWith(call("6", `{"name":"list_tools","arguments":{"server":"a","\u0073erver":"b"}}`), "server", "")
	refusedWith(call("7", `{"name":"get_required_keys_for_tool","arguments":{"name":"a","name":"b"}}`), "name", "")
	refusedWith(call("71", `{"name":"execute","arguments":{"language":"bash","code":"true","CODE":"touch `+marker+`"}}`), "CODE", "")

	// The tool's name twice: which tool a gateway let through is not the
	// one to run.
	msg := call("8", `{"name":"list_tools","arguments":{},"name":"execute"}`)
	var rpcErr struct {
		Code    int
		Message string
	}
	if err := json.Unmarshal(msg["error"], &rpcErr); err != nil || rpcErr.Code != -32600 || !strings.Contains(rpcErr.Message, `"name" twice`) || !strings.Contains(rpcErr.Message, "params") {
		t.Fatalf("a tool named twice: %s", msg)
	}
	msg = call("81", `{"name":"list_tools","arguments":{},"Name":"execute"}`)
	if err := json.Unmarshal(msg["error"], &rpcErr); err != nil || rpcErr.Code != -32600 || !strings.Contains(rpcErr.Message, `"Name" twice`) || !strings.Contains(rpcErr.Message, "case only") {
		t.Fatalf("a tool named twice, in two spellings: %s", msg)
	}
	c.send(t, `{"jsonrpc":"2.0","id":9,"id":10,"method":"ping"}`)
	if msg := c.reply(t, "null"); !strings.Contains(string(msg["error"]), `\"id\" twice`) {
		t.Fatalf("an id given twice: %s", msg)
	}

	// Valid calls go on being served; the same key in two objects is no
	// duplicate.
	var res toolResult
	if err := json.Unmarshal(call("11", `{"name":"execute","arguments":{"language":"bash","code":"echo ok","packages":{}}}`)["result"], &res); err != nil || res.IsError {
		t.Fatalf("a valid execute: %+v %v", res, err)
	}
	if err := json.Unmarshal(call("12", `{"name":"list_tools","arguments":{}}`)["result"], &res); err != nil || res.IsError {
		t.Fatalf("a valid list_tools: %+v %v", res, err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a refused execute ran")
	}
}

// Over HTTP, a message that gives a key twice is answered 400 with a
// JSON-RPC error, and opens no session.
func TestDuplicateKeysOverHTTP(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ts := httptest.NewServer(testServer(t).HTTPHandler(ctx))
	defer ts.Close()
	post := func(body string) (int, http.Header, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", ts.URL, bytes.NewReader([]byte(body)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, res.Header, string(b)
	}
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}%s}}`
	status, h, body := post(strings.Replace(init, "%s", `,"protocolVersion":"2024-11-05"`, 1))
	if status != 400 || h.Get("Mcp-Session-Id") != "" || !strings.Contains(body, `\"protocolVersion\" twice`) || !strings.Contains(body, `"id":1`) {
		t.Fatalf("a key given twice: %d %s %s", status, h, body)
	}
	status, h, body = post(strings.Replace(init, "%s", "", 1))
	if status != 200 || h.Get("Mcp-Session-Id") == "" {
		t.Fatalf("a valid initialize: %d %s", status, body)
	}
}
