// Package bridge is the host's side of the tool channel: a sandboxed
// program's tool calls arrive on a socket the host handed into the sandbox,
// as JSON-RPC 2.0 requests, one JSON object per line, and are served at once,
// each in a goroutine of its own. No network is involved.
//
// The wire format, both ways one line each:
//
//	→ {"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"search","arguments":{"q":"x"}}}
//	← {"jsonrpc":"2.0","id":7,"result":<the tool's result>}
//	← {"jsonrpc":"2.0","id":7,"error":{"code":-32000,"data":<error envelope>,"message":"tool call failed"}}
//
// The order of the fields is fixed, and the message of a tool's failure is
// always the same, so that a client without a JSON parser (the shell's
// codecell-tool) can take the result or the envelope apart by their place.
//
// A call may ask for its result as a handle ("as":"handle" in its params):
// the result stays on the host, and the program reads it a page at a time:
//
//	→ {"jsonrpc":"2.0","id":8,"method":"handles/read","params":{"handle":"h1","offset":0,"length":1048576}}
package bridge

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/codecell-dev/codecell/internal/jsonkeys"
)

// ShellClient is the codecell-tool command: a POSIX shell script that
// programs run as `codecell-tool NAME '<json>'`.
//
//go:embed codecell-tool.sh
var ShellClient []byte

// Handler is called for each request in the order the requests arrive,
// before any of them runs: it can count and record them in the program's
// order. The Call it returns runs concurrently with others.
type Handler func(r Request) Call

// The methods of the tool channel.
const (
	MethodCall       = "tools/call"   // call a tool
	MethodHandleRead = "handles/read" // read a page of a result kept as a handle
)

// Request is one request of the program's.
type Request struct {
	// Method is MethodCall or MethodHandleRead.
	Method string
	// Name is the tool to call, and Arguments its arguments (MethodCall).
	Name      string
	Arguments json.RawMessage
	// As is how the program wants the result: "" for the result itself,
	// "handle" for a handle to it (MethodCall).
	As string
	// Handle, Offset and Length say what to read (MethodHandleRead).
	Handle string
	Offset int64
	Length int64
}

// Call serves one tool call. It returns the result as JSON, or an error; an
// *Error reaches the program with its envelope.
type Call func(ctx context.Context) (json.RawMessage, error)

// Error is a failed call as the program sees it.
type Error struct {
	// Envelope is the error envelope, as JSON.
	Envelope json.RawMessage
}

func (e *Error) Error() string { return string(e.Envelope) }

// MaxRequest bounds one request line; a longer one is refused without being
// kept in memory.
const MaxRequest = 8 << 20

// MaxInFlight bounds the calls served at once; more wait their turn.
const MaxInFlight = 64

// JSON-RPC error codes.
const (
	codeParse          = -32700
	codeInvalidRequest = -32600
	codeNoMethod       = -32601
	codeInvalidParams  = -32602
	codeToolFailed     = -32000
)

