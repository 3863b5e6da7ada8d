package config

import (
	"strings"
	"testing"
)

func TestAuthTokens(t *testing.T) {
	c, err := Parse([]byte(`{"auth": {"tokens": [
		"flat-secret-1",
		{"name": "alice", "token": "alice-secret", "max_sessions": 5, "max_running": 2},
		{"name": "ops.team_1", "token": "ops-secret", "role": "admin"},
		"flat-secret-4"
	]}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []Token{
		{Name: "token-1", Token: "flat-secret-1"},
		{Name: "alice", Token: "alice-secret", MaxSessions: 5, MaxRunning: 2},
		{Name: "ops.team_1", Token: "ops-secret", Role: "admin"},
		{Name: "token-4", Token: "flat-secret-4"},
	}
	if len(c.Auth.Tokens) != len(want) {
		t.Fatalf("tokens %+v", c.Auth.Tokens)
	}
	for i := range want {
		if c.Auth.Tokens[i] != want[i] {
			t.Errorf("token %d: %+v, want %+v", i, c.Auth.Tokens[i], want[i])
		}
	}
	if !c.Auth.Tokens[2].Admin() || c.Auth.Tokens[1].Admin() {
		t.Error("roles")
	}
	env := EnvTokens(" env-a , ,env-b,")
	if len(env) != 2 || env[0] != (Token{Name: "env-1", Token: "env-a"}) || env[1] != (Token{Name: "env-2", Token: "env-b"}) {
		t.Errorf("EnvTokens: %+v", env)
	}
	if err := CheckTokens(append(c.Auth.Tokens, env...)); err != nil {
		t.Errorf("the file's and the environment's tokens together: %v", err)
	}
	if err := CheckTokens(append(c.Auth.Tokens, EnvTokens("alice-secret")...)); err == nil ||
		!strings.Contains(err.Error(), "alice and env-1 have the same token") {
		t.Errorf("a token of the environment that is one of the file's: %v", err)
	}
}

// Bad tokens are refused with a message that says what to do, and never
// holds the token.
func TestAuthRefuses(t *testing.T) {
	const secret = "s3cr3t-value"
	for _, tc := range []struct{ json, want string }{
		{`{"auth": {"tokens": [{"name": "a", "token": "` + secret + `"}, {"name": "a", "token": "other"}]}}`, `two tokens are named "a"`},
		{`{"auth": {"tokens": ["` + secret + `", {"name": "token-1", "token": "other"}]}}`, `two tokens are named "token-1"`},
		{`{"auth": {"tokens": [{"name": "a", "token": "` + secret + `"}, {"name": "b", "token": "` + secret + `"}]}}`, "a and b have the same token"},
		{`{"auth": {"tokens": ["` + secret + `", "` + secret + `"]}}`, "token-1 and token-2 have the same token"},
		{`{"auth": {"tokens": [{"name": "a", "token": ""}]}}`, "a's token is empty"},
		{`{"auth": {"tokens": [""]}}`, "token-1's token is empty"},
		{`{"auth": {"tokens": [{"name": "a", "token": "has space` + secret + `"}]}}`, "a's token holds a space"},
		{`{"auth": {"tokens": [{"name": "a", "token": "caf\u00e9` + secret + `"}]}}`, "not printable ASCII"},
		{`{"auth": {"tokens": [{"token": "` + secret + `"}]}}`, "token 1 has no valid name"},
		{`{"auth": {"tokens": [{"name": "` + secret + ` x", "token": "t"}]}}`, "token 1 has no valid name"},
		{`{"auth": {"tokens": [{"name": "a\"b", "token": "t"}]}}`, "token 1 has no valid name"},
		{`{"auth": {"tokens": [{"name": "` + strings.Repeat("n", 65) + `", "token": "t"}]}}`, "no valid name"},
		{`{"auth": {"tokens": [{"name": "a", "token": "t", "role": "root"}]}}`, `role "root" is not one`},
		{`{"auth": {"tokens": [{"name": "a", "token": "t", "max_running": -1}]}}`, "must not be negative"},
		{`{"auth": {"tokens": [{"name": "a", "tokn": "` + secret + `"}]}}`, "unknown field"},
		{`{"auth": {"tokens": [42]}}`, "is not a string or"},
		{`{"auth": {"token": ["` + secret + `"]}}`, "unknown field"},
	} {
		_, err := Parse([]byte(tc.json))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.json, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("%s: the error holds the token: %v", tc.json, err)
		}
	}
}
