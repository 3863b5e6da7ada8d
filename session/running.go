package session

import (
	"sync"

	"github.com/codecell-dev/codecell"
)

// CodeTooManyExecutions is the error code of a program refused because the
// server, or its principal, already runs as many programs as it may.
const CodeTooManyExecutions = "TOO_MANY_EXECUTIONS"

// Running bounds the programs that run at once: all of them (Max) and each
// principal's (Principal.MaxRunning). The REST API and the MCP server take
// their slots from one Running, so that a client cannot get around a limit
// by changing protocols. It is safe for concurrent use.
type Running struct {
	max int

	// OnStart and OnEnd, when set, are called as a principal's program
	// takes and gives back a slot; OnRefused as one is refused, with the
	// limit that refused it ("" for the server's). Set them before the
	// first Acquire.
	OnStart, OnEnd func(principal string)
	OnRefused      func(principal string, ofPrincipal bool)

	mu    sync.Mutex
	total int
	by    map[string]int
}

// NewRunning returns a Running of at most max programs at once; max must be
// at least 1.
func NewRunning(max int) *Running {
	if max < 1 {
		max = 1
	}
	return &Running{max: max, by: map[string]int{}}
}

// Max is the most programs that run at once.
func (r *Running) Max() int { return r.max }

// Len is how many programs run now.
func (r *Running) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.total
}

// Acquire takes a slot for a program of p's (nil: no principal's limit
// applies). It returns what to call when the program is done, which may be
// called more than once, or the refusal to answer with: a retryable limit
// error, CodeTooManyExecutions.
func (r *Running) Acquire(p *Principal) (release func(), refusal *codecell.Envelope) {
	name := ""
	if p != nil {
		name = p.Name
	}
	r.mu.Lock()
	if p != nil && p.MaxRunning > 0 && r.by[name] >= p.MaxRunning {
		r.mu.Unlock()
		if r.OnRefused != nil {
			r.OnRefused(name, true)
		}
		return nil, tooManyExecutions("your token already runs as many executions at once as it may (%d)", p.MaxRunning)
	}
	if r.total >= r.max {
		r.mu.Unlock()
		if r.OnRefused != nil {
			r.OnRefused(name, false)
		}
		return nil, tooManyExecutions("%d executions are running, the most this server runs at once", r.max)
	}
	r.total++
	r.by[name]++
	r.mu.Unlock()
	if r.OnStart != nil {
		r.OnStart(name)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			if r.OnEnd != nil {
				r.OnEnd(name)
			}
			r.mu.Lock()
			r.total--
			if r.by[name]--; r.by[name] <= 0 {
				delete(r.by, name)
			}
			r.mu.Unlock()
		})
	}, nil
}

func tooManyExecutions(format string, max int) *codecell.Envelope {
	env := codecell.Errorf(codecell.KindLimit, CodeTooManyExecutions, format, max).WithHints(
		"retry once an execution has ended: over HTTP, the Retry-After header says when")
	env.Retryable = true
	return env
}
