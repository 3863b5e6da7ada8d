package session

import (
	"context"
	"errors"
	"fmt"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/workspace"
)

// ErrNameTaken is returned by Fork for a name that already names one of the
// principal's sessions, by its name or its ID.
var ErrNameTaken = errors.New("the principal already has a session of that name")

// Fork makes a session of p's that starts where p's session ref (its ID or
// name) stands: the same tier, limits, policy, packages, ttl and idle
// timeout, a copy of its workspace and, for a live session, of its Python
// interpreter's state (see codecell.Live.Fork; the session's memory limit,
// its Limits or else defaults, bounds that copy). The new session is named name ("" for none). The two diverge
// from then on. ref must not be running a program (ErrBusy); reports say
// what was copied of each interpreter.
func (s *Store) Fork(ctx context.Context, p *Principal, ref, name string, defaults codecell.Limits) (*Session, []codecell.ForkReport, error) {
	if p == nil || p.Name == "" {
		return nil, nil, errNoOwner
	}
	if name != "" && !validID().MatchString(name) {
		return nil, nil, fmt.Errorf("session name %q: use 1 to 64 letters, digits, '_' or '-'", name)
	}
	// A name of p's stands for its session's ID. A name taken is refused
	// before the state is copied (and again when the session is made).
	s.mu.Lock()
	if named := s.refLocked(p, ref); named != nil {
		ref = named.ID
	}
	taken := name != "" && s.refLocked(p, name) != nil
	s.mu.Unlock()
	if taken {
		return nil, nil, ErrNameTaken
	}
	src, err := s.TryAcquire(p, ref)
	if err != nil {
		return nil, nil, err
	}
	defer src.Release()
	opts := Options{TTL: src.TTL, Idle: src.Idle, Tier: src.Tier, Limits: src.Limits, Policy: src.Policy, Packages: src.Packages}
	reports := []codecell.ForkReport{}
	if src.Live != nil {
		live, reps, err := src.Live.Fork(ctx, src.Limits.Or(defaults).Memory)
		if err != nil {
			return nil, nil, err
		}
		opts.Live, reports = live, reps
	}
	s.mu.Lock()
	if name != "" && s.refLocked(p, name) != nil {
		s.mu.Unlock()
		if opts.Live != nil {
			opts.Live.Close()
		}
		return nil, nil, ErrNameTaken
	}
	ses, err := s.newLocked(p, name, opts)
	s.mu.Unlock()
	if err != nil {
		if opts.Live != nil {
			opts.Live.Close()
		}
		return nil, nil, err
	}
	// As a user who is not root, files a program left without read
	// permission are opened for the copy, and keep their permissions.
	locked := workspace.Unlock(src.Workspace)
	err = locked.CopyTree(src.Workspace, ses.Workspace, workspace.KeepOwner)
	locked.Restore(src.Workspace)
	if err != nil {
		s.end(ses.ID, "fork failed")
		return nil, nil, fmt.Errorf("copying the workspace: %w", err)
	}
	return ses, reports, nil
}
