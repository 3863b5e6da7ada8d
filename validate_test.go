package codecell

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Requests the Engine refuses before any tier is asked, on any host: each is
// a blocked Result whose envelope says what to change, whoever passed the
// request on (the library, REST or MCP).
func TestValidateRefuses(t *testing.T) {
	e := &Engine{Tier: "no-such-tier-is-reached"}
	for _, tc := range []struct {
		name string
		x    Exec
		kind ErrorKind
		code string
	}{
		{"empty code", Exec{Language: "python", Code: " \n\t"}, KindValidation, CodeEmptyCode},
		{"no language", Exec{Code: "1"}, KindValidation, CodeUnknownLanguage},
		{"unknown language", Exec{Language: "cobol", Code: "1"}, KindValidation, CodeUnknownLanguage},
		{"code too large", Exec{Language: "python", Code: strings.Repeat("x", 13), Limits: Limits{CodeSize: 12}}, KindValidation, CodeCodeTooLarge},
		{"more tool calls written than allowed (Python)", Exec{Language: "python", Code: "await call_tool('a')\nawait tools.b.c()\nawait call_tool('d')\n", Limits: Limits{ToolCalls: 2}}, KindGuardrail, CodeToolCallLimit},
		{"more tool calls written than allowed (JavaScript)", Exec{Language: "js", Code: "await tools.a(); await callTool('b')", Limits: Limits{ToolCalls: 1}}, KindGuardrail, CodeToolCallLimit},
		{"bad environment", Exec{Language: "python", Code: "1", Env: map[string]string{"A=B": "c"}}, KindValidation, CodeInvalidRequest},
		{"negative limit", Exec{Language: "python", Code: "1", Limits: Limits{Memory: -1}}, KindValidation, CodeInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := e.Run(context.Background(), &tc.x)
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != StatusBlocked || res.Error == nil || res.Error.Kind != tc.kind || res.Error.Code != tc.code || len(res.Error.Hints) == 0 {
				t.Fatalf("status %s error %+v", res.Status, res.Error)
			}
			if res.Isolation.Level != "none" || res.ID == "" {
				t.Errorf("a refusal names no isolation and has an id: %+v %q", res.Isolation, res.ID)
			}
		})
	}
	// A network allow-list, in any layer of the policy, is refused before
	// the tier is asked to run anything when the tier cannot confine a
	// program to some hosts; so is an entry no tier can honour, and one
	// that is not an entry at all. A layer that allows nothing narrows the
	// others to nothing.
	ok := &Engine{Tier: "never-runs", Tiers: []Tier{fakeTier{name: "never-runs", t: t}}}
	for _, c := range []struct {
		x    Exec
		code string
	}{
		{Exec{Language: "python", Code: "1", SessionPolicy: &Policy{Network: &NetworkPolicy{Allow: []string{"example.com"}}}}, CodePolicyUnsupported},
		{Exec{Language: "python", Code: "1", Policy: Policy{Network: &NetworkPolicy{Allow: []string{"example.com"}}}}, CodePolicyUnsupported},
		{Exec{Language: "python", Code: "1", Policy: Policy{Network: &NetworkPolicy{Allow: []string{"*.example.com"}}}}, CodePolicyUnsupported},
		{Exec{Language: "python", Code: "1", Policy: Policy{Network: &NetworkPolicy{Allow: []string{"10.0.0.1"}}}}, CodeInvalidRequest},
	} {
		res, err := ok.Run(context.Background(), &c.x)
		if err != nil || res.Status != StatusBlocked || res.Error.Code != c.code {
			t.Errorf("%+v: %v %+v", c.x.Policy.Network, err, res.Error)
		}
	}
	narrowed := &Engine{Policy: Policy{Network: &NetworkPolicy{}}}
	applied, env := narrowed.policy(&Exec{Policy: Policy{Network: &NetworkPolicy{Allow: []string{"example.com"}}}})
	if env != nil || allowsHosts(applied.Network) || len(applied.Network) != 2 {
		t.Errorf("a configuration that allows no host still let an execution ask for one: %+v %+v", applied.Network, env)
	}
	// A misspelt language is named with the one meant.
	if res, _ := e.Run(context.Background(), &Exec{Language: "pyton", Code: "1"}); res.Error == nil || !strings.Contains(res.Error.Message, `did you mean "python"?`) {
		t.Errorf("a misspelt language: %+v", res.Error)
	}
	// A transport's own refusal has the same shape.
	res := e.Refuse(context.Background(), &Exec{Language: "py"}, Errorf(KindValidation, CodeInvalidRequest, "bad arguments"))
	if res.Status != StatusBlocked || res.Language != "python" || res.ID == "" || res.Files == nil || res.Error.Message != "bad arguments" {
		t.Errorf("Refuse: %+v", res)
	}
}

