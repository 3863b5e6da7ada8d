// Package session keeps workspaces that outlive one Exec: a session's files
// are there for its next program. A session ends when it is deleted, when it
// has been idle past its idle timeout, or when its lifetime is over.
package session

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"sync"
	"time"

	"github.com/codecell-dev/codecell"
)

// Session is one workspace and its history.
type Session struct {
	ID string
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
}

// Store holds sessions. Its zero value is not usable: use NewStore.
type Store struct {
	dir   string
	idle  time.Duration
	max   int
	onEnd func(s *Session, reason string) // see OnEnd; guarded by mu

	mu       sync.Mutex
	sessions map[string]*Session
	stop     chan struct{}
	stopOnce sync.Once
}

var (
	// ErrTooMany is returned when the store holds its maximum of sessions.
	ErrTooMany = errors.New("the maximum number of sessions is reached")
	// ErrNotFound is returned for a session that does not exist, or no
	// longer does.
	ErrNotFound = errors.New("no such session")
	// ErrBusy is returned by TryAcquire while another program of the
	// session runs.
	ErrBusy = errors.New("the session is busy")
)

var validID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

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
	s := &Store{dir: dir, idle: idle, max: max, sessions: map[string]*Session{}, stop: make(chan struct{})}
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

// Acquire returns the session with this id, made when it does not exist,
// once no other program of the session runs. Release it when the program is
// done.
func (s *Store) Acquire(id string) (*Session, error) {
	if !validID.MatchString(id) {
		return nil, fmt.Errorf("session id %q: use 1 to 64 letters, digits, '_' or '-'", id)
	}
	for {
		ses, err := s.open(id, Options{})
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

// TryAcquire returns the existing session with this id if no program of it
// runs: ErrNotFound or ErrBusy otherwise. Release it when done.
func (s *Store) TryAcquire(id string) (*Session, error) {
	ses, err := s.Get(id)
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

// Create makes a session with a new, unguessable id.
func (s *Store) Create(opts Options) (*Session, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	return s.open("ses_"+hex.EncodeToString(b[:]), opts)
}

// Get returns the session with this id, without waiting for it.
func (s *Store) Get(id string) (*Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ses, ok := s.sessions[id]; ok {
		return ses, nil
	}
	return nil, ErrNotFound
}

// List returns the sessions, sorted by id.
func (s *Store) List() []*Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Session, 0, len(s.sessions))
	for _, ses := range s.sessions {
		out = append(out, ses)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (s *Store) open(id string, opts Options) (*Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ses, ok := s.sessions[id]; ok {
		return ses, nil
	}
	select {
	case <-s.stop:
		return nil, errors.New("the session store is closed")
	default:
	}
	if len(s.sessions) >= s.max {
		return nil, ErrTooMany
	}
	ws, err := os.MkdirTemp(s.dir, "session-"+id+"-")
	if err != nil {
		return nil, err
	}
	now := time.Now()
	idle := opts.Idle
	if idle <= 0 {
		idle = s.idle
	}
	ses := &Session{ID: id, Workspace: ws, Created: now, TTL: opts.TTL, Idle: idle,
		Tier: opts.Tier, Limits: opts.Limits, Policy: opts.Policy, lastUsed: now}
	s.sessions[id] = ses
	return ses, nil
}

// Delete ends a session and removes its workspace: a program of it that
// runs is ended first. It reports whether the session existed.
func (s *Store) Delete(id string) bool {
	return s.end(id, "deleted")
}

func (s *Store) end(id, reason string) bool {
	s.mu.Lock()
	ses, ok := s.sessions[id]
	delete(s.sessions, id)
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
	// Wait for the program to be gone before its workspace is.
	ses.mu.Lock()
	os.RemoveAll(ses.Workspace)
	ses.mu.Unlock()
	s.ended(ses, reason)
	return true
}

// IDs lists the sessions, sorted.
func (s *Store) IDs() []string {
	list := s.List()
	ids := make([]string, len(list))
	for i, ses := range list {
		ids[i] = ses.ID
	}
	return ids
}

// Len is the number of sessions.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}

// Close ends every session and removes their workspaces. Programs that run
// are ended.
func (s *Store) Close() {
	s.stopOnce.Do(func() { close(s.stop) })
	for _, id := range s.IDs() {
		s.end(id, "closed")
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
		for _, ses := range s.List() {
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
		delete(s.sessions, id)
	}
	ses.st.Unlock()
	s.mu.Unlock()
	if expired {
		os.RemoveAll(ses.Workspace)
	}
	ses.mu.Unlock()
	if expired {
		s.ended(ses, "expired")
	}
}
