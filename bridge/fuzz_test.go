package bridge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/codecell-dev/codecell/internal/jsonkeys"
)

// programEnd is the host's end of a tool channel whose program wrote data
// and then closed its end.
type programEnd struct {
	r  io.Reader
	mu sync.Mutex
	w  bytes.Buffer
}

func (p *programEnd) Read(b []byte) (int, error) { return p.r.Read(b) }
func (p *programEnd) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.w.Write(b)
}

// FuzzServe holds the tool channel to its promises whatever the sandboxed
// program writes: Serve returns at the end of its input, and every line it
// writes back is a JSON-RPC 2.0 response with a result or an error.
func FuzzServe(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"a":1}}}` + "\n",
		"not json\n\n",
		`{"jsonrpc":"2.0","id":{"x":[1,2]},"method":"tools/call","params":{"name":"echo"}}` + "\n",
		`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"other"}` + "\n" + `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{}}`,
		strings.Repeat("[", 20000) + "\n",
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":"` + strings.Repeat("\xff", 1000) + `"}}` + "\n",
		strings.Repeat("x", MaxRequest+10) + "\n" + `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo"}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"a":}}}` + "\n",
		`{"jsonrpc":"2.0","id":"` + strings.Repeat("[", 5000) + `","method":"tools/call","params":{"name":"echo","arguments":[}}` + "\n",
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":"` + strings.Repeat("y", MaxRequest) + `"}}` + "\n",
		`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"echo","arguments":{},"as":"handle"}}` + "\n",
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","as":"value"}}` + "\n",
		`{"jsonrpc":"2.0","id":8,"method":"handles/read","params":{"handle":"h1","offset":0,"length":10}}` + "\n",
		`{"jsonrpc":"2.0","id":9,"method":"handles/read","params":{"handle":"","offset":-1}}` + "\n",
		`{"jsonrpc":"2.0","id":10,"method":"handles/read","params":{"handle":"h1","offset":1e400}}` + "\n",
		`{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"echo","arguments":{"a":1,"a":2}}}` + "\n",
		`{"jsonrpc":"2.0","id":12,"id":13,"method":"tools/call","params":{"name":"echo","name":"fail"}}` + "\n",
		`{"jsonrpc":"2.0","id":14,"method":"tools/call","params":{"name":"echo","arguments":{"path":"/tmp/x","PATH":"/etc/passwd"}}}` + "\n",
		`{"jsonrpc":"2.0","id":15,"method":"tools/call","params":{"name":"echo","NAME":"fail"}}` + "\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		conn := &programEnd{r: bytes.NewReader(data)}
		Serve(context.Background(), conn, handler(func(_ context.Context, name string, params json.RawMessage) (json.RawMessage, error) {
			if name == "fail" {
				return nil, &Error{Envelope: json.RawMessage(`{"error_code":"X"}`)}
			}
			if _, dup := jsonkeys.IsDuplicate(jsonkeys.CheckFolded(params)); dup {
				t.Errorf("arguments that give a key twice reached the tool: %s", params)
			}
			return params, nil
		}))
		sc := bufio.NewScanner(&conn.w)
		sc.Buffer(nil, 2*MaxRequest)
		for sc.Scan() {
			var resp struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Result  json.RawMessage `json:"result"`
				Error   json.RawMessage `json:"error"`
			}
			if err := json.Unmarshal(sc.Bytes(), &resp); err != nil || resp.JSONRPC != "2.0" || (resp.Result == nil) == (resp.Error == nil) {
				t.Fatalf("wrote %.200q (%v)", sc.Text(), err)
			}
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	})
}
