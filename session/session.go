// Package session keeps workspaces that outlive one Exec: a session's files
// are there for its next program. A session belongs to the principal that
// made it; to any other it does not exist. A session ends when it is
// deleted, when it has been idle past its idle timeout, or when its lifetime
// is over.
package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/codecell-dev/codecell/internal/lazyre"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/api"
	"github.com/codecell-dev/codecell/internal/workspace"
)

// Session is one workspace and its history.
type Session struct {
	// ID is unique in the store and unguessable.
	ID string
	// Owner is the name of the principal that made the session.
	Owner string
	// Name is the name an MCP client gave the session, unique among its
	// owner's sessions; empty for a session made with Create.
	Name string
	// Workspace is the host directory the session's programs run in (the
	// native tier runs them on a copy, and brings their changes back).
	Workspace string
	Created   time.Time
	// TTL is the session's lifetime from Created; zero means no limit but
	// the idle timeout.
	TTL time.Duration
	// Idle ends the session when it has not been used for this long.
	Idle time.Duration
	// Tier, Limits and Policy apply to each of the session's programs, which
	// may only narrow them. They are set at creation and never change.
	Tier   string
	Limits codecell.Limits
	Policy *codecell.Policy
	// Packages are installed for each of its programs, with their own.
	Packages codecell.Packages
	// Live, for a live session, keeps its interpreters between programs
	// (see codecell.Live); nil for a session that keeps files only. It is
	// closed when the session ends.
	Live *codecell.Live
	// ToolUsage counts the tool calls of the session's programs, for the
	// policy's per-session rates.
	ToolUsage codecell.ToolUsage

	mu sync.Mutex // held while the session is busy: one program at a time

	st         sync.Mutex // guards the fields below
	lastUsed   time.Time
	executions int
	running    bool
	cancel     func() // ends the running program, if any
	ended      bool   // deleted or expired: its workspace is gone
}

// Info is what can be said of a session at one moment.
type Info struct {
	LastUsed   time.Time
	ExpiresAt  time.Time
	Executions int
	Running    bool
}

// Info returns the session's state now.
func (s *Session) Info() Info {
	s.st.Lock()
	defer s.st.Unlock()
	return Info{LastUsed: s.lastUsed, ExpiresAt: s.expiresAt(), Executions: s.executions, Running: s.running}
}

// expiresAt is when the session ends unless it is used before; st is held.
func (s *Session) expiresAt() time.Time {
	at := s.lastUsed.Add(s.Idle)
	if s.TTL > 0 {
		if end := s.Created.Add(s.TTL); end.Before(at) {
			at = end
		}
	}
	return at
}

// Running marks that a program of the session runs, and how to end it if
// the session is deleted meanwhile. The session must be held (Acquire).
func (s *Session) Running(cancel func()) {
	s.st.Lock()
	s.running, s.cancel = true, cancel
	s.executions++
	s.st.Unlock()
}

// Release lets the session's next program run, and marks the session used.
func (s *Session) Release() {
	s.st.Lock()
	s.lastUsed = time.Now()
	s.running, s.cancel = false, nil
	s.st.Unlock()
	s.mu.Unlock()
}

// Options are how a session is made.
type Options struct {
	// TTL is the session's lifetime; zero means none.
	TTL time.Duration
	// Idle is its idle timeout; zero means the store's.
	Idle   time.Duration
	Tier   string
	Limits codecell.Limits
	Policy *codecell.Policy
	// Packages are the session's packages (Session.Packages).
	Packages codecell.Packages
	// Live makes a live session: its interpreters, which the session
	// closes when it ends.
	Live *codecell.Live
}

// State is "live" for a live session, else "files".
func (s *Session) State() string {
	if s.Live != nil {
		return "live"
	}
	return "files"
}

