package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/codecell-dev/codecell/session"
)

// Token is a bearer token the service accepts, and the principal that
// presents it: the owner of the sessions it makes.
type Token struct {
	Token     string
	Principal session.Principal
}

// tokenTable finds the principal of a bearer token. It keeps the tokens'
// SHA-256 digests, and compares a presented token's digest with every one
// of them, in constant time and without stopping at a match: how long it
// takes says neither how much of a token was right (the digests have one
// size whatever the tokens' lengths) nor which token matched.
type tokenTable struct {
	digests    [][sha256.Size]byte
	principals []*session.Principal
}

// newTokenTable builds the table. An empty token is left out: it would let
// in a request whose header says "Bearer " and nothing more.
func newTokenTable(tokens []Token) *tokenTable {
	t := &tokenTable{}
	for _, tok := range tokens {
		if tok.Token == "" {
			continue
		}
		p := tok.Principal
		t.digests = append(t.digests, sha256.Sum256([]byte(tok.Token)))
		t.principals = append(t.principals, &p)
	}
	return t
}

// principalCount is how many principals hold the table's tokens: tokens
// of one name are one principal.
func (t *tokenTable) principalCount() int {
	if t == nil {
		return 0
	}
	names := map[string]bool{}
	for _, p := range t.principals {
		names[p.Name] = true
	}
	return len(names)
}

// lookup returns the principal whose token this is, or nil.
func (t *tokenTable) lookup(presented string) *session.Principal {
	d := sha256.Sum256([]byte(presented))
	match := -1
	for i := range t.digests {
		eq := subtle.ConstantTimeCompare(d[:], t.digests[i][:])
		match = subtle.ConstantTimeSelect(eq, i, match)
	}
	if match < 0 {
		return nil
	}
	return t.principals[match]
}

// principal returns the principal of a request: the holder of the bearer
// token it presents, or session.Local's when the server has no token (and
// the request comes from this user: peer.go). nil means the request is
// refused.
func (s *Server) principal(r *http.Request) *session.Principal {
	if len(s.Tokens) == 0 {
		if peerIsOwner(r) != nil {
			return nil
		}
		return s.local
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return nil
	}
	return s.tokens.lookup(got)
}

// caller is the principal authorize found for the request.
func caller(r *http.Request) *session.Principal { return session.PrincipalFrom(r.Context()) }

// requestInfo is what the handlers learn of a request that the line logged
// for it says: the handler that logs it wraps authorize, which finds the
// principal.
type requestInfo struct{ principal string }

type requestInfoKey struct{}

func withRequestInfo(ctx context.Context) (context.Context, *requestInfo) {
	info := &requestInfo{}
	return context.WithValue(ctx, requestInfoKey{}, info), info
}

func requestInfoFrom(ctx context.Context) *requestInfo {
	info, _ := ctx.Value(requestInfoKey{}).(*requestInfo)
	return info
}
