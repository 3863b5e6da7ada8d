// Package server is codecell's HTTP service: a REST API of sessions, files
// and executions, with output streamed as Server-Sent Events, Prometheus
// metrics and an OpenAPI document. It runs programs with any
// codecell.Engine, whatever tiers that has.
//
// A session belongs to the principal whose token made it: to any other it
// does not exist (404), and a list shows the caller's own. An admin may
// list, read and end every session, and list and download its files, but
// not change them or run programs in another's session (403).
//
// Routes (all JSON but file bodies; errors are codecell.Envelope bodies):
//
//	POST   /v1/sessions                          create a session
//	GET    /v1/sessions                          list sessions
//	GET    /v1/sessions/{id}                     read a session
//	DELETE /v1/sessions/{id}                     end it, and remove its workspace
//	POST   /v1/sessions/{id}/restart             start a live session's interpreters afresh
//	POST   /v1/sessions/{id}/fork                a new session that starts where this one stands
//	GET    /v1/sessions/{id}/variables           what a live session's interpreter holds
//	GET    /v1/sessions/{id}/files               list its workspace (?path=DIR)
//	POST   /v1/sessions/{id}/files               upload a tar into it (?path=DIR)
//	PUT    /v1/sessions/{id}/files/{path}        upload one file
//	GET    /v1/sessions/{id}/files/{path}        download a file, or a directory as a tar
//	DELETE /v1/sessions/{id}/files/{path}        remove a file, link or directory (?recursive=true)
//	POST   /v1/sessions/{id}/executions          run a program in the session
//	POST   /v1/executions                        run a program in a fresh workspace
//	GET    /healthz, /metrics, /openapi.json
package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/jsonkeys"
	"github.com/codecell-dev/codecell/session"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Server is the HTTP service. Set its fields, then call Handler once.
type Server struct {
	// Engine runs the programs.
	Engine *codecell.Engine
	// Sessions keeps the sessions' workspaces; nil refuses sessions.
	Sessions *session.Store
	// MCP, when set, is served at /mcp.
	MCP http.Handler
	// Tokens are the bearer tokens accepted, each with its principal, which
	// owns the sessions it makes. None means no authentication (listen on
	// loopback only, then): every request is session.Local's. With two
	// tokens or more, a principal's MaxSessions and MaxRunning left at
	// zero take a default share of the server's (session.DefaultShare).
	Tokens []Token
	// MaxRunning is how many executions may run at once, over REST and MCP
	// (see Admit); one more is refused at once with 429 and Retry-After.
	// Zero means twice the CPUs.
	MaxRunning int
	// MaxLimits are the most a session or an execution may ask for; a zero
	// field takes DefaultMaxLimits'.
	MaxLimits codecell.Limits
	// SessionTTL is a new session's lifetime when it asks for none; zero
	// means an hour. MaxSessionTTL bounds what it may ask; zero means a day.
	SessionTTL, MaxSessionTTL time.Duration
	// BodyIdle ends a request whose body sends nothing for this long, and
	// WriteIdle one whose client reads nothing of the answer for this long;
	// zero means DefaultIdle.
	BodyIdle, WriteIdle time.Duration
	// AllowedOrigins are the origins (scheme://host[:port]) of web pages,
	// beside the server's own, that may call it from a browser: their
	// requests are answered with CORS headers. Any other page is refused.
	AllowedOrigins []string
	// AllowedHosts are host names a request on a loopback listener may
	// give, beside loopback names and addresses: those a reverse proxy in
	// front passes on. Any other is refused, so that a web page whose name
	// points at 127.0.0.1 gets nothing.
	AllowedHosts []string
	// Tiers are the tiers a client may name besides the Engine's own
	// (Engine.Tier, or "auto"), which it always may. A client never gets a
	// tier the operator did not list, "local" above all.
	Tiers []string
	// Registry, when set, receives the service's metrics, and /metrics
	// serves it; nil means a new registry of the service's own.
	Registry *prometheus.Registry
	Logger   *slog.Logger
	Version  string

	once      sync.Once
	handler   http.Handler
	runs      *session.Running
	approvals approvalBoard
	metrics   *metrics
	tokens    *tokenTable
	bodies    *bodyBudget
	local     *session.Principal // the principal of every request when there is no token
}

