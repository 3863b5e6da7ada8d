package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Run serves MCP over stdin and stdout until the client goes away or ctx
// ends.
func (s *Server) Run(ctx context.Context) error {
	return s.RunIO(ctx, os.Stdin, os.Stdout)
}

// MaxMessage bounds one JSON-RPC message from a client, over stdio (a line)
// and over HTTP (a request body): past it, the message gets a JSON-RPC
// error (-32600) over stdio and 413 over HTTP, and the server goes on. A
// program's code is far smaller (the code-size limit), and a bound keeps a
// client from making codecell hold what it sends.
const MaxMessage = 4 << 20

// RunIO serves MCP over newline-delimited JSON-RPC on in and out. A line
// that is not a JSON-RPC message, or that is over MaxMessage, gets an error
// response from here and never reaches the SDK, whose stdio transport would
// end the whole session over it: a client's bad line must not take the
// server down.
//
// The end of in is the end of the client's requests, not of the client:
// those it sent are answered first (as a filter answers what it read, so
// that `printf '...' | codecell mcp` prints its answers), unless out's
// reader is gone too (a client that ended), whose executions are ended.
func (s *Server) RunIO(ctx context.Context, in io.Reader, out io.Writer) error {
	asked := newPending()
	w := &lineWriter{w: out, sent: asked.answered}
	pr, pw := io.Pipe()
	go func() {
		err := filterLines(in, pw, w, asked.asked)
		if err == nil {
			asked.drain(ctx, readerGone(out))
		}
		// The client is gone: so are its executions.
		s.inflight.cancel(func(inflightRun) bool { return true })
		pw.CloseWithError(err)
	}()
	// Every line that reaches the SDK is at most MaxMessage long; its own
	// bound, which ends the session, is never reached.
	return s.SDKServer(ctx).Run(ctx, &sdk.IOTransport{Reader: pr, Writer: w, MaxLineLength: 2 * MaxMessage})
}

// filterLines passes on the lines of in that are JSON-RPC messages, and
// answers the others with a JSON-RPC error. It holds at most MaxMessage
// bytes of a line: a longer one is read to its end and dropped. asked,
// when not nil, is given the id of each request passed on.
func filterLines(in io.Reader, good io.Writer, errs io.Writer, asked func(jsonrpc.ID)) error {
	lr := &lineReader{r: bufio.NewReaderSize(in, 64<<10), max: MaxMessage}
	for {
		line, tooLong, err := lr.next()
		var reply []byte
		switch {
		case tooLong:
			reply = errorReply(-32600, idOf(line), fmt.Sprintf("invalid request: the message is over the %d MiB limit of one message", MaxMessage>>20))
		case len(bytes.TrimSpace(line)) > 0:
			var msg jsonrpc.Message
			reply, msg = checkMessage(line)
			if reply == nil {
				if r, ok := msg.(*jsonrpc.Request); ok && r.ID.IsValid() && asked != nil {
					asked(r.ID)
				}
				// The write returns once the line is read: lr may reuse it.
				if _, werr := good.Write(line); werr != nil {
					return werr
				}
			}
		}
		if reply != nil {
			if _, werr := errs.Write(reply); werr != nil {
				return werr
			}
		}
		if err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
	}
}

// lineReader reads lines of at most max bytes into one buffer, reused from
// line to line.
type lineReader struct {
	r   *bufio.Reader
	max int
	buf []byte
}

// next reads one line, with its newline; it is valid until the next call.
// A line over max bytes is read to its end but not kept: next returns its
// first bytes, for its id, and tooLong.
func (lr *lineReader) next() (line []byte, tooLong bool, err error) {
	line = lr.buf[:0]
	defer func() { lr.buf = line[:0] }()
	for {
		chunk, err := lr.r.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) <= lr.max {
				if len(line)+len(chunk) > cap(line) {
					// Double, rather than append's slower growth for large
					// slices: less garbage on the way to a long line.
					grown := make([]byte, len(line), min(max(2*cap(line), len(line)+len(chunk)), lr.max))
					copy(grown, line)
					line = grown
				}
				line = append(line, chunk...)
			} else {
				tooLong = true
				line = append(line[:min(len(line), idPrefix)], chunk[:max(0, min(len(chunk), idPrefix-len(line)))]...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return line, tooLong, err
	}
}

// idPrefix is how much of an over-long message is kept to find its id.
const idPrefix = 64 << 10

// idOf finds the top-level "id" of a JSON-RPC message from its first bytes,
// or returns nil: a message cut short can still be answered by its id when
// the id comes before the cut, as clients write it.
func idOf(prefix []byte) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(prefix))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil
		}
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil
		}
		if key == "id" {
			if v := bytes.TrimSpace(value); len(v) > 0 && (v[0] == '"' || v[0] == '-' || v[0] >= '0' && v[0] <= '9') {
				return v
			}
			return nil
		}
	}
	return nil
}

