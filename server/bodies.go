package server

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/codecell-dev/codecell"
)

// A JSON body is decoded whole, and a request to /mcp is read whole before
// it is answered: what a client sends there is held in memory until then,
// and a client that sends many at once, or sends them slowly, could hold
// gigabytes. An execution's body is bounded by the execution slots (the
// server holds one body per program it runs); the others are bounded here:
// each by its route's limit, and all of them together by maxHeldBodies, of
// which a principal may hold its share when the server has two tokens or
// more. Past that, a request is refused at once with 503 SERVER_BUSY, and
// retried by its client in a moment.
const (
	// maxSmallBody bounds the bodies of JSON routes other than executions:
	// a session's spec, an approval's answer. Far more than they take.
	maxSmallBody = 64 << 10
	// maxMCPBody bounds one request to /mcp: mcp.MaxMessage, the bound of
	// one message over stdio too.
	maxMCPBody = 4 << 20
	// maxHeldBodies bounds the bytes of those bodies held at once.
	maxHeldBodies = 64 << 20
)

// CodeServerBusy: the server holds as many request bodies as it may.
const CodeServerBusy = "SERVER_BUSY"

// errServerBusy is what reading a body returns when the server holds as
// much of its clients' bodies as it may.
var errServerBusy = errors.New("the server holds as many request bodies as it may")

// bodyBudget counts the bytes of request bodies held, in all and by
// principal.
type bodyBudget struct {
	mu     sync.Mutex
	max    int64
	share  int64 // the most one principal may hold; 0: no share
	held   int64
	holder map[string]int64
}

func newBodyBudget(capacity int64, principals int) *bodyBudget {
	b := &bodyBudget{max: capacity, holder: map[string]int64{}}
	if principals > 1 {
		b.share = max(capacity/int64(principals), maxMCPBody+maxSmallBody)
	}
	return b
}

func (b *bodyBudget) take(principal string, n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held+n > b.max || (b.share > 0 && b.holder[principal]+n > b.share) {
		return false
	}
	b.held += n
	b.holder[principal] += n
	return true
}

func (b *bodyBudget) give(principal string, n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.held -= n
	if b.holder[principal] -= n; b.holder[principal] <= 0 {
		delete(b.holder, principal)
	}
}

// Held is how many bytes of bodies are held now.
func (b *bodyBudget) Held() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held
}

// heldBody counts what is read of a body against the budget, until
// release.
type heldBody struct {
	r         io.Reader
	budget    *bodyBudget
	principal string
	held      int64
}

func (s *Server) holdBody(r *http.Request, body io.Reader) *heldBody {
	return &heldBody{r: body, budget: s.bodies, principal: principalName(caller(r))}
}

func (h *heldBody) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	if n > 0 {
		if !h.budget.take(h.principal, int64(n)) {
			return 0, errServerBusy
		}
		h.held += int64(n)
	}
	return n, err
}

func (h *heldBody) release() {
	h.budget.give(h.principal, h.held)
	h.held = 0
}

// busy is the answer to a request refused with errServerBusy. The rest of
// its body is not read: the connection closes after the answer.
func busy(w http.ResponseWriter) *codecell.Envelope {
	w.Header().Set("Connection", "close")
	w.Header().Set("Retry-After", "1")
	env := codecell.Errorf(codecell.KindLimit, CodeServerBusy,
		"the server holds as many request bodies as it may (%d MiB, of many requests at once): this one was not read", maxHeldBodies>>20).WithHints(
		"retry in a moment", "send fewer requests at once")
	env.Retryable = true
	return env
}

// heldMCP reads each request to /mcp whole, within the bounds above and
// within jsonBodyTime, before the MCP handler sees it.
func (s *Server) heldMCP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		if b, ok := r.Body.(*bodyReader); ok {
			b.within(jsonBodyTime)
		}
		hb := s.holdBody(r, http.MaxBytesReader(w, r.Body, maxMCPBody))
		defer hb.release()
		body, err := io.ReadAll(hb)
		if err != nil {
			var tooLarge *http.MaxBytesError
			switch {
			case errors.Is(err, errServerBusy):
				writeError(w, busy(w))
			case errors.As(err, &tooLarge):
				writeError(w, codecell.Errorf(codecell.KindLimit, CodeRequestTooLarge,
					"the request body is over %d MiB, the most one MCP message may be", maxMCPBody>>20).WithHints(
					"send large files with the write_file tool in pieces, or through the REST API's file routes"))
			default:
				writeError(w, codecell.Errorf(codecell.KindValidation, CodeIncompleteBody,
					"the request body did not arrive whole: %v", err).WithHints(
					fmt.Sprintf("send the whole body at once; it must arrive within %v", jsonBodyTime)))
			}
			return
		}
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		next.ServeHTTP(w, r)
	})
}