// ErrStopping is the cause to cancel requests' base context with when the
// server stops: executions it ends answer 503 SERVER_STOPPING.
var ErrStopping = errors.New("the server is stopping")

// MaxCodeSize is the most characters of code a client may ask to run by
// default: far more than a model writes in one reply (a long one is some
// tens of thousands of characters), far less than a client could use to make
// the server parse megabytes of code it never meant to run. Data belongs in
// files.
const MaxCodeSize = 200_000

// DefaultMaxLimits bound what a client may ask for.
var DefaultMaxLimits = codecell.Limits{
	Timeout:     10 * time.Minute,
	Memory:      8 << 30,
	Processes:   1024,
	Stdout:      10 << 20,
	Stderr:      10 << 20,
	CodeSize:    MaxCodeSize,
	ToolCalls:   1000,
	ToolTimeout: 10 * time.Minute,
	ToolResult:  16 << 20,
	ToolHandles: 256 << 20,
	Value:       16 << 20,
	Workspace:   16 << 30,
}

// Requests' JSON bodies are at most this large: an execution may carry
// files, which are base64 in JSON. Larger uploads go through the files
// routes, which stream.
const maxJSONBody = 64 << 20

// Handler returns the service's HTTP handler.
func (s *Server) Handler() http.Handler {
	s.once.Do(s.init)
	return s.handler
}

func (s *Server) init() {
	if s.Engine == nil {
		s.Engine = &codecell.Engine{}
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	n := s.MaxRunning
	if n <= 0 {
		n = 2 * runtime.NumCPU()
	}
	s.runs = session.NewRunning(n)
	s.local = session.Local()
	tokens := append([]Token(nil), s.Tokens...)
	for i := range tokens {
		p := &tokens[i].Principal
		if p.MaxRunning == 0 {
			p.MaxRunning = session.DefaultShare(n, len(tokens))
		}
		if p.MaxSessions == 0 && s.Sessions != nil {
			p.MaxSessions = session.DefaultShare(s.Sessions.Max(), len(tokens))
		}
	}
	s.tokens = newTokenTable(tokens)
	s.bodies = newBodyBudget(maxHeldBodies, s.tokens.principalCount())
	reg := s.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	s.metrics = newMetrics(reg, s)
	s.runs.OnStart, s.runs.OnEnd = s.metrics.started, s.metrics.ended
	s.runs.OnRefused = func(principal string, ofPrincipal bool) {
		if !ofPrincipal {
			principal = ""
		}
		s.metrics.refused(principal, "executions")
	}
	if s.Sessions != nil {
		s.Sessions.OnEnd(func(ses *session.Session, reason string) {
			s.metrics.sessionsEnded.WithLabelValues(reason).Inc()
			s.Logger.Info("session ended", "session_id", ses.ID, "principal", ses.Owner, "reason", reason, "executions", ses.Info().Executions)
		})
	}
	mux := http.NewServeMux()
	for _, rt := range s.routes() {
		h := rt.handler
		if rt.auth {
			h = s.authorize(h)
		}
		mux.Handle(rt.method+" "+rt.pattern, s.metrics.instrument(rt.method+" "+rt.pattern, h))
	}
	if s.MCP != nil {
		mux.Handle("/mcp", s.metrics.instrument("/mcp", s.authorize(s.heldMCP(s.MCP))))
	}
	s.handler = s.browserChecks(s.deadlines(&errorPages{mux: mux}))
}

// route is one operation of the API; /openapi.json describes the same set
// (a test holds them together).
type route struct {
	method, pattern string
	auth            bool
	handler         http.Handler
}

// Routes lists the API's operations as "METHOD /path", with path
// parameters as OpenAPI writes them ({path}, not {path...}).
func Routes() []string {
	var out []string
	for _, r := range (&Server{}).routes() {
		out = append(out, r.method+" "+strings.ReplaceAll(r.pattern, "...}", "}"))
	}
	return out
}

func (s *Server) routes() []route {
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g := s.metrics.gatherer
		if p := caller(r); p != nil && !p.Admin && s.tokens.principalCount() > 1 {
			// The series of other principals say what they do and how
			// much: a token that is not an admin's sees its own.
			g = onlyPrincipal(g, p.Name)
		}
		promhttp.HandlerFor(g, promhttp.HandlerOpts{}).ServeHTTP(w, r)
	})
	return []route{
		{"GET", "/healthz", false, http.HandlerFunc(s.healthz)},
		{"GET", "/openapi.json", false, http.HandlerFunc(serveOpenAPI)},
		{"GET", "/metrics", true, metrics},
		{"POST", "/v1/sessions", true, http.HandlerFunc(s.createSession)},
		{"GET", "/v1/sessions", true, http.HandlerFunc(s.listSessions)},
		{"GET", "/v1/sessions/{id}", true, http.HandlerFunc(s.getSession)},
		{"DELETE", "/v1/sessions/{id}", true, http.HandlerFunc(s.deleteSession)},
		{"POST", "/v1/sessions/{id}/restart", true, http.HandlerFunc(s.restartSession)},
		{"POST", "/v1/sessions/{id}/fork", true, http.HandlerFunc(s.forkSession)},
		{"GET", "/v1/sessions/{id}/variables", true, http.HandlerFunc(s.sessionVariables)},
		{"GET", "/v1/sessions/{id}/files", true, http.HandlerFunc(s.listFiles)},
		{"POST", "/v1/sessions/{id}/files", true, http.HandlerFunc(s.uploadArchive)},
		{"PUT", "/v1/sessions/{id}/files/{path...}", true, http.HandlerFunc(s.uploadFile)},
		{"GET", "/v1/sessions/{id}/files/{path...}", true, http.HandlerFunc(s.download)},
		{"DELETE", "/v1/sessions/{id}/files/{path...}", true, http.HandlerFunc(s.removeFile)},
		{"POST", "/v1/sessions/{id}/executions", true, http.HandlerFunc(s.executeInSession)},
		{"POST", "/v1/executions", true, http.HandlerFunc(s.execute)},
		{"POST", "/v1/executions/{exec}/approvals/{id}", true, http.HandlerFunc(s.answerApproval)},
	}
}

