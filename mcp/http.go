package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	csession "github.com/codecell-dev/codecell/session"
)

// openSessions are the MCP sessions that initialize requests opened and
// that are still open. The SDK's own list is no count of them: it also holds,
// for a moment, the temporary sessions of requests that need none.
type openSessions struct {
	mu  sync.Mutex
	ids map[string]string // the principal that opened each
}

// admit reports whether owner may open one more session: fewer than max of
// those opened are still among srv's, and, when share is not zero, fewer
// than share of owner's. ofOwner says which bound refused.
func (o *openSessions) admit(srv *sdk.Server, max int, owner string, share int) (ok, ofOwner bool) {
	live := map[string]bool{}
	for ss := range srv.Sessions() {
		live[ss.ID()] = true
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	owned := 0
	for id, by := range o.ids {
		switch {
		case !live[id]:
			delete(o.ids, id)
		case by == owner:
			owned++
		}
	}
	if share > 0 && owned >= share {
		return false, true
	}
	return len(o.ids) < max, false
}

func (o *openSessions) add(id, owner string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ids == nil {
		o.ids = map[string]string{}
	}
	o.ids[id] = owner
}

// sessionRecorder notes the session an initialize response opens.
type sessionRecorder struct {
	http.ResponseWriter
	opened *openSessions
	owner  string
	done   bool
}

func (s *sessionRecorder) WriteHeader(code int) {
	if !s.done {
		s.done = true
		if id := s.Header().Get("Mcp-Session-Id"); id != "" && code < 300 {
			s.opened.add(id, s.owner)
		}
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *sessionRecorder) Write(b []byte) (int, error) {
	if !s.done {
		s.WriteHeader(http.StatusOK)
	}
	return s.ResponseWriter.Write(b)
}

// Flush sends what is written so far: the SDK streams events.
func (s *sessionRecorder) Flush() {
	if !s.done {
		s.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(s.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the connection (flushes).
func (s *sessionRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// opensSession reports whether a request body holds an initialize request,
// alone or in a batch.
func opensSession(body []byte) bool {
	var one struct {
		Method string `json:"method"`
	}
	if json.Unmarshal(body, &one) == nil {
		return one.Method == "initialize"
	}
	var batch []struct {
		Method string `json:"method"`
	}
	if json.Unmarshal(body, &batch) == nil {
		for _, m := range batch {
			if m.Method == "initialize" {
				return true
			}
		}
	}
	return false
}

// Defaults of the bounds on MCP sessions over HTTP.
const (
	DefaultMaxHTTPSessions = 1000
	DefaultHTTPSessionIdle = 30 * time.Minute
)

// requestHeader tags each HTTP request, so that the execution it carries
// can be found when the request is dropped.
const requestHeader = "X-Codecell-Request"

// HTTPHandler serves MCP over streamable HTTP. A client that drops its
// request, or ends its session, cancels the calls it made: their programs
// are killed and cleaned up.
//
// Each MCP session holds memory until it ends: sessions idle for
// HTTPSessionIdle are closed, and at most MaxHTTPSessions are open at once,
// so that no client grows the server without bound by opening sessions.
//
// The handler authenticates no one: the principal of a request is the one
// its context carries (session.WithPrincipal), put there by the
// authentication in front of it, such as codecell serve's; a request that
// carries none is session.Local's. An MCP session opened by a request that
// presents a bearer token is bound to its principal: a request of another's
// that names it is refused (403), and cannot end its calls.
func (s *Server) HTTPHandler(ctx context.Context) http.Handler {
	srv := s.SDKServer(ctx)
	idle := s.HTTPSessionIdle
	if idle <= 0 {
		idle = DefaultHTTPSessionIdle
	}
	maxSessions := s.MaxHTTPSessions
	if maxSessions <= 0 {
		maxSessions = DefaultMaxHTTPSessions
	}
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, &sdk.StreamableHTTPOptions{
		Logger:                       s.Logger,
		PropagateRequestCancellation: true,
		// The same bound as a line over stdio; past it, 413.
		MaxRequestBodyBytes:        MaxMessage,
		SessionTimeout:             idle,
		DisableLocalhostProtection: s.HostChecked,
	})
	// The SDK binds an MCP session to the TokenInfo's UserID of the request
	// that opened it, and hands the TokenInfo to tool handlers; only its
	// bearer-token middleware puts one in a request. Its verifier trusts
	// the principal already found: the token was checked in front.
	bound := auth.RequireBearerToken(func(_ context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		p := csession.PrincipalFrom(r.Context())
		if p == nil {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: p.Name, Extra: map[string]any{principalKey: p}}, nil
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h)
	var next atomic.Int64
	var opened openSessions
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := csession.PrincipalFrom(r.Context())
		owner := csession.LocalName
		if p != nil {
			owner = p.Name
		}
		if r.Method == http.MethodPost {
			// The whole body is read here (the SDK would read it anyway, to
			// the same bound), so that an initialize cannot hide after
			// other fields, and a key given twice is refused.
			body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxMessage))
			if err != nil {
				status := http.StatusBadRequest
				var tooLarge *http.MaxBytesError
				if errors.As(err, &tooLarge) {
					status = http.StatusRequestEntityTooLarge
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(status)
				_, _ = w.Write(errorReply(-32600, nil, fmt.Sprintf("invalid request: the body could not be read (%v); one message may be up to %d MiB", err, MaxMessage>>20)))
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			if reply := duplicateInMessage(body); reply != nil {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = w.Write(reply)
				return
			}
			if r.Header.Get("Mcp-Session-Id") == "" && opensSession(body) {
				if ok, ofOwner := opened.admit(srv, maxSessions, owner, s.MaxHTTPSessionsPerPrincipal); !ok {
					msg := fmt.Sprintf("this server has its maximum of %d MCP sessions open", maxSessions)
					if ofOwner {
						msg = fmt.Sprintf("your token has its maximum of %d MCP sessions open", s.MaxHTTPSessionsPerPrincipal)
					}
					w.Header().Set("Content-Type", "application/json")
					w.Header().Set("Retry-After", "10")
					w.WriteHeader(http.StatusTooManyRequests)
					_, _ = w.Write(errorReply(-32000, idOf(body), fmt.Sprintf("%s: end sessions you no longer use (HTTP DELETE with their Mcp-Session-Id), or retry later; idle sessions close after %v", msg, idle)))
					return
				}
				w = &sessionRecorder{ResponseWriter: w, opened: &opened, owner: owner}
			}
		}
		switch r.Method {
		case http.MethodDelete:
			// Only the calls of the principal that ends the session: a
			// session id of another's ends nothing (the SDK refuses the
			// request itself).
			if id := r.Header.Get("Mcp-Session-Id"); id != "" {
				s.inflight.cancel(func(run inflightRun) bool { return run.session == id && run.owner == owner })
			}
		case http.MethodPost:
			// A header of the client's own by this name is replaced.
			tag := fmt.Sprintf("%d", next.Add(1))
			r.Header.Set(requestHeader, tag)
			stop := context.AfterFunc(r.Context(), func() {
				s.inflight.cancel(func(run inflightRun) bool { return run.request == tag })
			})
			defer stop()
		}
		if p != nil {
			// The token was checked: the SDK sees a placeholder (its
			// middleware wants one), never the token.
			r = r.Clone(r.Context())
			r.Header.Set("Authorization", "Bearer checked")
			bound.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// principalKey holds the principal in a TokenInfo's Extra.
const principalKey = "codecell.principal"

// principalOf is the principal of a tool call: the one HTTPHandler found
// for its request, else the local one (stdio, or a server with no token).
func principalOf(req *sdk.CallToolRequest) *csession.Principal {
	if req.Extra != nil && req.Extra.TokenInfo != nil {
		if p, ok := req.Extra.TokenInfo.Extra[principalKey].(*csession.Principal); ok && p != nil {
			return p
		}
		if id := req.Extra.TokenInfo.UserID; id != "" {
			return &csession.Principal{Name: id}
		}
	}
	return csession.Local()
}
