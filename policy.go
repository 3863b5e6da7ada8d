package codecell

import (
	"fmt"
	"strings"

	"github.com/codecell-dev/codecell/guard"
)

// Error codes of the guardrails.
const (
	// CodeGuardrailBlocked: the guardrails refused the program before it
	// ran.
	CodeGuardrailBlocked = "GUARDRAIL_BLOCKED"
	// CodeModuleBlocked: a Python program imported, at run time, a module
	// the policy refuses, and did not catch the ImportError.
	CodeModuleBlocked = "SANDBOX_MODULE_BLOCKED"
	// CodePolicyBlocked: a Python program did, at run time, what the
	// policy refuses (started a process, opened a socket, ran code built
	// from a string, wrote a file), by whatever way, and did not catch the
	// PolicyBlockedError.
	CodePolicyBlocked = "SANDBOX_POLICY_BLOCKED"
)

// StaticTier is the tier name under which nothing runs: the program is
// parsed and checked against the guardrails only (codecell check). Python
// is parsed by the interpreter's own ast, in the sandbox; the program itself
// never runs.
const StaticTier = "static"

// namedPolicy is one layer of an Exec's policy: "config", "session" or
// "exec"; p is nil where the layer sets nothing.
type namedPolicy struct {
	name string
	p    *Policy
}

// policyLayers are the layers of x's policy below the built-in defaults,
// widest first: the Engine's, the session's, the Exec's own.
func (e *Engine) policyLayers(x *Exec) []namedPolicy {
	return []namedPolicy{{"config", &e.Policy}, {"session", x.SessionPolicy}, {"exec", &x.Policy}}
}

// policy works out the policy an Exec runs under, layer by layer, the one
// path for the guardrails, the tools and the network: the built-in
// defaults, replaced by the Engine's (the configuration file) when it sets
// a Guard, narrowed by the session's and then the Exec's. The network's
// layers are kept apart, for the tier's proxy to apply in turn.
func (e *Engine) policy(x *Exec) (*AppliedPolicy, *Envelope) {
	def := DefaultGuard
	applied := &AppliedPolicy{Layers: []PolicyLayer{{Name: "defaults", Guard: &def}}}
	g := &def
	layers := e.policyLayers(x)
	for _, l := range layers {
		if l.p == nil {
			continue
		}
		layer := PolicyLayer{Name: l.name}
		if l.p.Guard != nil {
			if err := l.p.Guard.Check(); err != nil {
				return applied, Errorf(KindValidation, CodeInvalidRequest, "the %s policy: %v", l.name, err).WithHints(
					"categories: " + strings.Join(guard.Categories, ", "))
			}
			layer.Guard = l.p.Guard
			if l.name == "config" {
				g = l.p.Guard
			} else {
				g = guard.Narrow(g, l.p.Guard)
			}
		}
		layer.Network = l.p.Network
		if err := l.p.Tools.Check(); err != nil {
			return applied, Errorf(KindValidation, CodeInvalidRequest, "the %s policy's tools: %v", l.name, err).WithHints(
				`a rule is {"tool": "github.create_issue", "args": {"repo": "myorg/*"}, "action": "allow"}; a rate is {"tool": "github.*", "per_exec": 10, "per_session": 100}`)
		}
		if !l.p.Tools.IsZero() {
			tools := l.p.Tools
			layer.Tools = &tools
		}
		if layer.Guard != nil || layer.Tools != nil || layer.Network != nil {
			applied.Layers = append(applied.Layers, layer)
		}
	}
	applied.Guard = *g
	var env *Envelope
	if applied.Network, env = networkLayers(layers); env != nil {
		return applied, env
	}
	return applied, nil
}

// blockFindings fills res as refused by the guardrails.
func blockFindings(res *Result, findings []GuardFinding) {
	for i := range findings {
		findings[i].Hint = hintStyle(findings[i].Hint)
	}
	f := findings[0]
	msg := fmt.Sprintf("line %d, column %d: %s (rule %s)", f.Line, f.Column, f.Message, f.Rule)
	if len(findings) > 1 {
		msg += fmt.Sprintf("; and %d more findings", len(findings)-1)
	}
	hints := []string{}
	seen := map[string]bool{}
	for _, f := range findings {
		if f.Hint != "" && !seen[f.Hint] {
			seen[f.Hint] = true
			hints = append(hints, f.Hint)
		}
	}
	if len(hints) == 0 {
		hints = append(hints, "rewrite the program without what the policy refuses")
	}
	env := Errorf(KindGuardrail, CodeGuardrailBlocked, "%s", msg).WithHints(hints...)
	env.Meta = map[string]any{"rule": f.Rule, "line": f.Line, "column": f.Column}
	block(res, env)
	res.Findings = findings
}

// hintStyle writes a hint as the envelope's other hints are written: a
// lower-case start, no final period.
func hintStyle(h string) string {
	h = strings.TrimSuffix(strings.TrimSpace(h), ".")
	if len(h) > 1 && h[0] >= 'A' && h[0] <= 'Z' && h[1] >= 'a' && h[1] <= 'z' {
		h = string(h[0]+'a'-'A') + h[1:]
	}
	return h
}
