package codecell

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestToolRuleDecide(t *testing.T) {
	p := ToolPolicy{Rules: []ToolRule{
		{Tool: "github.create_issue", Args: map[string]string{"repo": "myorg/*"}, Action: "allow"},
		{Tool: "github.*", Args: map[string]string{"owner.login": "bot-*", "draft": "true"}, Action: "deny"},
		{Tool: "db.query", Args: map[string]string{"limit": "1??"}, Action: "deny"},
	}}
	for _, c := range []struct {
		tool, params string
		ok           bool
		rule         string
	}{
		{"github.create_issue", `{"repo": "myorg/api"}`, true, `allow github.create_issue with repo="myorg/*"`},
		{"github.create_issue", `{"repo": "other/api"}`, false, ""},
		{"github.create_issue", `{"repo": "myorg/a/b"}`, false, ""},   // '*' does not cross '/'
		{"github.create_issue", `{"repo": ["myorg/api"]}`, false, ""}, // not a scalar
		{"github.create_issue", `{}`, false, ""},                      // missing
		{"github.create_issue", `not json`, false, ""},                // unreadable: matches nothing
		{"github.merge", `{"owner": {"login": "bot-7"}, "draft": true}`, false, `deny github.* with draft="true", owner.login="bot-*"`},
		{"github.merge", `{"owner": {"login": "bot-7"}, "draft": false}`, true, ""}, // only deny rules name it
		{"db.query", `{"limit": 150}`, false, `deny db.query with limit="1??"`},
		{"db.query", `{"limit": 15}`, true, ""},
		{"db.query", `{"limit": 1.5e2}`, true, ""}, // numbers as JSON wrote them
		{"other", `{"repo": "x"}`, true, ""},
	} {
		r, ok := p.decide(c.tool, json.RawMessage(c.params))
		got := ""
		if r != nil {
			got = r.describe()
		}
		if ok != c.ok || got != c.rule {
			t.Errorf("%s %s: ok %v by %q, want %v by %q", c.tool, c.params, ok, got, c.ok, c.rule)
		}
	}
	// An ask rule allows what it matches, once a person approves: a call it
	// does not match is refused, unless a later rule allows it.
	ask := ToolPolicy{Rules: []ToolRule{{Tool: "deploy.*", Args: map[string]string{"env": "prod*"}, Action: "ask"}}}
	for _, c := range []struct {
		p      ToolPolicy
		params string
		ok     bool
		rule   string
	}{
		{ask, `{"env": "production"}`, true, `ask deploy.* with env="prod*"`},
		{ask, `{"env": "staging"}`, false, ""},
		{ToolPolicy{Rules: append(ask.Rules, ToolRule{Tool: "deploy.*", Action: "allow"})}, `{"env": "staging"}`, true, "allow deploy.*"},
	} {
		r, ok := c.p.decide("deploy.web", json.RawMessage(c.params))
		got := ""
		if r != nil {
			got = r.describe()
		}
		if ok != c.ok || got != c.rule || (r != nil && strings.HasPrefix(c.rule, "ask") && r.Action != "ask") {
			t.Errorf("%d rules, %s: ok %v by %q, want %v by %q", len(c.p.Rules), c.params, ok, got, c.ok, c.rule)
		}
	}
	if !p.Permits("github.create_issue") {
		t.Error("a tool whose rules allow some arguments is not listed")
	}
	if (ToolPolicy{Rules: []ToolRule{{Tool: "rm*", Action: "deny"}}}).Permits("rmdir") {
		t.Error("a tool that a rule denies whatever its arguments is listed")
	}
}

func TestToolPolicyCheck(t *testing.T) {
	for _, c := range []struct {
		p    ToolPolicy
		want string
	}{
		{ToolPolicy{Rules: []ToolRule{{Action: "allow"}}}, "no tool"},
		{ToolPolicy{Rules: []ToolRule{{Tool: "a", Action: "ask-me"}}}, `"deny" or "ask"`},
		{ToolPolicy{Rules: []ToolRule{{Tool: "a[", Action: "deny"}}}, "syntax error"},
		{ToolPolicy{Rules: []ToolRule{{Tool: "a", Action: "deny", Args: map[string]string{"x..y": "1"}}}}, "dotted path"},
		{ToolPolicy{Rules: []ToolRule{{Tool: "a", Action: "deny", Args: map[string]string{"x": "[z"}}}}, "pattern"},
		{ToolPolicy{Rates: []ToolRate{{Tool: "a"}}}, "per_exec or per_session"},
		{ToolPolicy{Rates: []ToolRate{{Tool: "a", PerExec: -1, PerSession: 2}}}, "per_exec or per_session"},
		{ToolPolicy{Deny: []string{"[x"}}, "syntax error"},
	} {
		err := c.p.Check()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error with %q", c.p, err, c.want)
		}
	}
	ok := ToolPolicy{Rules: []ToolRule{{Tool: "a.*", Args: map[string]string{"o.k": "v*"}, Action: "allow"}}, Rates: []ToolRate{{Tool: "a.*", PerSession: 1}}}
	if err := ok.Check(); err != nil {
		t.Error(err)
	}
}

func TestToolRatesCountEachCallOnce(t *testing.T) {
	rates := []ToolRate{{Tool: "a.*", PerExec: 2}, {Tool: "a.*", PerExec: 3, PerSession: 3}, {Tool: "b", PerExec: 1}}
	var sess ToolUsage
	var exec1, exec2 ToolUsage
	for i, want := range []bool{true, true, false} {
		if r, _, _ := takeRate("a.x", rates, &exec1, &sess); (r == nil) != want {
			t.Fatalf("call %d: refused %v", i+1, r)
		}
	}
	// The session's third call, from another execution, is its last.
	if r, _, _ := takeRate("a.y", rates, &exec2, &sess); r != nil {
		t.Fatalf("the session's third call was refused by %+v", r)
	}
	if r, bound, session := takeRate("a.y", rates, &exec2, &sess); r == nil || bound != 3 || !session {
		t.Fatalf("the session's fourth call: %+v %d %v", r, bound, session)
	}
	if r, _, _ := takeRate("c", rates, &exec2, &sess); r != nil {
		t.Fatal("a tool no rate names was refused")
	}
	if sess.Calls("a.*") != 3 {
		t.Fatalf("session counted %d", sess.Calls("a.*"))
	}
}

// FuzzToolRule: any arguments a program sends, with any rule, are decided
// without a panic, the same way each time.
func FuzzToolRule(f *testing.F) {
	f.Add("repo", "myorg/*", `{"repo": "myorg/api"}`)
	f.Add("a.b.c", "*", `{"a": {"b": {"c": 1e400}}}`)
	f.Add("x", "[", `{"x": "["}`)
	f.Add("x", "*", `[1, 2]`)
	f.Add("", "", `null`)
	f.Fuzz(func(t *testing.T, key, pattern, params string) {
		p := ToolPolicy{Rules: []ToolRule{{Tool: "t", Args: map[string]string{key: pattern}, Action: "allow"}}}
		r1, ok1 := p.decide("t", json.RawMessage(params))
		r2, ok2 := p.decide("t", json.RawMessage(params))
		if r1 != r2 || ok1 != ok2 {
			t.Fatal("decided two ways")
		}
		if ok1 && p.Check() != nil {
			t.Fatal("an invalid rule allowed a call")
		}
	})
}
