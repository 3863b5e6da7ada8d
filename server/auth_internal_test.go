package server

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/codecell-dev/codecell/session"
)

// The token table finds the principal of the right token, and of no other:
// not a prefix, an extension, another case, an empty token (even when a
// configured token is empty), or a token with spaces around it.
func TestTokenTable(t *testing.T) {
	tokens := []Token{
		{Token: "alice-7d2f9c0b", Principal: session.Principal{Name: "alice"}},
		{Token: "bob-51aa0e4c", Principal: session.Principal{Name: "bob", Admin: true}},
		{Token: "", Principal: session.Principal{Name: "empty"}},
		{Token: strings.Repeat("k", 4096), Principal: session.Principal{Name: "long"}},
	}
	table := newTokenTable(tokens)
	for presented, want := range map[string]string{
		"alice-7d2f9c0b":          "alice",
		"bob-51aa0e4c":            "bob",
		strings.Repeat("k", 4096): "long",
	} {
		if p := table.lookup(presented); p == nil || p.Name != want {
			t.Errorf("token of %s: %+v", want, p)
		}
	}
	if p := table.lookup("bob-51aa0e4c"); p == nil || !p.Admin {
		t.Errorf("bob's principal lost its role: %+v", p)
	}
	for _, wrong := range []string{
		"", "alice", "alice-7d2f9c0", "alice-7d2f9c0b0", "ALICE-7D2F9C0B", " alice-7d2f9c0b", "alice-7d2f9c0b ",
		"alice-7d2f9c0bbob-51aa0e4c", "bob-51aa0e4", strings.Repeat("k", 4095), strings.Repeat("k", 4097), "\x00",
	} {
		if p := table.lookup(wrong); p != nil {
			t.Errorf("%q was taken for %s's token", wrong, p.Name)
		}
	}
	// The table holds copies: changing the configuration afterwards
	// changes no principal.
	tokens[0].Principal.Admin = true
	if p := table.lookup("alice-7d2f9c0b"); p.Admin {
		t.Error("the table shares its principals with the configuration")
	}
}

// A server with tokens refuses what the table does not find; one without
// any takes every request as the local principal's.
func TestPrincipalOfRequest(t *testing.T) {
	with := &Server{Tokens: []Token{{Token: "tok-1", Principal: session.Principal{Name: "one"}}}}
	with.Handler()
	without := &Server{}
	without.Handler()
	for _, c := range []struct {
		srv    *Server
		header string
		want   string
	}{
		{with, "Bearer tok-1", "one"},
		{with, "Bearer tok-2", ""},
		{with, "bearer tok-1", ""},
		{with, "Bearer  tok-1", ""},
		{with, "Basic tok-1", ""},
		{with, "Bearer ", ""},
		{with, "", ""},
		{without, "", session.LocalName},
		{without, "Bearer anything", session.LocalName},
	} {
		r := httptest.NewRequest("GET", "/v1/sessions", nil)
		if c.header != "" {
			r.Header.Set("Authorization", c.header)
		}
		got := ""
		if p := c.srv.principal(r); p != nil {
			got = p.Name
		}
		if got != c.want {
			t.Errorf("Authorization %q: principal %q, want %q", c.header, got, c.want)
		}
	}
}