// validID returns id if it may stand as the id of a response (a string or
// a number), else nil.
func validID(id json.RawMessage) json.RawMessage {
	var v any
	if json.Unmarshal(id, &v) != nil {
		return nil
	}
	switch v.(type) {
	case string, float64:
		return id
	}
	return nil
}

// errorReply is a JSON-RPC error response, as one line.
func errorReply(code int, id json.RawMessage, text string) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": text}})
	return append(b, '\n')
}

// checkMessage returns the error response for a line that is not a
// JSON-RPC 2.0 message, or nil and the message.
func checkMessage(line []byte) ([]byte, jsonrpc.Message) {
	var msg struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Result  json.RawMessage `json:"result"`
		Error   json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(line, &msg); err != nil {
		return errorReply(-32700, nil, "parse error: the line is not a JSON object: "+err.Error()), nil
	}
	if msg.JSONRPC != "2.0" || (msg.Method == "" && msg.Result == nil && msg.Error == nil) {
		return errorReply(-32600, validID(msg.ID), `invalid request: a JSON-RPC 2.0 message has "jsonrpc": "2.0" and a method (or a result)`), nil
	}
	// The SDK's decoder is stricter than encoding/json (an id must be a
	// string or a number, keys match only in their own case), and a
	// message it refuses ends the session, and so codecell mcp: what it
	// would refuse is answered here.
	decoded, err := jsonrpc.DecodeMessage(line)
	if err != nil {
		return errorReply(-32600, validID(msg.ID), "invalid request: "+err.Error()+`; a JSON-RPC 2.0 message has "jsonrpc": "2.0", a "method" (or a "result" or an "error" object) and an "id" that is a string or a number`), nil
	}
	if reply := duplicateInMessage(line); reply != nil {
		return reply, nil
	}
	return nil, decoded
}

// lineWriter writes whole lines at a time: the SDK's messages and the
// filter's error responses never interleave.
// sent, when not nil, is given each line written, once written.
type lineWriter struct {
	mu   sync.Mutex
	w    io.Writer
	buf  []byte
	sent func(line []byte)
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	if i := bytes.LastIndexByte(l.buf, '\n'); i >= 0 {
		if _, err := l.w.Write(l.buf[:i+1]); err != nil {
			return 0, err
		}
		if l.sent != nil {
			for _, line := range bytes.SplitAfter(l.buf[:i+1], []byte("\n")) {
				if len(line) > 0 {
					l.sent(line)
				}
			}
		}
		l.buf = append(l.buf[:0], l.buf[i+1:]...)
	}
	return len(p), nil
}

// pending are the ids of the client's requests not yet answered.
type pending struct {
	mu   sync.Mutex
	ids  map[jsonrpc.ID]int
	none chan struct{} // closed while ids is empty; replaced when one comes
}

func newPending() *pending {
	p := &pending{ids: map[jsonrpc.ID]int{}, none: make(chan struct{})}
	close(p.none)
	return p
}

func (p *pending) asked(id jsonrpc.ID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.ids) == 0 {
		p.none = make(chan struct{})
	}
	p.ids[id]++
}

// answered takes a line the server wrote: a response settles its id.
func (p *pending) answered(line []byte) {
	if !bytes.Contains(line, []byte(`"id"`)) {
		return // a notification
	}
	msg, err := jsonrpc.DecodeMessage(bytes.TrimSpace(line))
	r, ok := msg.(*jsonrpc.Response)
	if err != nil || !ok {
		return // the server's own request, or the filter's answer to no id
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if n, ok := p.ids[r.ID]; ok {
		if n <= 1 {
			delete(p.ids, r.ID)
		} else {
			p.ids[r.ID] = n - 1
		}
		if len(p.ids) == 0 {
			close(p.none)
		}
	}
}

// drain waits until every request asked is answered, the reader of the
// answers is gone (gone reports so), or ctx ends. Each request is bounded
// by its own limits (an execution by its timeout).
func (p *pending) drain(ctx context.Context, gone func() bool) {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		p.mu.Lock()
		none := p.none
		p.mu.Unlock()
		select {
		case <-none:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
			if gone() {
				return
			}
		}
	}
}

func (l *lineWriter) Close() error { return nil }