// On a host that cannot isolate, auto refuses, says why, and names doctor
// and the explicit way to run without isolation; it never falls back to
// the local tier by itself.
func TestAutoRefusesWithoutIsolation(t *testing.T) {
	for _, tier := range []string{"", "auto"} {
		e := &Engine{Tier: tier, Tiers: []Tier{fakeTier{name: "native", probe: errors.New("user namespaces are disabled"), t: t}}}
		res, err := e.Run(context.Background(), &Exec{Language: "python", Code: "print(1)"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != StatusBlocked || res.Error == nil || res.Error.Code != CodeNoIsolation || res.Error.Retryable ||
			!strings.Contains(res.Error.Message, "native: user namespaces are disabled") {
			t.Fatalf("tier %q: %+v %+v", tier, res.Status, res.Error)
		}
		hints := strings.Join(res.Error.Hints, "\n")
		if !strings.Contains(hints, "codecell doctor") || !strings.Contains(hints, "--tier local") {
			t.Errorf("hints: %s", hints)
		}
	}
}

// fakeTier is an isolating tier that must never run a program: the tests
// that use it end before the run stage. probe is what its Probe says.
type fakeTier struct {
	name  string
	probe error
	t     *testing.T
}

func (f fakeTier) Name() string              { return f.name }
func (fakeTier) Isolating() bool             { return true }
func (f fakeTier) Probe() error              { return f.probe }
func (fakeTier) View(ws, runner string) View { return View{Workspace: ws, Runner: runner} }
func (f fakeTier) Run(context.Context, *Job) (*Outcome, error) {
	f.t.Error("the tier was asked to run a program that should have been refused")
	return nil, errors.New("refused")
}

// The Exec's files go into the workspace through the one safe root: a
// path out of it, or through a symbolic link the workspace holds, is the
// caller's error, and nothing is written outside.
func TestExecFilesStayInside(t *testing.T) {
	ws := t.TempDir()
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	e := &Engine{Tier: "never-runs", Tiers: []Tier{fakeTier{name: "never-runs", t: t}}}
	for _, p := range []string{"../escape.txt", "/etc/escape.txt", "link/escape.txt", "a/../../escape.txt"} {
		res, err := e.Run(context.Background(), &Exec{Language: "python", Code: "1", Workspace: ws, Files: []File{{Path: p, Data: []byte("x")}}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != StatusBlocked || res.Error.Code != CodeInvalidRequest || res.Error.Retryable {
			t.Errorf("%s: %s %+v", p, res.Status, res.Error)
		}
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("written outside the workspace: %v", entries)
	}
}

// A network policy reads as "none", a list or an object, and nothing else.
func TestNetworkPolicyJSON(t *testing.T) {
	for in, want := range map[string]string{
		`"none"`:        `{}`,
		`["a.example"]`: `{"allow":["a.example"]}`,
		`{"allow":["a.example:8443"],"deny":["*.b.example"]}`: `{"allow":["a.example:8443"],"deny":["*.b.example"]}`,
	} {
		var n NetworkPolicy
		if err := json.Unmarshal([]byte(in), &n); err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		if got, _ := json.Marshal(n); string(got) != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
	for _, in := range []string{`"all"`, `{"allow":["a"],"extra":1}`, `7`} {
		var n NetworkPolicy
		if err := json.Unmarshal([]byte(in), &n); err == nil {
			t.Errorf("%s: accepted", in)
		}
	}
}

// Secrets are the configuration's alone: a session's or an execution's
// policy that declares one is refused before anything runs, and a
// configuration's bad declaration is refused with what to write.
func TestNetworkSecretsConfigOnly(t *testing.T) {
	secret := []Secret{{Name: "gh", File: "/etc/shadow", Hosts: []string{"attacker.example"}, Header: "X-Leak: {value}"}}
	e := &Engine{}
	res, err := e.Run(context.Background(), &Exec{Language: "python", Code: "1",
		Policy: Policy{Network: &NetworkPolicy{Allow: []string{"attacker.example"}, Secrets: secret}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != StatusBlocked || res.Error == nil || !strings.Contains(res.Error.Message, "only codecell's configuration may") {
		t.Fatalf("%s %+v", res.Status, res.Error)
	}
	e = &Engine{Policy: Policy{Network: &NetworkPolicy{Allow: []string{"a.example"}, Secrets: []Secret{{Name: "gh", Hosts: []string{"a.example"}}}}}}
	res, err = e.Run(context.Background(), &Exec{Language: "python", Code: "1"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != StatusBlocked || res.Error == nil || !strings.Contains(res.Error.Message, `"env"`) {
		t.Fatalf("%s %+v", res.Status, res.Error)
	}
}
