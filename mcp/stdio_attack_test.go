package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"testing"
)

// stdioClient runs RunIO on pipes, as codecell mcp runs on stdin and
// stdout, and is the client at their other ends.
type stdioClient struct {
	in    io.WriteCloser
	lines chan []byte // what the server writes, line by line
	done  chan error
}

func startStdio(t *testing.T, s *Server) *stdioClient {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	c := &stdioClient{in: inW, lines: make(chan []byte, 1024), done: make(chan error, 1)}
	go func() {
		err := s.RunIO(ctx, inR, outW)
		outW.CloseWithError(fmt.Errorf("RunIO returned: %v", err))
		c.done <- err
	}()
	// The server's output is read as it comes: a server blocked writing
	// would stop reading.
	go func() {
		defer close(c.lines)
		r := bufio.NewReader(outR)
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				c.lines <- []byte(err.Error())
				return
			}
			c.lines <- line
		}
	}()
	t.Cleanup(func() {
		cancel()
		inW.Close()
		outR.Close()
		<-c.done
	})
	return c
}

func (c *stdioClient) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(c.in, line+"\n"); err != nil {
		t.Fatalf("sending %.80q: %v", line, err)
	}
}

// reply reads messages until the response of id (as JSON), skipping
// notifications.
func (c *stdioClient) reply(t *testing.T, id string) map[string]json.RawMessage {
	t.Helper()
	for line := range c.lines {
		var msg map[string]json.RawMessage
		if err := json.Unmarshal(line, &msg); err != nil {
			t.Fatalf("the server wrote %q: %v", line, err)
		}
		if string(msg["id"]) == id {
			return msg
		}
	}
	t.Fatalf("the server's output ended before the reply to id %s", id)
	return nil
}

// No line a client sends ends codecell mcp: a message the SDK's decoder
// would refuse, which would end its session and so the process, is
// answered with a JSON-RPC error instead, and the next request is served.
func TestStdioSurvivesBadMessages(t *testing.T) {
	c := startStdio(t, testServer(t))
	c.send(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	c.reply(t, "0")
	c.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	bad := []string{
		`{"jsonrpc":"2.0","id":true,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":false,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`,
		`{"jsonrpc":"2.0","id":[1],"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1e400,"method":"ping"}`,
		`{"JSONRPC":"2.0","id":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","Method":"ping","id":1}`,
		`{"jsonrpc":"2.0","error":5}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":"x"}}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":1e400}}`,
		`{"jsonrpc":"2.0","result":{}}`,
		`{"jsonrpc":"2.0","id":123456,"result":{}}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping","params":5}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[]}`,
		`{"jsonrpc":"2.0","id":1,"method":""}`,
		`{"jsonrpc":"2.0","id":"\ud800","method":"ping"}`,
		"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":\"ping\"}",
		`{"jsonrpc":"2.0","jsonrpc":"1.0","id":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99999}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":true}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":5}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized","params":5}`,
		`{"jsonrpc":"2.0","method":"notifications/roots/list_changed","params":[]}`,
		`[]`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`,
	}
	for i, line := range bad {
		t.Logf("sending %s", line)
		c.send(t, line)
		id := fmt.Sprint(1000 + i)
		c.send(t, `{"jsonrpc":"2.0","id":`+id+`,"method":"ping"}`)
		if msg := c.reply(t, id); msg["result"] == nil {
			t.Fatalf("after %s, ping got %v", line, msg)
		}
	}
}
