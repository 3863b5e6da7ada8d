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
	var req api.Execution
	if env := decode(w, r, &req); env != nil {
		writeError(w, env)
		return
	}
	x := &codecell.Exec{Language: req.Language, Code: req.Code, Filename: req.Filename, Args: req.Args, Env: req.Env}
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
	var ses *session.Session
	x.Limits = reqLimits
	if inSession {
		var ok bool
		if ses, ok = s.hold(w, r); !ok {
			return
		}
		defer ses.Release()
		if x.Limits, env = narrow(ses.Limits, reqLimits); env != nil {
			writeError(w, env)
			return
		}
		if tier == "" {
			tier = ses.Tier
		}
		x.SessionPolicy = ses.Policy
		x.Workspace = ses.Workspace
	}
	if env := s.checkMax(x.Limits, "execution"); env != nil {
		writeError(w, env)
		return
	}
	x.Tier = tier
	release, refusal := s.acquireSlot(caller(r))
	if refusal != nil {
		writeError(w, refusal)
		return
	}
	defer release()
	// The execution ends if its client goes away, or its session is
	// deleted.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	if ses != nil {
		ses.Running(cancel)
	}
	var stream *eventStream
	if wantsEvents(r) {
		lim := x.Limits.Or(s.Engine.Limits.Or(codecell.DefaultLimits))
		stream = newEventStream(w, lim.Stdout, lim.Stderr)
		x.Stdout, x.Stderr = stream.writer(api.EventStdout), stream.writer(api.EventStderr)
		stop := stream.keepAlive(15 * time.Second)
		defer stop()
	}
	start := time.Now()
	res, err := s.Engine.Run(ctx, x)
	if err != nil {
		if r.Context().Err() == nil {
			// Not the client: the session was deleted under the program,
			// which was ended and cleaned up.
			endedWith(w, stream, codecell.Errorf(codecell.KindValidation, CodeSessionDeleted,
				"the session was deleted while the program ran; the program was ended").WithHints(
				"create a new session and run the program again"))
			return
		}
		if errors.Is(context.Cause(r.Context()), ErrStopping) {
			env := codecell.Errorf(codecell.KindInternal, CodeStopping,
				"the server is stopping; the program was ended").WithHints("retry in a moment, on this server once it is back or on another")
			env.Retryable = true
			endedWith(w, stream, env)
			return
		}
		// The client went away: the program was ended and cleaned up, and
		// no one is there to read a Result.
		s.metrics.abandoned.Inc()
		s.Logger.Info("execution abandoned", "error", err.Error())
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
type eventStream struct {
	mu    sync.Mutex
	w     http.ResponseWriter
	flush func()
	left  map[string]int    // bytes each stream may still send
	carry map[string][]byte // an incomplete UTF-8 sequence, held for the next write
}

func newEventStream(w http.ResponseWriter, stdoutCap, stderrCap int) *eventStream {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	es := &eventStream{w: w, flush: func() { _ = rc.Flush() },
		left:  map[string]int{api.EventStdout: stdoutCap, api.EventStderr: stderrCap},
		carry: map[string][]byte{}}
	es.flush()
	return es
}

func (es *eventStream) writer(event string) *streamWriter { return &streamWriter{es: es, event: event} }

type streamWriter struct {
	es    *eventStream
	event string
}

// Write sends p as an event of its stream. It never fails: a client that
// reads slowly or went away must not stop the program, whose output the
// Result keeps anyway.
func (sw *streamWriter) Write(p []byte) (int, error) {
	es := sw.es
	es.mu.Lock()
	defer es.mu.Unlock()
	n := len(p)
	left := es.left[sw.event]
	if left <= 0 {
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
		es.sendLocked(sw.event, api.Output{Text: string(buf[:cut])})
	}
	return n, nil
}

func (es *eventStream) send(event string, v any) {
	es.mu.Lock()
	defer es.mu.Unlock()
	es.sendLocked(event, v)
}

func (es *eventStream) sendLocked(event string, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		data, _ = json.Marshal(codecell.Errorf(codecell.KindInternal, codecell.CodeSandboxFailure, "encoding an event: %v", err))
		event = api.EventError
	}
	fmt.Fprintf(es.w, "event: %s\ndata: %s\n\n", event, data)
	es.flush()
}

// keepAlive sends a comment now and then, so that proxies keep a quiet
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
				fmt.Fprint(es.w, ": keep-alive\n\n")
				es.flush()
				es.mu.Unlock()
			}
		}
	}()
	var once sync.Once
	// stop returns once the goroutine is gone: nothing writes after the
	// handler returned.
	return func() { once.Do(func() { close(done); <-exited }) }
}
