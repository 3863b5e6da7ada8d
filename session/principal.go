package session

import (
	"context"
	"log/slog"

	"github.com/codecell-dev/codecell/internal/isolate"
)

// Principal is who acts on sessions: the holder of one of codecell serve's
// bearer tokens, or the one local user of a codecell that has no token
// (codecell mcp over stdio, codecell serve on loopback without
// authentication). A session belongs to the principal that made it; the
// Store's methods take the caller's principal, so that no caller can forget
// to check.
type Principal struct {
	// Name identifies the principal in sessions' owners, logs and metrics;
	// no two principals of a server share one. It is never the token.
	Name string
	// Admin may list, read and end every principal's sessions. It may not
	// change another's workspace or run programs in it: those stay with the
	// owner, so that what runs in a session is always its owner's doing.
	Admin bool
	// MaxSessions is the most sessions the principal may hold at once, and
	// MaxRunning the most executions it may run at once; zero means no
	// limit of its own (the server's still holds).
	MaxSessions, MaxRunning int
}

// LocalName names the principal of a codecell with no token.
const LocalName = "local"

// Local returns the one principal of a codecell with no token.
func Local() *Principal { return &Principal{Name: LocalName} }

// DefaultShare is a principal's default limit of something the server has
// total of, when principals share it: all of it when there is one, else
// half of it, rounded up, so that no one principal takes all of it while
// the others are left with none (unless the server has only one).
func DefaultShare(total, principals int) int {
	if principals <= 1 || total <= 0 {
		return 0
	}
	return (total + 1) / 2
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p, the principal that acts. The
// parsers that read its programs on the host count against p's share of
// their workers, so that one principal's programs cannot hold them all.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	if p != nil {
		ctx = isolate.WithOwner(ctx, p.Name)
	}
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal ctx carries, or nil.
func PrincipalFrom(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey{}).(*Principal)
	return p
}

// LogHandler adds the name of the principal a record's context carries to
// the record, as "principal": the lines logged with a context (such as the
// engine's one line per execution) say whose they are.
func LogHandler(h slog.Handler) slog.Handler { return &logHandler{h} }

type logHandler struct{ slog.Handler }

func (h *logHandler) Handle(ctx context.Context, r slog.Record) error {
	if p := PrincipalFrom(ctx); p != nil {
		r = r.Clone()
		r.AddAttrs(slog.String("principal", p.Name))
	}
	return h.Handler.Handle(ctx, r)
}

func (h *logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &logHandler{h.Handler.WithAttrs(attrs)}
}

func (h *logHandler) WithGroup(name string) slog.Handler {
	return &logHandler{h.Handler.WithGroup(name)}
}