// healthz answers any caller that the server lives. What it holds is said
// only to a caller with a token: how many executions run, to any; how many
// sessions there are, of every principal, to an admin (or to the one
// principal of a server without tokens).
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	body := map[string]any{"status": "ok", "version": s.Version}
	if p := s.principal(r); p != nil {
		body["running"], body["max_running"] = s.runs.Len(), s.runs.Max()
		if p.Admin || len(s.Tokens) == 0 {
			sessions := 0
			if s.Sessions != nil {
				sessions = s.Sessions.Len()
			}
			body["sessions"] = sessions
		}
	}
	_ = json.NewEncoder(w).Encode(body)
}

// authorize accepts "Authorization: Bearer TOKEN" for any of the tokens,
// and passes the request on with the token's principal in its context (see
// caller); with no token configured, every request of this user's is the
// local principal's, and another user's is refused.
func (s *Server) authorize(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := s.principal(r); p != nil {
			if info := requestInfoFrom(r.Context()); info != nil {
				info.principal = p.Name
			}
			next.ServeHTTP(w, r.WithContext(session.WithPrincipal(r.Context(), p)))
			return
		}
		if len(s.Tokens) == 0 {
			err := peerIsOwner(r)
			if err == nil { // its socket went meanwhile
				err = errors.New("the client's connection could not be told apart")
			}
			writeError(w, codecell.Errorf(codecell.KindValidation, CodeUnauthorized,
				"this codecell serve has no tokens, so it serves only the user it runs as: %v", err).WithHints(
				"run a codecell serve of your own",
				"or ask its owner to set tokens (auth.tokens in its configuration, or CODECELL_TOKENS) and to give you one"))
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="codecell"`)
		// What each side reads: the server its auth.tokens and
		// CODECELL_TOKENS, codecell run --remote CODECELL_TOKEN.
		msg := "a valid bearer token is required: this request has none"
		if r.Header.Get("Authorization") != "" {
			msg = "a valid bearer token is required: this request's is not one of the server's tokens"
		}
		writeError(w, codecell.Errorf(codecell.KindValidation, CodeUnauthorized, "%s", msg).WithHints(
			"send the header Authorization: Bearer <token>, with one of the server's tokens (its auth.tokens, or CODECELL_TOKENS where it runs)",
			"codecell run --remote reads the token from CODECELL_TOKEN; the Go client takes it in client.New"))
	})
}

// Error codes of the HTTP service, beyond the engine's.
const (
	CodeUnauthorized      = "UNAUTHORIZED"
	CodeNotFound          = "NOT_FOUND"
	CodeMethodNotAllowed  = "METHOD_NOT_ALLOWED"
	CodeSessionNotFound   = "SESSION_NOT_FOUND"
	CodeNotOwner          = "NOT_SESSION_OWNER"
	CodeSessionBusy       = "SESSION_BUSY"
	CodeForkTooLarge      = "FORK_TOO_LARGE"
	CodeSessionDeleted    = session.CodeDeleted
	CodeTooManySessions   = session.CodeTooMany
	CodeTooManyExecutions = session.CodeTooManyExecutions
	CodeRequestTooLarge   = "REQUEST_TOO_LARGE"
	CodeTierNotAllowed    = "TIER_NOT_ALLOWED"
	CodeLimitTooHigh      = session.CodeLimitTooHigh
	CodeBadPath           = "INVALID_PATH"
	CodeFileNotFound      = "FILE_NOT_FOUND"
	CodeSymlink           = "SYMLINK_REFUSED"
	CodeNotRegular        = "NOT_A_REGULAR_FILE"
	CodeUnsafeArchive     = "UNSAFE_ARCHIVE"
	CodeWorkspaceQuota    = "WORKSPACE_QUOTA"
	CodeNotEmpty          = "DIRECTORY_NOT_EMPTY"
	CodeStopping          = "SERVER_STOPPING"
	CodeTooLarge          = "TOO_LARGE"
	CodeNoSessions        = "SESSIONS_DISABLED"
	CodeIncompleteBody    = "INCOMPLETE_BODY"
	CodeInvalidArchive    = "INVALID_ARCHIVE"
	// CodeNotReadable: a file whose permissions deny its owner reading it,
	// where codecell runs as that owner (not root).
	CodeNotReadable = "FILE_NOT_READABLE"
	// CodeNoSuchApproval: no call of the caller's waits for that approval.
	CodeNoSuchApproval = "APPROVAL_NOT_FOUND"
)

// statusOf is the HTTP status of each error code the service answers with:
// the one table of them. A code not in it is 400 if the request was at
// fault (validation, guardrail, limit) and 500 if codecell was.
var statusOf = map[string]int{
	codecell.CodeInvalidRequest:  http.StatusBadRequest,
	CodeBadPath:                  http.StatusBadRequest,
	CodeNotRegular:               http.StatusBadRequest,
	CodeUnsafeArchive:            http.StatusBadRequest,
	CodeInvalidArchive:           http.StatusBadRequest,
	CodeIncompleteBody:           http.StatusBadRequest,
	CodeHostNotAllowed:           http.StatusForbidden,
	CodeOriginNotAllowed:         http.StatusForbidden,
	CodeMediaType:                http.StatusUnsupportedMediaType,
	CodeLimitTooHigh:             http.StatusBadRequest,
	codecell.CodeUnknownTier:     http.StatusBadRequest,
	codecell.CodeTierUnavailable: http.StatusBadRequest,
	CodeUnauthorized:             http.StatusUnauthorized,
	CodeSymlink:                  http.StatusForbidden,
	CodeNotReadable:              http.StatusForbidden,
	CodeNotOwner:                 http.StatusForbidden,
	CodeTierNotAllowed:           http.StatusForbidden,
	CodeNotFound:                 http.StatusNotFound,
	CodeSessionNotFound:          http.StatusNotFound,
	CodeFileNotFound:             http.StatusNotFound,
	CodeNoSuchApproval:           http.StatusNotFound,
	CodeMethodNotAllowed:         http.StatusMethodNotAllowed,
	CodeSessionBusy:              http.StatusConflict,
	CodeForkTooLarge:             http.StatusRequestEntityTooLarge,
	CodeNotEmpty:                 http.StatusConflict,
	CodeSessionDeleted:           http.StatusGone,
	CodeRequestTooLarge:          http.StatusRequestEntityTooLarge,
	CodeWorkspaceQuota:           http.StatusRequestEntityTooLarge,
	CodeTooLarge:                 http.StatusRequestEntityTooLarge,
	CodeTooManyExecutions:        http.StatusTooManyRequests,
	CodeTooManySessions:          http.StatusTooManyRequests,
	CodeNoSessions:               http.StatusNotImplemented,
	CodeStopping:                 http.StatusServiceUnavailable,
	CodeServerBusy:               http.StatusServiceUnavailable,
}

// httpStatus is the status an envelope is sent with.
func httpStatus(env *codecell.Envelope) int {
	if s, ok := statusOf[env.Code]; ok {
		return s
	}
	if env.Kind == codecell.KindInternal {
		return http.StatusInternalServerError
	}
	return http.StatusBadRequest
}

// writeError writes an envelope as the body of its error status.
func writeError(w http.ResponseWriter, env *codecell.Envelope) {
	if env.Retryable && w.Header().Get("Retry-After") == "" {
		w.Header().Set("Retry-After", "1")
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(httpStatus(env))
	_, _ = w.Write([]byte(env.JSON() + "\n"))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	_ = enc.Encode(v)
}

// decode reads a JSON body of at most max bytes into v, or returns the
// envelope to send when it cannot. A budget, when given, counts what the
// body holds while it is decoded (see bodyBudget).
func decode(w http.ResponseWriter, r *http.Request, v any, max int64, budget *heldBody) *codecell.Envelope {
	if r.ContentLength == 0 && r.Body == http.NoBody {
		return nil
	}
	if env := requireJSON(r); env != nil {
		return env
	}
	if b, ok := r.Body.(*bodyReader); ok {
		b.within(jsonBodyTime)
	}
	var body io.Reader = http.MaxBytesReader(w, r.Body, max)
	if budget != nil {
		budget.r = body
		defer budget.release()
		body = budget
	}
	// Read whole, then decoded: the same bytes are checked for keys given
	// twice, which the decoder takes silently.
	var buf bytes.Buffer
	if r.ContentLength > 0 && r.ContentLength <= max {
		buf.Grow(int(r.ContentLength) + bytes.MinRead)
	}
	_, err := buf.ReadFrom(body)
	if err == nil && len(bytes.TrimSpace(buf.Bytes())) == 0 {
		return nil // an empty body, as no body
	}
	data := buf.Bytes()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err == nil {
		err = dec.Decode(v)
	}
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			if max < maxJSONBody {
				return codecell.Errorf(codecell.KindLimit, CodeRequestTooLarge,
					"the request body is over %d KiB, far more than this route takes", max>>10).WithHints(
					"send only the fields the route takes: see /openapi.json")
			}
			return codecell.Errorf(codecell.KindLimit, CodeRequestTooLarge,
				"the request body is over %d MiB", max>>20).WithHints(
				"upload large files with PUT /v1/sessions/{id}/files/{path} and run the program in that session")
		}
		if errors.Is(err, errServerBusy) {
			return busy(w)
		}
		if errors.Is(err, errBodyRead) {
			return codecell.Errorf(codecell.KindValidation, CodeIncompleteBody,
				"the request body did not arrive whole: %v", err).WithHints(
				fmt.Sprintf("send the whole body at once; it must arrive within %v", jsonBodyTime))
		}
		return codecell.Errorf(codecell.KindValidation, codecell.CodeInvalidRequest,
			"the request body is not valid: %v%s", err, meantField(err, v)).WithHints("see /openapi.json for the shape of each request")
	}
	// Anything but space after the value: dec.More would miss a stray
	// "}" or "]", which it takes for the end of an enclosing value.
	if len(bytes.TrimSpace(data[dec.InputOffset():])) > 0 {
		return codecell.Errorf(codecell.KindValidation, codecell.CodeInvalidRequest,
			"the request body holds more than one JSON value").WithHints("send one JSON object")
	}
	return duplicateKeys(data[:dec.InputOffset()], v)
}

// duplicateKeys refuses a body that gives a key twice in one of its
// objects: the decoder keeps the last, and a proxy or an audit log in front
// of the server may read the first, so the request would not be the one
// they saw. For the same reason it refuses a key that names a field only in
// another case ("TIER" for "tier"), which the decoder takes and a reader of
// keys as written does not.
func duplicateKeys(data []byte, v any) *codecell.Envelope {
	err := jsonkeys.CheckFields(data, v)
	if w, ok := jsonkeys.IsWrongCase(err); ok {
		env := codecell.Errorf(codecell.KindValidation, codecell.CodeInvalidRequest,
			"the request body's key %q is spelled %q: keys are matched exactly", w.Key, w.Field).WithHints(
			"spell each key as /openapi.json does")
		env.Meta = map[string]any{"key": w.Key, "field": w.Field, "path": w.Path}
		return env
	}
	d, ok := jsonkeys.IsDuplicate(err)
	if !ok {
		return nil
	}
	env := codecell.Errorf(codecell.KindValidation, codecell.CodeInvalidRequest,
		"the request body gives the key %q twice in %s", d.Key, d.Where()).WithHints(
		"give each key once: a JSON object's keys must differ")
	env.Meta = map[string]any{"key": d.Key, "path": d.Path}
	return env
}

// meantField names the field an unknown one was probably meant to be
// ("; did you mean \"language\"?"), among the fields of v at any depth,
// or is empty.
func meantField(err error, v any) string {
	name, ok := strings.CutPrefix(err.Error(), "json: unknown field ")
	if !ok {
		return ""
	}
	name = strings.Trim(name, `"`)
	var names []string
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t] {
			return
		}
		seen[t] = true
		for f := range t.Fields() {
			tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			switch {
			case tag == "-" || !f.IsExported():
				continue
			case f.Anonymous && tag == "":
				walk(f.Type)
				continue
			case tag == "":
				tag = f.Name
			}
			names = append(names, tag)
			walk(f.Type)
		}
	}
	walk(reflect.TypeOf(v))
	near := codecell.Suggest(name, names)
	if near == "" && len(name) >= 3 {
		// A shortening: lang for language.
		for _, n := range names {
			if strings.HasPrefix(n, name) {
				near = n
				break
			}
		}
	}
	if near == "" {
		return ""
	}
	return fmt.Sprintf("; did you mean %q?", near)
}

