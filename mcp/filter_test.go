package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// longCall is a valid tools/call line of about size bytes, its id first as
// clients write it.
func longCall(id string, size int) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"execute","arguments":{"code":"` +
		strings.Repeat("x", size) + `"}}}` + "\n")
}

// A line over MaxMessage is answered with -32600 under its own id, held no
// longer than MaxMessage bytes, and the lines after it go on.
func TestFilterLinesLongLine(t *testing.T) {
	in := io.MultiReader(
		bytes.NewReader(longCall("7", 17<<20)),
		strings.NewReader(`{"jsonrpc":"2.0","method":"tools/call","params":{"code":"`+strings.Repeat("y", 5<<20)+`"},"id":"late"}`+"\n"),
		strings.NewReader("not json\n"),
		strings.NewReader(`{"jsonrpc":"2.0","id":8,"method":"tools/list"}`+"\n"),
		bytes.NewReader(longCall(`"last"`, MaxMessage)), // no newline at the end
	)
	var good, errs bytes.Buffer
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if err := filterLines(in, &good, &errs, nil); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if grown := after.TotalAlloc - before.TotalAlloc; grown > 4*MaxMessage {
		t.Errorf("filtering 22 MiB of over-long lines allocated %d MiB", grown>>20)
	}
	if good.String() != `{"jsonrpc":"2.0","id":8,"method":"tools/list"}`+"\n" {
		t.Errorf("passed on %.200q", good.String())
	}
	type reply struct {
		ID    json.RawMessage `json:"id"`
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	var replies []reply
	sc := bufio.NewScanner(&errs)
	for sc.Scan() {
		var r reply
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("reply %q: %v", sc.Text(), err)
		}
		replies = append(replies, r)
	}
	want := []struct {
		id   string
		code int
	}{{"7", -32600}, {"null", -32600}, {"null", -32700}, {`"last"`, -32600}}
	if len(replies) != len(want) {
		t.Fatalf("%d replies, want %d: %s", len(replies), len(want), errs.String())
	}
	for i, w := range want {
		if string(replies[i].ID) != w.id || replies[i].Error.Code != w.code {
			t.Errorf("reply %d: id %s code %d (%s), want id %s code %d", i, replies[i].ID, replies[i].Error.Code, replies[i].Error.Message, w.id, w.code)
		}
	}
	if !strings.Contains(replies[0].Error.Message, "4 MiB") {
		t.Errorf("the message does not name the limit: %s", replies[0].Error.Message)
	}
}

func TestIDOf(t *testing.T) {
	for prefix, want := range map[string]string{
		`{"jsonrpc":"2.0","id":12,"method":"x","params":{"a":"cut`: "12",
		`{"jsonrpc":"2.0","id":"a\"b","params":{`:                  `"a\"b"`,
		`{"params":{"id":3},"id":4,"method":"m"`:                   "4",
		`{"params":{"id":3,"x":"cut`:                               "",
		`{"id":{"nested":1}}`:                                      "",
		`{"id":-1.5e3,`:                                            "-1.5e3",
		`[{"id":1}]`:                                               "",
		`{"id":true}`:                                              "",
		"":                                                         "",
		`{"jsonrpc":"2.0","method":"m","params":[1,2,3,{"id":9}],"i`: "",
	} {
		if got := string(idOf([]byte(prefix))); got != want {
			t.Errorf("idOf(%q) = %q, want %q", prefix, got, want)
		}
	}
}

// Over HTTP, a request body over MaxMessage is refused with 413, and the
// server goes on.
func TestHTTPBodyLimit(t *testing.T) {
	s := testServer(t)
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	ts := httptest.NewServer(s.HTTPHandler(ctx))
	t.Cleanup(ts.Close)
	req, _ := http.NewRequest("POST", ts.URL, bytes.NewReader(longCall("1", 17<<20)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a 17 MiB message: %s, want 413", res.Status)
	}
	cs := connectHTTPTest(t, ts.URL)
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Errorf("after the long message: %v", err)
	}
}

