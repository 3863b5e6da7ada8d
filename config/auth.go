package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/codecell-dev/codecell/internal/lazyre"
)

// Token is a bearer token of codecell serve's, and the principal that holds
// it: the sessions it makes are its own, and its name stands for it in
// logs and metrics (never the token). In the file a token is an object:
//
//	{"name": "alice", "token": "…", "role": "admin", "max_sessions": 10, "max_running": 2}
//
// or a plain string, the token of a principal named token-N, N being its
// position in the list (from 1).
type Token struct {
	// Name is 1 to 64 letters, digits, '_', '-' or '.', unique.
	Name string `json:"name"`
	// Token is printable ASCII without spaces, unique.
	Token string `json:"token"`
	// Role is "user" (the default) or "admin": an admin may also list,
	// read and end every principal's sessions, and list and download their
	// files.
	Role string `json:"role,omitempty"`
	// MaxSessions the principal holds at once, and MaxRunning executions
	// it runs at once (REST and MCP together). Zero means half of the
	// server's (server.max_sessions, server.max_running), rounded up, when
	// there are two tokens or more, and all of it when there is one.
	MaxSessions int `json:"max_sessions,omitempty"`
	MaxRunning  int `json:"max_running,omitempty"`
}

// Admin says whether the token's principal has the admin role.
func (t Token) Admin() bool { return t.Role == "admin" }

// UnmarshalJSON takes the object form, or the plain string of a token.
func (a *Auth) UnmarshalJSON(data []byte) error {
	var raw struct {
		Tokens []json.RawMessage `json:"tokens"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	a.Tokens = nil
	for i, r := range raw.Tokens {
		var flat string
		if json.Unmarshal(r, &flat) == nil {
			a.Tokens = append(a.Tokens, Token{Name: fmt.Sprintf("token-%d", i+1), Token: flat})
			continue
		}
		var t Token
		dec := json.NewDecoder(bytes.NewReader(r))
		dec.DisallowUnknownFields()
		// The decoder's errors name fields and types, never the values.
		if err := dec.Decode(&t); err != nil {
			return fmt.Errorf(`auth.tokens: token %d is not a string or {"name": "...", "token": "..."}: %w`, i+1, err)
		}
		a.Tokens = append(a.Tokens, t)
	}
	return nil
}

// EnvTokens are the tokens of CODECELL_TOKENS's value: a comma-separated
// list, each token of its own principal named env-N, N being its position
// among the list's tokens (from 1). The list has no room for names: a
// token may hold any character but a comma.
func EnvTokens(value string) []Token {
	var out []Token
	for _, t := range strings.Split(value, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, Token{Name: fmt.Sprintf("env-%d", len(out)+1), Token: t})
		}
	}
	return out
}

var tokenName = lazyre.New(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$`)

// CheckTokens checks tokens that are to be accepted together: names valid
// and unique, tokens valid and unique, roles and limits that exist. Its
// errors never hold a token.
func CheckTokens(tokens []Token) error {
	names := map[string]bool{}
	seen := map[string]string{} // token → its name
	for i, t := range tokens {
		if !tokenName().MatchString(t.Name) {
			// The name is not shown: it may be a token put in the wrong field.
			return fmt.Errorf("token %d has no valid name: a name is 1 to 64 letters, digits, '_', '-' or '.', and says who holds the token in logs and metrics", i+1)
		}
		if names[t.Name] {
			return fmt.Errorf("two tokens are named %q: give each its own name (a plain string in the list is named token-N, a token of CODECELL_TOKENS env-N)", t.Name)
		}
		names[t.Name] = true
		if t.Token == "" {
			return fmt.Errorf("%s's token is empty: give it one, such as the output of `openssl rand -hex 32`", t.Name)
		}
		for _, c := range []byte(t.Token) {
			if c <= ' ' || c > '~' {
				return fmt.Errorf("%s's token holds a space or a character that is not printable ASCII: use letters, digits and punctuation, such as the output of `openssl rand -hex 32`", t.Name)
			}
		}
		if other, dup := seen[t.Token]; dup {
			return fmt.Errorf("%s and %s have the same token: a token says who the client is, so give each its own", other, t.Name)
		}
		seen[t.Token] = t.Name
		if t.Role != "" && t.Role != "user" && t.Role != "admin" {
			return fmt.Errorf("%s's role %q is not one: use \"user\" (the default) or \"admin\"", t.Name, t.Role)
		}
		if t.MaxSessions < 0 || t.MaxRunning < 0 {
			return fmt.Errorf("%s: max_sessions and max_running must not be negative (zero means the default share)", t.Name)
		}
	}
	return nil
}