// decodeSmall decodes the JSON body of a route other than an execution's:
// at most maxSmallBody bytes, counted against the server's bodies held.
func (s *Server) decodeSmall(w http.ResponseWriter, r *http.Request, v any) *codecell.Envelope {
	return decode(w, r, v, maxSmallBody, s.holdBody(r, nil))
}

// errorPages answers what the mux does not route with an envelope instead
// of its plain-text pages.
type errorPages struct{ mux *http.ServeMux }

func (e *errorPages) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h, pattern := e.mux.Handler(r)
	if pattern != "" {
		e.mux.ServeHTTP(w, r)
		return
	}
	// The mux's own 404, 405 or redirect: keep its status and headers,
	// replace its body.
	rec := &headerRecorder{header: http.Header{}}
	h.ServeHTTP(rec, r)
	for k, v := range rec.header {
		if k != "Content-Type" && k != "X-Content-Type-Options" && k != "Content-Length" {
			w.Header()[k] = v
		}
	}
	switch rec.status {
	case http.StatusMethodNotAllowed:
		writeError(w, codecell.Errorf(codecell.KindValidation, CodeMethodNotAllowed,
			"%s is not allowed on %s", r.Method, r.URL.Path).WithHints("use one of: "+rec.header.Get("Allow")))
	case http.StatusNotFound, 0:
		writeError(w, codecell.Errorf(codecell.KindValidation, CodeNotFound,
			"no such route: %s %s", r.Method, r.URL.Path).WithHints("see /openapi.json for the routes"))
	default:
		w.WriteHeader(rec.status)
	}
}

type headerRecorder struct {
	header http.Header
	status int
}

func (h *headerRecorder) Header() http.Header { return h.header }
func (h *headerRecorder) Write(b []byte) (int, error) {
	if h.status == 0 {
		h.status = http.StatusOK
	}
	return len(b), nil
}
func (h *headerRecorder) WriteHeader(code int) {
	if h.status == 0 {
		h.status = code
	}
}

// Admit takes an execution slot for a program of p's that runs outside the
// REST API, such as one of codecell serve's MCP calls, so that every
// program counts against the same limits: the server's and p's. It returns
// what to call when the program is done, or the refusal to answer with.
func (s *Server) Admit(p *session.Principal) (release func(), refusal *codecell.Envelope) {
	s.once.Do(s.init)
	return s.runs.Acquire(p)
}