// Store holds sessions. Its zero value is not usable: use NewStore.
type Store struct {
	dir   string
	idle  time.Duration
	max   int
	onEnd func(s *Session, reason string) // see OnEnd; guarded by mu

	mu       sync.Mutex
	sessions map[string]*Session    // by ID
	named    map[ownedName]*Session // the sessions that have a Name
	held     map[string]int         // how many sessions each owner holds
	stop     chan struct{}
	stopOnce sync.Once
}

// ownedName is a Name as its owner knows it: two principals' sessions of
// the same name are two sessions.
type ownedName struct{ owner, name string }

var (
	// ErrTooMany is returned when the store holds its maximum of sessions.
	ErrTooMany = errors.New("the maximum number of sessions is reached")
	// ErrPrincipalFull is returned when the principal holds its maximum of
	// sessions (Principal.MaxSessions).
	ErrPrincipalFull = errors.New("the principal holds its maximum number of sessions")
	// ErrNotFound is returned for a session that does not exist, no longer
	// does, or is another principal's: the caller cannot tell these apart.
	ErrNotFound = errors.New("no such session")
	// ErrNotOwner is returned to an admin that would change another
	// principal's session (run a program in it, change its files), which
	// only its owner may.
	ErrNotOwner = errors.New("the session is another principal's: an admin may read it and end it, not change it")
	// ErrBusy is returned by TryAcquire while another program of the
	// session runs.
	ErrBusy = errors.New("the session is busy")
)

// The error codes of envelopes that report to a client, over REST and MCP
// alike, ErrTooMany or ErrPrincipalFull (CodeTooMany), and a session
// deleted while its program ran (CodeDeleted).
const (
	CodeTooMany = "TOO_MANY_SESSIONS"
	CodeDeleted = "SESSION_DELETED"
)

var validID = lazyre.New(`^[A-Za-z0-9_-]{1,64}$`)

