package codecell

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"
	"sync"
)

// Error codes of the per-call tool policy.
const (
	// CodeToolDenied: a rule on the call's arguments refused it.
	CodeToolDenied = "TOOL_DENIED"
	// CodeToolRateLimited: the tool was called as many times as a rate
	// limit lets it, in this execution or this session.
	CodeToolRateLimited = "TOOL_RATE_LIMITED"
)

// ToolRule decides the calls to the tools it names by their arguments.
// Among the rules of one policy that name a tool, the first whose Args all
// match a call decides it. A call that matches none of them is refused when
// one of them allows: {"tool": "github.create_issue", "args": {"repo":
// "myorg/*"}, "action": "allow"} lets that tool open issues in myorg's
// repositories only; when they all deny, it goes on. A tool no rule names
// is decided by Allow and Deny alone.
type ToolRule struct {
	// Tool is a name or a glob ("github.*").
	Tool string `json:"tool"`
	// Args maps an argument, by its name or a dotted path into objects
	// ("owner.login"), to a glob its value must match: a string as it is,
	// a number or a boolean as JSON writes it. An argument that is
	// missing, null, an object or an array matches nothing. No Args
	// matches every call.
	Args map[string]string `json:"args,omitempty"`
	// Action is "allow", "deny" or "ask": a person approves each call
	// (see Approver), and one not approved fails with TOOL_DENIED.
	Action string `json:"action"`
}

// ToolRate bounds how many times the tools it names may be called: calls
// to all of them count together.
type ToolRate struct {
	// Tool is a name or a glob.
	Tool string `json:"tool"`
	// PerExec is the most calls one execution may make; 0 means no bound.
	PerExec int `json:"per_exec,omitempty"`
	// PerSession is the most calls all the executions of one session may
	// make together; 0 means no bound. An execution outside a session is a
	// session of its own.
	PerSession int `json:"per_session,omitempty"`
}

// Check reports what is wrong with the policy's rules and rates.
func (p ToolPolicy) Check() error {
	for _, pat := range append(append([]string{}, p.Allow...), p.Deny...) {
		if _, err := path.Match(pat, ""); err != nil {
			return fmt.Errorf("tool pattern %q: %v", pat, err)
		}
	}
	for i, r := range p.Rules {
		if r.Tool == "" {
			return fmt.Errorf("rules[%d]: no tool: give a name or a glob such as \"github.*\"", i)
		}
		if _, err := path.Match(r.Tool, ""); err != nil {
			return fmt.Errorf("rules[%d]: tool %q: %v", i, r.Tool, err)
		}
		if r.Action != "allow" && r.Action != "deny" && r.Action != "ask" {
			return fmt.Errorf("rules[%d]: action %q: it is \"allow\", \"deny\" or \"ask\"", i, r.Action)
		}
		for k, v := range r.Args {
			if k == "" || strings.HasPrefix(k, ".") || strings.HasSuffix(k, ".") || strings.Contains(k, "..") {
				return fmt.Errorf("rules[%d]: argument %q: name an argument, or a dotted path such as \"owner.login\"", i, k)
			}
			if _, err := path.Match(v, ""); err != nil {
				return fmt.Errorf("rules[%d]: argument %s: pattern %q: %v", i, k, v, err)
			}
		}
	}
	for i, r := range p.Rates {
		if r.Tool == "" {
			return fmt.Errorf("rates[%d]: no tool: give a name or a glob such as \"github.*\"", i)
		}
		if _, err := path.Match(r.Tool, ""); err != nil {
			return fmt.Errorf("rates[%d]: tool %q: %v", i, r.Tool, err)
		}
		if r.PerExec < 0 || r.PerSession < 0 || r.PerExec == 0 && r.PerSession == 0 {
			return fmt.Errorf("rates[%d]: give per_exec or per_session, a number of calls above 0", i)
		}
	}
	return nil
}

// IsZero reports whether the policy says nothing.
func (p ToolPolicy) IsZero() bool {
	return len(p.Allow) == 0 && len(p.Deny) == 0 && len(p.Rules) == 0 && len(p.Rates) == 0
}

