package server

import (
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/api"
	"github.com/codecell-dev/codecell/internal/workspace"
	"github.com/codecell-dev/codecell/session"
)

func (s *Server) createSession(w http.ResponseWriter, r *http.Request) {
	if s.Sessions == nil {
		writeError(w, codecell.Errorf(codecell.KindValidation, CodeNoSessions,
			"this server keeps no sessions").WithHints("run programs with POST /v1/executions"))
		return
	}
	var req api.SessionSpec
	if env := s.decodeSmall(w, r, &req); env != nil {
		writeError(w, env)
		return
	}
	opts := session.Options{Packages: req.Packages}
	if env := req.Packages.Refusal(); env != nil {
		writeError(w, env)
		return
	}
	if req.Policy != nil {
		opts.Policy = req.Policy.Codecell()
	}
	var env *codecell.Envelope
	if opts.Tier, env = s.checkTier(req.Tier); env != nil {
		writeError(w, env)
		return
	}
	if req.Limits != nil {
		if env := limitsError(req.Limits.Check()); env != nil {
			writeError(w, env)
			return
		}
		opts.Limits = req.Limits.Codecell()
	}
	if env := s.checkMax(opts.Limits, "session"); env != nil {
		writeError(w, env)
		return
	}
	ttl := time.Duration(req.TTL)
	if ttl == 0 {
		ttl = s.sessionTTL()
	}
	if top := s.maxSessionTTL(); ttl > top {
		writeError(w, codecell.Errorf(codecell.KindValidation, CodeLimitTooHigh,
			"the session's ttl is %v; this server keeps a session at most %v", ttl, top).WithHints(
			"ask for a shorter ttl, or leave it out for the default of "+s.sessionTTL().String()))
		return
	}
	opts.TTL, opts.Idle = ttl, time.Duration(req.IdleTimeout)
	switch req.State {
	case "", api.StateFiles:
	case api.StateLive:
		if env := s.checkLive(opts.Tier); env != nil {
			writeError(w, env)
			return
		}
		opts.Live = s.Engine.NewLive()
	default:
		writeError(w, codecell.Errorf(codecell.KindValidation, codecell.CodeInvalidRequest,
			"state %q is not a session state", req.State).WithHints(
			`use "files" (the default: the workspace is kept) or "live" (the interpreter is kept too)`))
		return
	}
	ses, err := s.Sessions.Create(caller(r), opts)
	if err != nil {
		if opts.Live != nil {
			opts.Live.Close()
		}
		s.sessionError(w, r, err)
		return
	}
	s.metrics.sessionsCreated.Inc()
	s.Logger.Info("session created", "session_id", ses.ID, "principal", ses.Owner, "tier", ses.Tier, "ttl", ttl.String())
	w.Header().Set("Location", "/v1/sessions/"+ses.ID)
	writeJSON(w, http.StatusCreated, s.describe(ses))
}