// FuzzFilterLines holds the stdio filter to its promises whatever a client
// sends: what it passes on is JSON-RPC 2.0, one message a line, none over
// MaxMessage, and one the SDK's decoder takes (a message it refuses would
// end the session); what it answers is a JSON-RPC error, one a line.
func FuzzFilterLines(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}` + "\n",
		"not json\n\n   \n",
		`{"jsonrpc":"1.0","id":1,"method":"x"}` + "\n",
		`{"jsonrpc":"2.0","id":1,"result":{}}` + "\n" + `{"jsonrpc":"2.0","id":2,"error":{"code":1}}`,
		`{"jsonrpc":"2.0","id":[1],"method":"x"}` + "\n",
		`{"jsonrpc":"2.0","id":true,"method":"ping"}` + "\n" + `{"JSONRPC":"2.0","id":1,"method":"ping"}` + "\n",
		`{"jsonrpc":"2.0","error":5}` + "\n" + `{"jsonrpc":"2.0","id":1e400,"method":"ping"}` + "\n",
		string(longCall("3", MaxMessage+1)),
		string(longCall("4", MaxMessage-100)),
		"\x00\xff\xfe\n{\n}\n",
		strings.Repeat("[", 100000) + "\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var good, errs bytes.Buffer
		if err := filterLines(bytes.NewReader(data), &good, &errs, nil); err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.SplitAfter(good.String(), "\n") {
			if line == "" {
				continue
			}
			if len(line) > MaxMessage {
				t.Fatalf("passed on a line of %d bytes", len(line))
			}
			var msg struct {
				JSONRPC string `json:"jsonrpc"`
			}
			if err := json.Unmarshal([]byte(line), &msg); err != nil || msg.JSONRPC != "2.0" {
				t.Fatalf("passed on %.100q (%v)", line, err)
			}
			if _, err := jsonrpc.DecodeMessage([]byte(line)); err != nil {
				t.Fatalf("passed on %.100q, which the SDK refuses: %v", line, err)
			}
		}
		for _, line := range strings.SplitAfter(errs.String(), "\n") {
			if line == "" {
				continue
			}
			var reply struct {
				JSONRPC string `json:"jsonrpc"`
				ID      json.RawMessage
				Error   *struct{ Code int }
			}
			if err := json.Unmarshal([]byte(line), &reply); err != nil || reply.JSONRPC != "2.0" || reply.Error == nil || len(reply.ID) == 0 {
				t.Fatalf("answered %.100q (%v)", line, err)
			}
		}
	})
}

// A client cannot grow the server by opening MCP sessions without end:
// past MaxHTTPSessions, a new one is refused with 429, and one ended makes
// room for the next.
func TestHTTPSessionsBounded(t *testing.T) {
	s := testServer(t)
	s.MaxHTTPSessions = 2
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	ts := httptest.NewServer(s.HTTPHandler(ctx))
	t.Cleanup(ts.Close)
	connect := func() (*sdk.ClientSession, error) {
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, &sdk.StreamableClientTransport{Endpoint: ts.URL}, nil)
		if err == nil {
			t.Cleanup(func() { cs.Close() })
		}
		return cs, err
	}
	first, err := connect()
	if err != nil {
		t.Fatal(err)
	}
	second, err := connect()
	if err != nil {
		t.Fatal(err)
	}
	if third, err := connect(); err == nil {
		third.Close()
		t.Fatal("a third session was opened past the limit of 2")
	} else if !strings.Contains(err.Error(), "429") && !strings.Contains(err.Error(), "Too Many") {
		t.Errorf("the refusal does not say why: %v", err)
	}
	if _, err := second.ListTools(ctx, nil); err != nil {
		t.Errorf("an open session stopped working: %v", err)
	}
	// Closing sends DELETE; the server ends the session just after it
	// answers. A client refused meanwhile retries, as Retry-After says.
	first.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		third, err := connect()
		if err == nil {
			third.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a session ended 10 s ago, and a new one is still refused: %v", err)
		}
		runtime.Gosched()
	}
}

// A panic in a tool's handler costs that call: the client gets an error
// result, and the server answers the next call.
func TestHandlerPanicCostsOneCall(t *testing.T) {
	s := testServer(t)
	h := s.guarded("boom", func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		var m map[string]int
		m["x"] = 1 // a nil-map write: a panic, as a bug would cause
		return nil, nil
	})
	res, err := h(context.Background(), &sdk.CallToolRequest{})
	if err != nil || res == nil || !res.IsError {
		t.Fatalf("res %+v err %v", res, err)
	}
	if text := res.Content[0].(*sdk.TextContent).Text; !strings.Contains(text, "fault in codecell") {
		t.Errorf("the error says %q", text)
	}
}
