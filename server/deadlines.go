package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// A client that stops sending its request, or stops reading its answer,
// must not hold what the server has: an execution slot, a session, a
// goroutine and a connection for as long as it likes. The http.Server's own
// ReadTimeout and WriteTimeout cannot say this: they bound a whole request
// or answer, and an execution's answer comes when its program ends, up to
// the longest timeout a client may ask for, while an upload or a download
// may be gigabytes. So the deadlines here are idle ones, renewed as bytes
// move: a body that sends nothing for Server.BodyIdle, or an answer of which
// the client reads nothing for Server.WriteIdle, ends the request.
const (
	// DefaultIdle is Server.BodyIdle's and Server.WriteIdle's default.
	DefaultIdle = 30 * time.Second
	// writeChunk is the most written under one deadline.
	writeChunk = 64 << 10
)

// jsonBodyTime bounds the whole of a JSON body (and of a request to /mcp),
// which is small enough to arrive at once: a client that trickles one cannot
// hold the execution slot it took, or the memory and connection it holds. A
// variable for tests.
var jsonBodyTime = 2 * time.Minute

// errBodyRead marks a request body that could not be read to its end: it
// stalled past its deadline, or the client cut it short. The request is the
// client's to send again.
var errBodyRead = errors.New("the request body could not be read")

// deadlines applies the idle deadlines to every request: its body is read
// through a bodyReader, and its answer written through a deadlineWriter.
func (s *Server) deadlines(next http.Handler) http.Handler {
	bodyIdle, writeIdle := or(s.BodyIdle, DefaultIdle), or(s.WriteIdle, DefaultIdle)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		// A connection kept alive may hold the deadline of its last
		// request's answer.
		_ = rc.SetWriteDeadline(time.Time{})
		// What is still buffered when the handler returns is written after
		// it: that too within writeIdle.
		defer func() { _ = rc.SetWriteDeadline(time.Now().Add(writeIdle)) }()
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = &bodyReader{ReadCloser: r.Body, rc: rc, idle: bodyIdle, header: w.Header()}
		}
		next.ServeHTTP(&deadlineWriter{ResponseWriter: w, rc: rc, idle: writeIdle}, r)
	})
}

// bodyReader reads a request body under an idle deadline, and an overall
// one when until is set.
type bodyReader struct {
	io.ReadCloser
	rc     *http.ResponseController
	idle   time.Duration
	until  time.Time
	ended  bool
	header http.Header // the answer's, to close the connection after it
}

// within sets an overall deadline for the rest of the body.
func (b *bodyReader) within(d time.Duration) { b.until = time.Now().Add(d) }

func (b *bodyReader) Read(p []byte) (int, error) {
	if b.ended {
		return 0, io.EOF
	}
	deadline := time.Now().Add(b.idle)
	if !b.until.IsZero() && b.until.Before(deadline) {
		deadline = b.until
	}
	_ = b.rc.SetReadDeadline(deadline)
	n, err := b.ReadCloser.Read(p)
	if err == nil {
		return n, nil
	}
	var tooLarge *http.MaxBytesError
	switch {
	case err == io.EOF:
		b.ended = true
		// The connection's later reads are the server's own, which watch
		// for the client going away while a program runs: they must not
		// time out.
		_ = b.rc.SetReadDeadline(time.Time{})
	case errors.As(err, &tooLarge):
	default:
		// The deadline stays expired, so the drain net/http does after the
		// answer fails at once instead of waiting on the stalled client
		// again; and the connection, its request unfinished, closes after
		// the answer.
		b.header.Set("Connection", "close")
		err = fmt.Errorf("%w: %w", errBodyRead, err)
	}
	return n, err
}

// deadlineWriter writes an answer in pieces, each given writeIdle to reach
// the client.
type deadlineWriter struct {
	http.ResponseWriter
	rc   *http.ResponseController
	idle time.Duration
}

func (d *deadlineWriter) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		n := min(len(p), writeChunk)
		_ = d.rc.SetWriteDeadline(time.Now().Add(d.idle))
		m, err := d.ResponseWriter.Write(p[:n])
		written += m
		if err != nil {
			return written, err
		}
		p = p[n:]
	}
	return written, nil
}

// FlushError sends what is buffered, within the idle deadline.
func (d *deadlineWriter) FlushError() error {
	_ = d.rc.SetWriteDeadline(time.Now().Add(d.idle))
	return d.rc.Flush()
}

func (d *deadlineWriter) Unwrap() http.ResponseWriter { return d.ResponseWriter }

func or(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
