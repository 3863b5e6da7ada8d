package config

import (
	"strings"
	"testing"
)

func TestSecrets(t *testing.T) {
	c, err := Parse([]byte(`{"network": {"allow": ["api.github.com", "*.example.com"], "secrets": [
		{"name": "github", "env": "GH_TOKEN", "hosts": ["api.github.com"], "header": "Authorization: Bearer {value}", "sandbox_env": "GITHUB_TOKEN"},
		{"name": "ex", "file": "/run/ex-key", "hosts": ["*.example.com", "elsewhere.org"]}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Network.Secrets[0]; s.Env != "GH_TOKEN" || s.SandboxEnv != "GITHUB_TOKEN" || s.Header == "" {
		t.Errorf("%+v", s)
	}
	notes := c.Notes()
	if len(notes) != 1 || !strings.Contains(notes[0], "secret ex goes to elsewhere.org") {
		t.Errorf("notes %q", notes)
	}
	env := func(k string) (string, bool) { return "v", k == "GH_TOKEN" }
	file := func(string) ([]byte, error) { return []byte("k\n"), nil }
	if err := c.CheckSecretValues(env, file); err != nil {
		t.Error(err)
	}
	if err := c.CheckSecretValues(func(string) (string, bool) { return "", false }, file); err == nil || !strings.Contains(err.Error(), "GH_TOKEN is not set") {
		t.Errorf("unset: %v", err)
	}
	for _, c := range []struct{ in, bad string }{
		{`{"network": {"secrets": [{"name": "a", "hosts": ["x.org"]}]}}`, `"env" (a variable`},
		{`{"network": {"secrets": [{"name": "a", "vault": "x", "hosts": ["x.org"]}]}}`, `unknown field "vault"`},
		{`{"network": {"secrets": [{"name": "a", "env": "A"}]}}`, "list the hosts"},
		{`{"network": {"secrets": [{"name": "a", "env": "A", "hosts": ["x.org"], "header": "Authorization: Bearer"}]}}`, "no {value}"},
		{`{"network": {"secrets": [{"name": "a", "env": "A", "hosts": ["10.0.0.0/8"]}]}}`, "names only"},
	} {
		if _, err := Parse([]byte(c.in)); err == nil || !strings.Contains(err.Error(), c.bad) {
			t.Errorf("%s: %v, want an error about %q", c.in, err, c.bad)
		}
	}
}
