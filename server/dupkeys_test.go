package server_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/api"
)

// A body that gives a key twice is refused, at any depth: the server would
// keep the last, and a proxy in front of it may have read the first.
func TestDuplicateKeysRefused(t *testing.T) {
	f := newRefusingFixture(t, nil)
	ses := f.session(t, api.SessionSpec{})
	for _, c := range []struct {
		name, method, path, body string
		key, at                  string
	}{
		{"two tiers", "POST", "/v1/executions", `{"tier":"refusing","language":"python","code":"1","tier":"local"}`, "tier", ""},
		{"two programs", "POST", "/v1/executions", `{"language":"python","code":"print(1)","code":"import os"}`, "code", ""},
		{"in a session", "POST", "/v1/sessions/" + ses.ID + "/executions", `{"language":"python","code":"1","limits":{"timeout":"1s","timeout":"1h"}}`, "timeout", "limits"},
		{"in a file", "POST", "/v1/executions", `{"language":"python","code":"1","files":[{"path":"a"},{"path":"b","text":"x","path":"../c"}]}`, "path", "files[1]"},
		{"escaped", "POST", "/v1/executions", `{"language":"python","code":"1","\u0063ode":"2"}`, "code", ""},
		{"a session's spec", "POST", "/v1/sessions", `{"policy":{"network":"none","network":["example.com"]}}`, "network", "policy"},
		{"an approval", "POST", "/v1/executions/exec_x/approvals/1", `{"approve":false,"approve":true}`, "approve", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, _, body := f.raw(t, c.method, c.path, strings.NewReader(c.body), "Content-Type", "application/json")
			env := envelopeOf(t, body)
			if status != 400 || env.Kind != codecell.KindValidation || env.Code != codecell.CodeInvalidRequest {
				t.Fatalf("%d %s, want 400 validation %s", status, body, codecell.CodeInvalidRequest)
			}
			if !strings.Contains(env.Message, `"`+c.key+`" twice`) || !strings.Contains(env.Message, c.at) ||
				!strings.Contains(strings.Join(env.Hints, " "), "give each key once") || env.Meta["key"] != c.key || env.Meta["path"] != c.at {
				t.Fatalf("the envelope does not name the key %q at %q and what to do: %s", c.key, c.at, body)
			}
		})
	}
	// Equal keys in different objects are no duplicate; these bodies are
	// decoded and reach what comes after.
	status, _, body := f.raw(t, "POST", "/v1/executions", strings.NewReader(
		`{"language":"python","code":"  ","env":{"code":"x"},"files":[{"path":"a","text":"1"},{"path":"b","text":"2"}],"limits":{"timeout":"1s"},"policy":{"network":"none"}}`),
		"Content-Type", "application/json")
	var res codecell.Result
	if err := json.Unmarshal(body, &res); status != 200 || err != nil || res.Error == nil || res.Error.Code != codecell.CodeEmptyCode {
		t.Fatalf("a valid body: %d %s", status, body)
	}
	status, _, body = f.raw(t, "POST", "/v1/sessions", strings.NewReader(`{"limits":{"timeout":"1s"},"policy":{"network":"none"}}`), "Content-Type", "application/json")
	if status != 201 {
		t.Fatalf("a valid session: %d %s", status, body)
	}
}
