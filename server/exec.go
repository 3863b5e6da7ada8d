package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/api"
	"github.com/codecell-dev/codecell/lang"
	"github.com/codecell-dev/codecell/session"
)

func (s *Server) execute(w http.ResponseWriter, r *http.Request) { s.run(w, r, false) }

func (s *Server) executeInSession(w http.ResponseWriter, r *http.Request) { s.run(w, r, true) }

// run runs one execution. A program that ran, or that the engine refused
// (empty code, a guardrail), is a 200 with its Result: the status says how
// it went. The HTTP statuses are for requests that could not be run: bad
// JSON (400), a missing session (404), a busy session (409), a full server
// (429).
func (s *Server) run(w http.ResponseWriter, r *http.Request, inSession bool) {
	// The slot comes first: a request holds its body in memory only once
	// it may run, so that the server holds at most as many bodies as it
	// runs programs.
	release, refusal := s.runs.Acquire(caller(r))
	if refusal != nil {
		writeError(w, refusal)
		return
	}
	defer release()
	var req api.Execution
	if env := decode(w, r, &req, maxJSONBody, nil); env != nil {
		writeError(w, env)
		return
	}
	// Without a language: the file name's or the shebang's, else Python,
	// as MCP's execute has it.
	language := req.Language
	if language == "" {
		language = "python"
		if l := lang.ForFile(req.Filename, req.Code); l != nil {
			language = l.Name
		}
	}
	x := &codecell.Exec{Language: language, Code: req.Code, Filename: req.Filename, Args: req.Args, Env: req.Env}
	for _, f := range req.Files {
		if f.Text != "" && len(f.Data) > 0 {
			writeError(w, codecell.Errorf(codecell.KindValidation, codecell.CodeInvalidRequest,
				"file %q has both text and data", f.Path).WithHints("give a file's content as text, or as base64 in data"))
			return
		}
		x.Files = append(x.Files, f.Codecell())
	}
	if req.Stdin != "" {
		x.Stdin = strings.NewReader(req.Stdin)
	}
	var reqLimits codecell.Limits
	if req.Limits != nil {
		if env := limitsError(req.Limits.Check()); env != nil {
			writeError(w, env)
			return
		}
		reqLimits = req.Limits.Codecell()
	}
	tier, env := s.checkTier(req.Tier)
	if env != nil {
		writeError(w, env)
		return
	}
	if req.Policy != nil {
		x.Policy = *req.Policy.Codecell()
	}
	x.Limits, x.Tier, x.Packages = reqLimits, tier, req.Packages
	// The execution ends if its client goes away (or stops reading its
	// stream), or its session is deleted.
	ctx := r.Context()
	var run *session.Run
	if inSession {
		ses, ok := s.hold(w, r)
		if !ok {
			return
		}
		if ctx, run, env = ses.Start(ctx, x); env != nil {
			writeError(w, env)
			return
		}
		defer run.End()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if env := s.checkMax(x.Limits, "execution"); env != nil {
		writeError(w, env)
		return
	}
	var stream *eventStream
	if wantsEvents(r) {
		lim := x.Limits.Or(s.Engine.Limits.Or(codecell.DefaultLimits))
		stream = newEventStream(w, lim.Stdout, lim.Stderr, cancel)
		defer stream.finish()
		x.Stdout, x.Stderr = stream.writer(api.EventStdout), stream.writer(api.EventStderr)
		// Calls a rule says to ask about are asked on the stream.
		x.Approver = s.approvals.approver(caller(r), stream)
		stop := stream.keepAlive(15 * time.Second)
		defer stop()
	}
	start := time.Now()
	res, err := s.Engine.Run(ctx, x)
	// The program is over: its slot and its session are free, whatever
	// the client does with the answer.
	release()
	if run != nil {
		run.End()
	}
	if err != nil {
		switch {
		case stream != nil && stream.gone():
			// The client stopped reading its stream: the program was
			// ended, and no one is there to read a Result.
			s.metrics.abandoned.Inc()
			s.Logger.Info("execution abandoned: the client stopped reading its events")
		case run != nil && run.Deleted():
			// Not the client: the session was deleted under the program,
			// which was ended and cleaned up.
			endedWith(w, stream, session.DeletedError())
		case errors.Is(context.Cause(r.Context()), ErrStopping):
			env := codecell.Errorf(codecell.KindInternal, CodeStopping,
				"the server is stopping; the program was ended").WithHints("retry in a moment, on this server once it is back or on another")
			env.Retryable = true
			endedWith(w, stream, env)
		default:
			// The client went away: the program was ended and cleaned up,
			// and no one is there to read a Result.
			s.metrics.abandoned.Inc()
			s.Logger.Info("execution abandoned", "error", err.Error())
		}
		return
	}
	s.metrics.observe(res, time.Since(start), caller(r))
	if stream != nil {
		stream.send(api.EventResult, res)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// endedWith answers an execution that ended without a Result: an error
// event on a stream already under way, else an error status.
func endedWith(w http.ResponseWriter, stream *eventStream, env *codecell.Envelope) {
	if stream != nil {
		stream.send(api.EventError, env)
		return
	}
	writeError(w, env)
}

// wantsEvents says whether the client asked for Server-Sent Events.
func wantsEvents(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		if mt, _, _ := strings.Cut(strings.TrimSpace(part), ";"); strings.EqualFold(mt, "text/event-stream") {
			return true
		}
	}
	return false
}

// eventStream writes Server-Sent Events: the program's output as it
// comes, then its Result. The output streamed is capped as the Result's is,
// so that a program that prints without end sends no more than that.
//
// Events are queued, and a goroutine of the stream's own writes them: the
// program's output is never held up by the client. A client that stops
// reading for Server.WriteIdle loses its stream (see deadlineWriter): the queue is
// dropped, and onGone is called, which ends the program. What the queue holds
// is bounded by the output caps, like the Result.
type eventStream struct {
	mu      sync.Mutex
	ready   *sync.Cond // signalled when queue grows, or the stream closes
	queue   []byte     // events not yet written
	closed  bool       // no more events come
	dead    bool       // the client stopped reading: nothing more is written
	w       http.ResponseWriter
	left    map[string]int    // bytes each stream may still send
	carry   map[string][]byte // an incomplete UTF-8 sequence, held for the next write
	onGone  func()
	written chan struct{} // closed when the writer is done
}

func newEventStream(w http.ResponseWriter, stdoutCap, stderrCap int, onGone func()) *eventStream {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	es := &eventStream{w: w, onGone: onGone, written: make(chan struct{}),
		left:  map[string]int{api.EventStdout: stdoutCap, api.EventStderr: stderrCap},
		carry: map[string][]byte{}}
	es.ready = sync.NewCond(&es.mu)
	go es.write()
	es.mu.Lock()
	es.queue = append(es.queue, ": stream\n\n"...) // the headers go out at once
	es.ready.Signal()
	es.mu.Unlock()
	return es
}

// write writes what is queued until the stream is finished, or the client
// stops reading.
func (es *eventStream) write() {
	defer close(es.written)
	rc := http.NewResponseController(es.w)
	for {
		es.mu.Lock()
		for len(es.queue) == 0 && !es.closed {
			es.ready.Wait()
		}
		data := es.queue
		es.queue = nil
		es.mu.Unlock()
		if len(data) == 0 {
			return // closed, and all written
		}
		_, err := es.w.Write(data)
		if err == nil {
			err = rc.Flush()
		}
		if err != nil {
			es.mu.Lock()
			es.dead, es.queue = true, nil
			es.mu.Unlock()
			es.onGone()
			return
		}
	}
}

// gone reports whether the client stopped reading.
func (es *eventStream) gone() bool {
	es.mu.Lock()
	defer es.mu.Unlock()
	return es.dead
}

// finish waits for what is queued to be written, or for the client to be
// found gone: nothing may write after the handler returns.
func (es *eventStream) finish() {
	es.mu.Lock()
	es.closed = true
	es.ready.Signal()
	es.mu.Unlock()
	<-es.written
}

func (es *eventStream) writer(event string) *streamWriter { return &streamWriter{es: es, event: event} }

type streamWriter struct {
	es    *eventStream
	event string
}

// Write queues p as an event of its stream. It never fails and never
// waits on the client: the program's output goes on whatever the client
// does, and the Result keeps it anyway.
func (sw *streamWriter) Write(p []byte) (int, error) {
	es := sw.es
	es.mu.Lock()
	defer es.mu.Unlock()
	n := len(p)
	left := es.left[sw.event]
	if left <= 0 || es.dead {
		return n, nil
	}
	buf := append(es.carry[sw.event], p...)
	if len(buf) > left {
		buf = buf[:left]
	}
	// Hold back an incomplete character at the end for the next write.
	cut := len(buf)
	for i := len(buf) - 1; i >= 0 && i >= len(buf)-utf8.UTFMax; i-- {
		if utf8.RuneStart(buf[i]) {
			if !utf8.FullRune(buf[i:]) {
				cut = i
			}
			break
		}
	}
	es.carry[sw.event] = append([]byte(nil), buf[cut:]...)
	if cut > 0 {
		es.left[sw.event] = left - cut
		es.queueLocked(sw.event, api.Output{Text: string(buf[:cut])})
	}
	return n, nil
}

func (es *eventStream) send(event string, v any) {
	es.mu.Lock()
	defer es.mu.Unlock()
	es.queueLocked(event, v)
}

func (es *eventStream) queueLocked(event string, v any) {
	if es.dead || es.closed {
		return
	}
	data, err := json.Marshal(v)
	if err != nil {
		data, _ = json.Marshal(codecell.Errorf(codecell.KindInternal, codecell.CodeSandboxFailure, "encoding an event: %v", err))
		event = api.EventError
	}
	es.queue = fmt.Appendf(es.queue, "event: %s\ndata: %s\n\n", event, data)
	es.ready.Signal()
}

// keepAlive queues a comment now and then, so that proxies keep a quiet
// stream open.
func (es *eventStream) keepAlive(every time.Duration) (stop func()) {
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				es.mu.Lock()
				if !es.dead && !es.closed {
					es.queue = append(es.queue, ": keep-alive\n\n"...)
					es.ready.Signal()
				}
				es.mu.Unlock()
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done); <-exited }) }
}
