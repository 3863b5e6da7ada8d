// Package session keeps workspaces that outlive one Exec: a session's files
// are there for its next program. Sessions expire when idle past their TTL.
package session

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"sync"
	"time"
)

// Session is one workspace and its history.
type Session struct {
	ID string
	// Workspace is the host directory the session's programs run in (the
	// native tier runs them on a copy, and brings their changes back).
	Workspace string
	Created   time.Time

	mu       sync.Mutex // one program at a time; guards the fields below
	lastUsed time.Time
	ended    bool // deleted or expired: its workspace is gone
}

// Release lets the session's next program run, and marks the session used.
func (s *Session) Release() {
	s.lastUsed = time.Now()
	s.mu.Unlock()
}

// Store holds sessions. Its zero value is not usable: use NewStore.
type Store struct {
	dir string
	ttl time.Duration
	max int

	mu       sync.Mutex
	sessions map[string]*Session
	stop     chan struct{}
	stopOnce sync.Once
}

// ErrTooMany is returned when the store holds its maximum of sessions.
var ErrTooMany = errors.New("the maximum number of sessions is reached")

var validID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// NewStore keeps sessions' workspaces under dir (created if missing),
// expires sessions idle for ttl, and holds at most max at once.
func NewStore(dir string, ttl time.Duration, max int) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	s := &Store{dir: dir, ttl: ttl, max: max, sessions: map[string]*Session{}, stop: make(chan struct{})}
	go s.expire()
	return s, nil
}

// Acquire returns the session with this id, made when it does not exist,
// once no other program of the session runs. Release it when the program is
// done.
func (s *Store) Acquire(id string) (*Session, error) {
	for {
		ses, err := s.open(id)
		if err != nil {
			return nil, err
		}
		ses.mu.Lock()
		if !ses.ended {
			ses.lastUsed = time.Now()
			return ses, nil
		}
		// It ended while we waited: take the one that replaces it.
		ses.mu.Unlock()
	}
}

func (s *Store) open(id string) (*Session, error) {
	if !validID.MatchString(id) {
		return nil, fmt.Errorf("session id %q: use 1 to 64 letters, digits, '_' or '-'", id)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ses, ok := s.sessions[id]; ok {
		return ses, nil
	}
	if len(s.sessions) >= s.max {
		return nil, ErrTooMany
	}
	ws, err := os.MkdirTemp(s.dir, "session-"+id+"-")
	if err != nil {
		return nil, err
	}
	now := time.Now()
	ses := &Session{ID: id, Workspace: ws, Created: now, lastUsed: now}
	s.sessions[id] = ses
	return ses, nil
}

// Delete ends a session and removes its workspace, once its program (if one
// runs) is done.
func (s *Store) Delete(id string) bool {
	s.mu.Lock()
	ses, ok := s.sessions[id]
	delete(s.sessions, id)
	s.mu.Unlock()
	if ok {
		ses.mu.Lock()
		ses.ended = true
		os.RemoveAll(ses.Workspace)
		ses.mu.Unlock()
	}
	return ok
}

// IDs lists the sessions, sorted.
func (s *Store) IDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.sessions))
	for id := range s.sessions {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Close ends every session and removes their workspaces.
func (s *Store) Close() {
	s.stopOnce.Do(func() { close(s.stop) })
	for _, id := range s.IDs() {
		s.Delete(id)
	}
}

// expire removes sessions idle past the TTL; one whose program runs is not
// idle.
func (s *Store) expire() {
	tick := time.NewTicker(min(s.ttl/4+time.Second, time.Minute))
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
		var idle []*Session
		s.mu.Lock()
		for id, ses := range s.sessions {
			// A session whose program runs is held, and not idle.
			if ses.mu.TryLock() {
				if time.Since(ses.lastUsed) > s.ttl {
					idle = append(idle, ses)
					ses.ended = true
					delete(s.sessions, id)
				}
				ses.mu.Unlock()
			}
		}
		s.mu.Unlock()
		for _, ses := range idle {
			os.RemoveAll(ses.Workspace)
		}
	}
}