// NewStore keeps sessions' workspaces under dir (created if missing),
// expires sessions idle for idle (unless a session says otherwise), and
// holds at most max at once.
func NewStore(dir string, idle time.Duration, max int) (*Store, error) {
	if idle <= 0 || max <= 0 {
		return nil, fmt.Errorf("session store: the idle timeout and the maximum of sessions must be positive")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	s := &Store{dir: dir, idle: idle, max: max, sessions: map[string]*Session{}, named: map[ownedName]*Session{},
		held: map[string]int{}, stop: make(chan struct{})}
	go s.expire()
	return s, nil
}

// OnEnd adds fn to what is called once for each session that ends, with
// the reason: "deleted", "expired" or "closed". fn runs after the
// session's workspace is removed.
func (s *Store) OnEnd(fn func(ses *Session, reason string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	prev := s.onEnd
	s.onEnd = func(ses *Session, reason string) {
		if prev != nil {
			prev(ses, reason)
		}
		fn(ses, reason)
	}
}

func (s *Store) ended(ses *Session, reason string) {
	s.mu.Lock()
	fn := s.onEnd
	s.mu.Unlock()
	if fn != nil {
		fn(ses, reason)
	}
}

// Max is the most sessions the store holds at once.
func (s *Store) Max() int { return s.max }

// access is what a principal would do with a session.
type access int

const (
	read   access = iota // describe it, list and download its files
	change               // run a program in it, change its files
	remove               // end it
)

// may says whether p may do a with ses: nil if so, else the error to
// answer with. Another's session does not exist for a principal, but for an
// admin, who may read and end it.
func (p *Principal) may(ses *Session, a access) error {
	switch {
	case p == nil || p.Name == "":
		return ErrNotFound
	case ses.Owner == p.Name:
		return nil
	case !p.Admin:
		return ErrNotFound
	case a == change:
		return ErrNotOwner
	}
	return nil
}

// Acquire returns p's session that ref names, once no other program of it
// runs: the session with that ID if it is p's, else p's session of that
// Name, made when p has none. Another principal's session is never
// returned: a ref that is its ID names a session of p's own. Release it
// when the program is done.
func (s *Store) Acquire(p *Principal, ref string) (*Session, error) {
	return s.AcquireOr(p, ref, func() Options { return Options{} })
}

// AcquireOr is Acquire, with the options of a session it makes: made by
// opts when one is made.
func (s *Store) AcquireOr(p *Principal, ref string, opts func() Options) (*Session, error) {
	if !validID().MatchString(ref) {
		return nil, fmt.Errorf("session id %q: use 1 to 64 letters, digits, '_' or '-'", ref)
	}
	if p == nil || p.Name == "" {
		return nil, errNoOwner
	}
	for {
		ses, err := s.openNamed(p, ref, opts)
		if err != nil {
			return nil, err
		}
		ses.mu.Lock()
		if ses.alive() {
			return ses, nil
		}
		// It ended while we waited: take the one that replaces it.
	}
}

var errNoOwner = errors.New("a session needs a principal to own it")

// openNamed finds p's session by ID or by name, or makes one of that name.
func (s *Store) openNamed(p *Principal, ref string, opts func() Options) (*Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ses := s.refLocked(p, ref); ses != nil {
		return ses, nil
	}
	return s.newLocked(p, ref, opts())
}

// refLocked is p's session of that ID or name, or nil; s.mu is held.
func (s *Store) refLocked(p *Principal, ref string) *Session {
	if ses, ok := s.sessions[ref]; ok && ses.Owner == p.Name {
		return ses
	}
	return s.named[ownedName{p.Name, ref}]
}

// Lookup returns p's session that ref names, by ID or by name, without
// making one: ErrNotFound when p has none.
func (s *Store) Lookup(p *Principal, ref string) (*Session, error) {
	if p == nil {
		return nil, ErrNotFound
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ses := s.refLocked(p, ref); ses != nil {
		return ses, nil
	}
	return nil, ErrNotFound
}

// TryAcquire returns the session with this id for p to change (run a
// program, change its files) if no program of it runs: ErrNotFound (also
// for another principal's session), ErrNotOwner (an admin, for another's)
// or ErrBusy otherwise. Release it when done.
func (s *Store) TryAcquire(p *Principal, id string) (*Session, error) {
	ses, err := s.find(p, id, change)
	if err != nil {
		return nil, err
	}
	if !ses.mu.TryLock() {
		return nil, ErrBusy
	}
	if !ses.alive() {
		return nil, ErrNotFound
	}
	return ses, nil
}

// alive, with the session locked, marks it used and reports whether it is
// still alive; a dead session is unlocked.
func (ses *Session) alive() bool {
	ses.st.Lock()
	ended := ses.ended
	if !ended {
		ses.lastUsed = time.Now()
	}
	ses.st.Unlock()
	if ended {
		ses.mu.Unlock()
	}
	return !ended
}

// Create makes a session owned by p, with a new, unguessable id.
func (s *Store) Create(p *Principal, opts Options) (*Session, error) {
	if p == nil || p.Name == "" {
		return nil, errNoOwner
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.newLocked(p, "", opts)
}

// Get returns the session with this id, without waiting for it, if p may
// read it: p's own, or any for an admin. ErrNotFound otherwise.
func (s *Store) Get(p *Principal, id string) (*Session, error) {
	return s.find(p, id, read)
}

func (s *Store) find(p *Principal, id string, a access) (*Session, error) {
	s.mu.Lock()
	ses, ok := s.sessions[id]
	s.mu.Unlock()
	if !ok {
		return nil, ErrNotFound
	}
	if err := p.may(ses, a); err != nil {
		return nil, err
	}
	return ses, nil
}

// List returns the sessions p may see, sorted by id: its own, or all of
// them for an admin.
func (s *Store) List(p *Principal) []*Session {
	var out []*Session
	for _, ses := range s.all() {
		if p.may(ses, read) == nil {
			out = append(out, ses)
		}
	}
	return out
}

// all returns every session, sorted by id.
func (s *Store) all() []*Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Session, 0, len(s.sessions))
	for _, ses := range s.sessions {
		out = append(out, ses)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// newLocked makes a session of p's, named name ("" for none); s.mu is
// held.
func (s *Store) newLocked(p *Principal, name string, opts Options) (*Session, error) {
	select {
	case <-s.stop:
		return nil, errors.New("the session store is closed")
	default:
	}
	// The principal's own limit first: it says what the principal can do
	// about it (end sessions of its own), which the store's does not.
	if p.MaxSessions > 0 && s.held[p.Name] >= p.MaxSessions {
		return nil, ErrPrincipalFull
	}
	if len(s.sessions) >= s.max {
		return nil, ErrTooMany
	}
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	id := "ses_" + hex.EncodeToString(b[:])
	ws, err := os.MkdirTemp(s.dir, "session-"+id+"-")
	if err != nil {
		return nil, err
	}
	now := time.Now()
	idle := opts.Idle
	if idle <= 0 {
		idle = s.idle
	}
	ses := &Session{ID: id, Owner: p.Name, Name: name, Workspace: ws, Created: now, TTL: opts.TTL, Idle: idle,
		Tier: opts.Tier, Limits: opts.Limits, Policy: opts.Policy, Packages: opts.Packages, Live: opts.Live, lastUsed: now}
	s.sessions[id] = ses
	if name != "" {
		s.named[ownedName{p.Name, name}] = ses
	}
	s.held[p.Name]++
	return ses, nil
}

// forgetLocked removes ses from the store's indexes; s.mu is held.
func (s *Store) forgetLocked(ses *Session) {
	delete(s.sessions, ses.ID)
	if ses.Name != "" {
		delete(s.named, ownedName{ses.Owner, ses.Name})
	}
	if s.held[ses.Owner]--; s.held[ses.Owner] <= 0 {
		delete(s.held, ses.Owner)
	}
}

// Delete ends the session with this id if p may: its owner, or an admin.
// A program of it that runs is ended first, and its workspace removed. It
// returns ErrNotFound for a session p may not end, as for one that does not
// exist.
func (s *Store) Delete(p *Principal, id string) error {
	if _, err := s.find(p, id, remove); err != nil {
		return err
	}
	if !s.end(id, "deleted") {
		return ErrNotFound
	}
	return nil
}

func (s *Store) end(id, reason string) bool {
	s.mu.Lock()
	ses, ok := s.sessions[id]
	if ok {
		s.forgetLocked(ses)
	}
	s.mu.Unlock()
	if !ok {
		return false
	}
	ses.st.Lock()
	ses.ended = true
	cancel := ses.cancel
	ses.st.Unlock()
	if cancel != nil {
		cancel()
	}
	if ses.Live != nil {
		// Its interpreters end now, and a cell of them with them.
		ses.Live.Close()
	}
	// Wait for the program to be gone before its workspace is.
	ses.mu.Lock()
	workspace.RemoveAll(ses.Workspace)
	ses.mu.Unlock()
	s.ended(ses, reason)
	return true
}

// LiveStats counts the live sessions and the memory their interpreters
// hold, in bytes.
func (s *Store) LiveStats() (sessions int, memory int64) {
	for _, ses := range s.all() {
		if ses.Live != nil {
			sessions++
			memory += ses.Live.Memory()
		}
	}
	return sessions, memory
}

// Len is the number of sessions, all principals' together.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}

// Close ends every session and removes their workspaces. Programs that run
// are ended.
func (s *Store) Close() {
	s.stopOnce.Do(func() { close(s.stop) })
	for _, ses := range s.all() {
		s.end(ses.ID, "closed")
	}
}

// expire ends sessions idle past their idle timeout or past their lifetime;
// one whose program runs is not idle, and ends when its program is done.
func (s *Store) expire() {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
		now := time.Now()
		var due []string
		for _, ses := range s.all() {
			ses.st.Lock()
			if !ses.running && now.After(ses.expiresAt()) {
				due = append(due, ses.ID)
			}
			ses.st.Unlock()
		}
		for _, id := range due {
			s.endIfIdle(id, now)
		}
	}
}

// endIfIdle ends the session unless it was used since the sweep looked, or
// is in use now.
func (s *Store) endIfIdle(id string, now time.Time) {
	s.mu.Lock()
	ses, ok := s.sessions[id]
	if !ok || !ses.mu.TryLock() {
		s.mu.Unlock()
		return
	}
	ses.st.Lock()
	expired := now.After(ses.expiresAt())
	if expired {
		ses.ended = true
		s.forgetLocked(ses)
	}
	ses.st.Unlock()
	s.mu.Unlock()
	if expired {
		if ses.Live != nil {
			ses.Live.Close()
		}
		workspace.RemoveAll(ses.Workspace)
	}
	ses.mu.Unlock()
	if expired {
		s.ended(ses, "expired")
	}
}

// CodeLimitTooHigh is the error code of an Exec that asks for more than
// its session (or the server) allows.
const CodeLimitTooHigh = "LIMIT_TOO_HIGH"

// Narrow returns the limits of an Exec in a session: the session's, with
// the fields the Exec sets, which may only be lower. An Exec that asks for
// more than its session allows is refused, never quietly given less.
func Narrow(session, exec codecell.Limits) (codecell.Limits, *codecell.Envelope) {
	for _, f := range api.LimitFields {
		if v, b := f.Get(exec), f.Get(session); v > 0 && b > 0 && v > b {
			return codecell.Limits{}, codecell.Errorf(codecell.KindValidation, CodeLimitTooHigh,
				"the execution asks for a %s limit of %s, above its session's %s", f.Name, f.Show(v), f.Show(b)).WithHints(
				"an execution may only lower its session's limits: run it in a session made with higher ones, or in none")
		}
	}
	return exec.Or(session), nil
}

// A Run is an Exec under way in a session, from Start to End.
type Run struct {
	ses     *Session
	cancel  context.CancelFunc
	deleted atomic.Bool
	ended   sync.Once
}

// Start prepares x to run in the session, which the caller holds (Acquire
// or TryAcquire): its limits narrowed by the session's (see Narrow), the
// session's workspace and policy, and its tier when x names none. The
// context it returns ends when ctx does or when the session ends under the
// program (deleted, expired, or its store closed); Deleted then says so.
// End releases the session; call it once the program is over, whatever
// became of it. On a refusal the session is released already.
func (s *Session) Start(ctx context.Context, x *codecell.Exec) (context.Context, *Run, *codecell.Envelope) {
	lim, env := Narrow(s.Limits, x.Limits)
	if env != nil {
		s.Release()
		return nil, nil, env
	}
	x.Limits = lim
	x.Workspace, x.SessionPolicy, x.Live = s.Workspace, s.Policy, s.Live
	x.ToolUsage = &s.ToolUsage
	x.Packages = s.Packages.With(x.Packages)
	if x.Tier == "" {
		x.Tier = s.Tier
	}
	run := &Run{ses: s}
	ctx, run.cancel = context.WithCancel(ctx)
	s.Running(func() {
		run.deleted.Store(true)
		run.cancel()
	})
	return ctx, run, nil
}

// Deleted reports that the session ended while the program ran, which
// ended the program.
func (r *Run) Deleted() bool { return r.deleted.Load() }

// End releases the session for its next program, and ends the run's
// context. It may be called more than once.
func (r *Run) End() {
	r.ended.Do(func() {
		r.cancel()
		r.ses.Release()
	})
}

// DeletedError is the envelope of a program whose session ended under it.
func DeletedError() *codecell.Envelope {
	return codecell.Errorf(codecell.KindValidation, CodeDeleted,
		"the session was deleted while the program ran; the program was ended").WithHints(
		"create a new session (or give another session name) and run the program again")
}