// decide applies the rules to a call: the rule that decided it (nil when no
// rule names the tool) and whether it may go on.
func (p ToolPolicy) decide(name string, params json.RawMessage) (*ToolRule, bool) {
	allowList := false
	var args map[string]any
	decoded := false
	for i := range p.Rules {
		r := &p.Rules[i]
		if !globMatch(r.Tool, name) {
			continue
		}
		allowList = allowList || r.Action == "allow" || r.Action == "ask"
		if len(r.Args) > 0 && !decoded {
			decoded = true
			d := json.NewDecoder(bytes.NewReader(params))
			d.UseNumber()
			_ = d.Decode(&args)
		}
		if argsMatch(r.Args, args) {
			return r, r.Action != "deny"
		}
	}
	return nil, !allowList
}

func argsMatch(want map[string]string, args map[string]any) bool {
	for k, pat := range want {
		s, ok := scalar(lookup(args, k))
		if !ok || !globMatch(pat, s) {
			return false
		}
	}
	return true
}

// lookup finds a dotted path in decoded JSON.
func lookup(args map[string]any, key string) any {
	var v any = args
	for _, part := range strings.Split(key, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		if v, ok = m[part]; !ok {
			return nil
		}
	}
	return v
}

func scalar(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case json.Number:
		return v.String(), true
	case bool:
		if v {
			return "true", true
		}
		return "false", true
	}
	return "", false
}

// describe writes a rule as a person reads it in an error.
func (r *ToolRule) describe() string {
	if len(r.Args) == 0 {
		return fmt.Sprintf("%s %s", r.Action, r.Tool)
	}
	keys := make([]string, 0, len(r.Args))
	for k := range r.Args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s=%q", k, r.Args[k])
	}
	return fmt.Sprintf("%s %s with %s", r.Action, r.Tool, b.String())
}

// ToolUsage counts the tool calls a session's executions made, for the
// policy's per-session rates. A session holds one and gives it to each of
// its Execs (Exec.ToolUsage); it is safe for concurrent use.
type ToolUsage struct {
	mu     sync.Mutex
	counts map[string]int // by rate pattern
}

// takeRate counts one call to name against the rates that name it, in the
// execution's usage and the session's (nil outside a session), or, when one
// of them is used up, counts nothing and returns that rate, its bound and
// whether it is the session's. A pattern that several rates share counts
// the call once.
func takeRate(name string, rates []ToolRate, exec, sess *ToolUsage) (*ToolRate, int, bool) {
	exec.mu.Lock()
	defer exec.mu.Unlock()
	if sess != nil {
		sess.mu.Lock()
		defer sess.mu.Unlock()
	} else {
		// Outside a session, the execution is its session.
		sess = exec
	}
	for _, u := range []*ToolUsage{exec, sess} {
		if u.counts == nil {
			u.counts = map[string]int{}
		}
	}
	for i := range rates {
		r := &rates[i]
		if !globMatch(r.Tool, name) {
			continue
		}
		if r.PerExec > 0 && exec.counts[r.Tool] >= r.PerExec {
			return r, r.PerExec, false
		}
		if r.PerSession > 0 && sess.counts["session:"+r.Tool] >= r.PerSession {
			return r, r.PerSession, true
		}
	}
	seen := map[string]bool{}
	for _, r := range rates {
		if seen[r.Tool] || !globMatch(r.Tool, name) {
			continue
		}
		seen[r.Tool] = true
		exec.counts[r.Tool]++
		sess.counts["session:"+r.Tool]++
	}
	return nil, 0, false
}

// Calls is how many calls to the tools a rate's pattern names the
// session's executions made.
func (u *ToolUsage) Calls(pattern string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.counts["session:"+pattern]
}

// allowed describes the arguments the rules allow name to be called with.
func (p ToolPolicy) allowed(name string) string {
	var out []string
	for i := range p.Rules {
		r := &p.Rules[i]
		if r.Action != "deny" && globMatch(r.Tool, name) {
			out = append(out, r.describe())
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, "; ")
}