func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) {
	out := []api.Session{}
	if s.Sessions != nil {
		for _, ses := range s.Sessions.List(caller(r)) {
			out = append(out, s.describe(ses))
		}
	}
	writeJSON(w, http.StatusOK, api.SessionList{Sessions: out})
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request) {
	ses, ok := s.lookup(w, r)
	if !ok {
		return
	}
	out := s.describe(ses)
	out.WorkspaceQuota = s.quota(ses)
	if root, err := workspace.Open(ses.Workspace); err == nil {
		out.WorkspaceBytes, _ = root.Usage()
		root.Close()
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request) {
	if s.Sessions == nil {
		s.sessionError(w, r, session.ErrNotFound)
		return
	}
	if err := s.Sessions.Delete(caller(r), r.PathValue("id")); err != nil {
		s.sessionError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// lookup finds the session the path names for the caller to read, or
// answers 404: another principal's session is not found either, unless the
// caller is an admin.
func (s *Server) lookup(w http.ResponseWriter, r *http.Request) (*session.Session, bool) {
	if s.Sessions == nil {
		s.sessionError(w, r, session.ErrNotFound)
		return nil, false
	}
	ses, err := s.Sessions.Get(caller(r), r.PathValue("id"))
	if err != nil {
		s.sessionError(w, r, err)
		return nil, false
	}
	return ses, true
}

// hold takes the session the path names for a change by the caller, its
// owner: an execution or an upload. It answers 404 (also for another
// principal's session), 403 (an admin's, for another's) or 409 when it
// cannot.
func (s *Server) hold(w http.ResponseWriter, r *http.Request) (*session.Session, bool) {
	if s.Sessions == nil {
		s.sessionError(w, r, session.ErrNotFound)
		return nil, false
	}
	ses, err := s.Sessions.TryAcquire(caller(r), r.PathValue("id"))
	if err != nil {
		s.sessionError(w, r, err)
		return nil, false
	}
	return ses, true
}

func (s *Server) sessionError(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, session.ErrNotFound):
		writeError(w, codecell.Errorf(codecell.KindValidation, CodeSessionNotFound,
			"no such session: it never existed, was deleted, or expired").WithHints(
			"create a session with POST /v1/sessions", "GET /v1/sessions lists the sessions"))
	case errors.Is(err, session.ErrBusy):
		env := codecell.Errorf(codecell.KindLimit, CodeSessionBusy,
			"another execution or upload of this session is in progress").WithHints(
			"wait for it to finish, then retry", "use another session to run programs side by side")
		env.Retryable = true
		writeError(w, env)
	case errors.Is(err, session.ErrNotOwner):
		writeError(w, codecell.Errorf(codecell.KindValidation, CodeNotOwner,
			"this session is another token's: an admin may read it and delete it, not change it or run programs in it").WithHints(
			"run programs and change files in sessions of your own (POST /v1/sessions)"))
	case errors.Is(err, session.ErrPrincipalFull):
		max := 0
		if p := caller(r); p != nil {
			max = p.MaxSessions
			s.metrics.refused(p.Name, "sessions")
		}
		env := codecell.Errorf(codecell.KindLimit, CodeTooManySessions,
			"your token already holds as many sessions as it may (%d)", max).WithHints(
			"delete sessions you no longer need (DELETE /v1/sessions/{id}; GET /v1/sessions lists yours)",
			"or run the program without a session (POST /v1/executions)")
		env.Retryable = true
		w.Header().Set("Retry-After", "10")
		writeError(w, env)
	case errors.Is(err, session.ErrTooMany):
		env := codecell.Errorf(codecell.KindLimit, CodeTooManySessions,
			"this server holds its maximum of %d sessions", s.Sessions.Max()).WithHints(
			"delete sessions you no longer need (DELETE /v1/sessions/{id})", "or run the program without a session (POST /v1/executions)")
		env.Retryable = true
		w.Header().Set("Retry-After", "10")
		writeError(w, env)
	default:
		s.internalError(w, err)
	}
}

func (s *Server) internalError(w http.ResponseWriter, err error) {
	s.Logger.Error("internal error", "error", err.Error())
	writeError(w, codecell.Errorf(codecell.KindInternal, codecell.CodeSandboxFailure,
		"codecell failed: %v", err).WithHints("retry; if it persists, see codecell's log"))
}

// checkLive refuses a live session on a tier that cannot keep an
// interpreter between executions.
func (s *Server) checkLive(tier string) *codecell.Envelope {
	t, env := s.Engine.ResolveTier(tier)
	if env != nil {
		return env
	}
	if _, ok := t.(codecell.LiveTier); !ok {
		return codecell.Errorf(codecell.KindValidation, codecell.CodeTierUnavailable,
			"tier %s cannot keep an interpreter between executions, which a live session needs", t.Name()).WithHints(
			`make the live session on the native tier`, `or make a session whose state is "files"`)
	}
	return nil
}

// restartSession ends a live session's interpreters: its next executions
// start afresh, with the same workspace.
func (s *Server) restartSession(w http.ResponseWriter, r *http.Request) {
	if !s.noBody(w, r) {
		return
	}
	ses, ok := s.hold(w, r)
	if !ok {
		return
	}
	defer ses.Release()
	if ses.Live == nil {
		writeError(w, codecell.Errorf(codecell.KindValidation, codecell.CodeInvalidRequest,
			"session %s keeps files only: it has no interpreter to restart", ses.ID).WithHints(
			`make the session with "state": "live" to keep interpreters between executions`))
		return
	}
	ses.Live.Restart()
	s.Logger.Info("session restarted", "session_id", ses.ID, "principal", ses.Owner)
	writeJSON(w, http.StatusOK, s.describe(ses))
}

// forkSession makes a session that starts where another stands: a copy of
// its workspace and, for a live session, of its Python interpreter's
// state.
func (s *Server) forkSession(w http.ResponseWriter, r *http.Request) {
	if !s.noBody(w, r) {
		return
	}
	if s.Sessions == nil {
		s.sessionError(w, r, session.ErrNotFound)
		return
	}
	id := r.PathValue("id")
	ses, reports, err := s.Sessions.Fork(r.Context(), caller(r), id, "", s.Engine.Limits.Or(codecell.DefaultLimits))
	switch {
	case errors.Is(err, codecell.ErrLiveBusy):
		s.sessionError(w, r, session.ErrBusy)
		return
	case errors.Is(err, codecell.ErrForkTooLarge):
		writeError(w, codecell.Errorf(codecell.KindLimit, CodeForkTooLarge, "%v", err).WithHints(
			"delete large variables the fork does not need (del name) and fork again",
			"or make a session with a higher memory limit"))
		return
	case err != nil && isSessionError(err):
		s.sessionError(w, r, err)
		return
	case err != nil:
		writeError(w, codecell.Errorf(codecell.KindValidation, codecell.CodeInvalidRequest, "the session could not be forked: %v", err).WithHints(
			"restart the session (POST /v1/sessions/{id}/restart) or fork it again"))
		return
	}
	s.metrics.sessionsCreated.Inc()
	s.Logger.Info("session forked", "session_id", ses.ID, "forked_from", id, "principal", ses.Owner)
	w.Header().Set("Location", "/v1/sessions/"+ses.ID)
	writeJSON(w, http.StatusCreated, api.ForkedSession{Session: s.describe(ses), ForkedFrom: id, Fork: reports})
}

// noBody refuses a body on a route that takes none, rather than ignore it:
// text a page sent (415), or fields the route does not know (400). An empty
// JSON object is no request either way. It reports whether to go on.
func (s *Server) noBody(w http.ResponseWriter, r *http.Request) bool {
	if env := s.decodeSmall(w, r, &struct{}{}); env != nil {
		writeError(w, env)
		return false
	}
	return true
}

// isSessionError says whether sessionError knows err.
func isSessionError(err error) bool {
	for _, e := range []error{session.ErrNotFound, session.ErrBusy, session.ErrNotOwner, session.ErrPrincipalFull, session.ErrTooMany} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// sessionVariables lists the names a live session's interpreter holds
// (?language=, python by default), with type and a short repr.
func (s *Server) sessionVariables(w http.ResponseWriter, r *http.Request) {
	ses, ok := s.lookup(w, r)
	if !ok {
		return
	}
	if ses.Live == nil {
		writeError(w, codecell.Errorf(codecell.KindValidation, codecell.CodeInvalidRequest,
			"session %s keeps files only: it holds no variables", ses.ID).WithHints(
			`make the session with "state": "live" to keep variables between executions`))
		return
	}
	language := r.URL.Query().Get("language")
	if language == "" {
		language = "python"
	}
	vars, err := ses.Live.Variables(r.Context(), language)
	switch {
	case errors.Is(err, codecell.ErrLiveBusy):
		env := codecell.Errorf(codecell.KindLimit, CodeSessionBusy, "an execution of this session is running").WithHints(
			"ask again when it is done")
		env.Retryable = true
		writeError(w, env)
		return
	case err != nil:
		writeError(w, codecell.Errorf(codecell.KindValidation, codecell.CodeInvalidRequest, "%v", err).WithHints(
			"a live session keeps Python interpreters: ask for language python"))
		return
	}
	writeJSON(w, http.StatusOK, api.Variables{Language: language, Variables: vars})
}

// describe is what the API says of a session.
func (s *Server) describe(ses *session.Session) api.Session {
	info := ses.Info()
	out := api.Session{ID: ses.ID, Owner: ses.Owner, Name: ses.Name, TTL: api.Duration(ses.TTL), IdleTimeout: api.Duration(ses.Idle),
		CreatedAt: ses.Created.UTC(), LastUsedAt: info.LastUsed.UTC(), ExpiresAt: info.ExpiresAt.UTC(),
		Executions: info.Executions, Running: info.Running}
	out.Tier = ses.Tier
	if ses.Limits != (codecell.Limits{}) {
		l := api.LimitsOf(ses.Limits)
		out.Limits = &l
	}
	out.Policy = api.PolicyOf(ses.Policy)
	out.Packages = ses.Packages
	out.State = ses.State()
	if ses.Live != nil {
		for _, st := range ses.Live.Status() {
			out.Interpreters = append(out.Interpreters, api.Interpreter{Language: st.Language, Running: st.Running,
				Memory: st.Memory, Started: st.Started.UTC(), Cells: st.Cells})
		}
	}
	return out
}

func (s *Server) sessionTTL() time.Duration {
	if s.SessionTTL > 0 {
		return s.SessionTTL
	}
	return time.Hour
}

func (s *Server) maxSessionTTL() time.Duration {
	if s.MaxSessionTTL > 0 {
		return max(s.MaxSessionTTL, s.sessionTTL())
	}
	return max(24*time.Hour, s.sessionTTL())
}

// checkTier returns the tier a client asked for ("" means the engine's
// default), refusing tiers the operator did not offer.
func (s *Server) checkTier(name string) (string, *codecell.Envelope) {
	def := s.Engine.Tier
	if def == "" {
		def = "auto"
	}
	if name == "" {
		return "", nil
	}
	// The default and the tiers offered besides it, each by any name it
	// goes by: "auto" and the tier it picks on this host are one and the
	// same.
	offered := append([]string{def}, s.Tiers...)
	allowed := slices.Clone(offered)
	if a, env := s.Engine.ResolveTier("auto"); env == nil {
		for _, n := range offered {
			switch n {
			case "auto":
				allowed = append(allowed, a.Name())
			case a.Name():
				allowed = append(allowed, "auto")
			}
		}
	}
	slices.Sort(allowed)
	allowed = slices.Compact(allowed)
	if !slices.Contains(allowed, name) {
		return "", codecell.Errorf(codecell.KindValidation, CodeTierNotAllowed,
			"this server does not offer tier %q", name).WithHints("leave the tier out for the server's default, or use one of: " + joinQuoted(allowed))
	}
	if _, env := s.Engine.ResolveTier(name); env != nil {
		return "", env
	}
	return name, nil
}

func joinQuoted(list []string) string {
	out := ""
	for i, s := range list {
		if i > 0 {
			out += ", "
		}
		out += `"` + s + `"`
	}
	return out
}