// Serve answers the requests read from conn until it reaches the end of
// conn or ctx ends, and returns when every call it started has finished. A
// call's ctx ends with Serve's.
func Serve(ctx context.Context, conn io.ReadWriter, h Handler) {
	var (
		wg      sync.WaitGroup
		writeMu sync.Mutex
		slots   = make(chan struct{}, MaxInFlight)
	)
	write := func(resp *response) {
		line, err := json.Marshal(resp)
		if err != nil {
			line, _ = json.Marshal(failure(resp.ID, codeToolFailed, "the result could not be encoded: "+err.Error(), nil))
		}
		writeMu.Lock()
		defer writeMu.Unlock()
		// A program that stopped reading only hurts itself; the host moves on.
		_, _ = conn.Write(append(line, '\n'))
	}
	r := bufio.NewReaderSize(conn, 64<<10)
	for ctx.Err() == nil {
		line, tooLong, err := readLine(r)
		if err != nil {
			break
		}
		if tooLong {
			write(failure(leadingID(line), codeInvalidRequest, "the request is over the 8 MiB limit", nil))
			continue
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var req request
		if err := json.Unmarshal(line, &req); err != nil {
			write(failure(leadingID(line), codeParse, "the request is not JSON ("+err.Error()+"): the arguments must be one JSON object", nil))
			continue
		}
		if d, ok := jsonkeys.IsDuplicate(jsonkeys.CheckFolded(line)); ok {
			// The host would act on the last of the two, and a tool the
			// arguments go on to (an upstream MCP server) may read the
			// first: a rule checked on the one would not hold for the
			// other. Two spellings of a key that differ in case only
			// ("path", "PATH") are two of it too: a rule on the arguments
			// reads the one as written, a tool server that decodes them
			// into a Go struct takes the last. Each id the request gives
			// hears of it, so that no caller waits.
			msg := fmt.Sprintf("the request gives the key %q twice in %s: give each key once", d.Key, d.Where())
			if d.Folded {
				msg = fmt.Sprintf("the request gives the key %q twice in %s, in spellings that differ in case only: give each key once, in one spelling", d.Key, d.Where())
			}
			write(failure(req.ID, codeInvalidRequest, msg, nil))
			if first := leadingID(line); first != nil && !bytes.Equal(first, req.ID) {
				write(failure(first, codeInvalidRequest, msg, nil))
			}
			continue
		}
		if req.JSONRPC != "2.0" || len(req.ID) == 0 {
			write(failure(req.ID, codeInvalidRequest, `a request needs "jsonrpc":"2.0" and an id`, nil))
			continue
		}
		r := Request{Method: req.Method, Name: req.Params.Name, Arguments: req.Params.Arguments, As: req.Params.As,
			Handle: req.Params.Handle, Offset: req.Params.Offset, Length: req.Params.Length}
		switch {
		case req.Method != MethodCall && req.Method != MethodHandleRead:
			write(failure(req.ID, codeNoMethod, "the methods are tools/call and handles/read", nil))
			continue
		case req.Method == MethodCall && req.Params.Name == "":
			write(failure(req.ID, codeInvalidParams, "params.name names the tool to call", nil))
			continue
		case req.Method == MethodCall && req.Params.As != "" && req.Params.As != "handle":
			write(failure(req.ID, codeInvalidParams, `params.as is "handle" or absent`, nil))
			continue
		case req.Method == MethodHandleRead && (req.Params.Handle == "" || req.Params.Offset < 0 || req.Params.Length < 0):
			write(failure(req.ID, codeInvalidParams, "params.handle names the handle to read, from params.offset (0 or more) for params.length bytes", nil))
			continue
		}
		call := h(r)
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			res, err := call(ctx)
			var be *Error
			switch {
			case err == nil:
				write(&response{JSONRPC: "2.0", ID: req.ID, Result: nonNull(res)})
			case errors.As(err, &be):
				write(failure(req.ID, codeToolFailed, "tool call failed", be.Envelope))
			default:
				write(failure(req.ID, codeToolFailed, err.Error(), nil))
			}
		}()
	}
	wg.Wait()
}

// readLine reads one line, without its newline. A line over MaxRequest is
// read to its end and dropped, and reported as too long, with its first
// bytes, where its id is.
func readLine(r *bufio.Reader) ([]byte, bool, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) <= MaxRequest {
			line = append(line, chunk...)
		} else {
			head := append([]byte(nil), line[:min(len(line), maxHead)]...)
			line = nil
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = r.ReadSlice('\n')
			}
			if err != nil {
				return nil, false, err
			}
			return head, true, nil
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			if err == io.EOF && len(line) > 0 {
				return bytes.TrimSuffix(line, []byte("\n")), false, nil
			}
			return nil, false, err
		}
		return bytes.TrimSuffix(line, []byte("\n")), false, nil
	}
}

// maxHead is how much of a request too long to take is kept to find its id.
const maxHead = 4 << 10

// leadingID finds the id of a request that could not be taken whole (not
// JSON, or too long) among the members of its object before the fault, so
// that its answer still reaches the caller waiting for it: with calls served
// at once, an answer with no id belongs to no one. The shell client writes
// the id before the arguments, which it cannot check.
func leadingID(line []byte) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil
		}
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil
		}
		if key == "id" {
			switch val[0] {
			case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
				return val
			}
			return nil
		}
	}
	return nil
}

func nonNull(res json.RawMessage) json.RawMessage {
	if len(res) == 0 {
		return json.RawMessage("null")
	}
	return res
}

type request struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		As        string          `json:"as"`
		Handle    string          `json:"handle"`
		Offset    int64           `json:"offset"`
		Length    int64           `json:"length"`
	} `json:"params"`
}

// response's fields keep this order on the wire: the shell client relies on
// it.
type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

// rpcError puts data before message: the shell client finds the envelope
// as what follows the first "data": and precedes the last ,"message":.
type rpcError struct {
	Code    int             `json:"code"`
	Data    json.RawMessage `json:"data,omitempty"`
	Message string          `json:"message"`
}

func failure(id json.RawMessage, code int, msg string, data json.RawMessage) *response {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	return &response{JSONRPC: "2.0", ID: id, Error: &rpcError{Code: code, Data: data, Message: msg}}
}
