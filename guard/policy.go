package guard

import (
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
)

// The categories of operations a policy can block before a program runs.
const (
	// ModuleLoading: loading code by a name computed or chosen at run time,
	// and in JavaScript any import or require (__import__, importlib,
	// runpy; require(), import(), module.constructor; shell source).
	ModuleLoading = "module_loading"
	// Network: talking to other hosts at the protocol level (urllib.request,
	// requests, http.client; fetch, XMLHttpRequest, WebSocket, http, https;
	// curl, wget, ssh).
	Network = "network"
	// LowLevelNetwork: sockets (socket, ssl; net, dgram, tls; nc, socat,
	// /dev/tcp).
	LowLevelNetwork = "low_level_network"
	// Process: starting, replacing or signalling processes (subprocess,
	// os.system, os.fork; child_process, process.kill, worker_threads;
	// kill, nohup, exec).
	Process = "process"
	// Filesystem: reading and writing files (open, os.remove, shutil,
	// pathlib; fs; rm, mv, cp, output redirection).
	Filesystem = "filesystem"
	// DynamicEval: running code built from strings, or reaching builtins by
	// computed names (eval, exec, compile, getattr(builtins, ...); eval,
	// new Function, globalThis['ev'+'al']; eval, sh -c "$x").
	DynamicEval = "dynamic_eval"
)

// Categories lists every category, sorted.
var Categories = []string{DynamicEval, Filesystem, LowLevelNetwork, ModuleLoading, Network, Process}

// Policy is what the checks refuse before a program runs. Its zero value
// refuses nothing.
type Policy struct {
	// Block names the categories refused.
	Block []string `json:"block,omitempty"`
	// AllowedImports, when not nil, are the only Python modules a program
	// may import (a module allows its submodules: "os" allows "os.path").
	// In JSON, null or absent allows any module, and [] none.
	AllowedImports []string `json:"allowed_imports"`
	// BlockedImports are Python modules a program may not import, nor
	// their submodules.
	BlockedImports []string `json:"blocked_imports,omitempty"`
	// AllowedCommands, when not nil, are the only shell commands a program
	// may run. Each pattern is matched against every simple command of the
	// script, its words joined by single spaces; "*" matches any run of
	// characters. A pattern of one word allows the command with any
	// arguments: "ls" is "ls" and "ls *".
	AllowedCommands []string `json:"allowed_commands"`
}

// Finding is one thing a check refuses.
type Finding struct {
	// Rule names what was found, as category.what: "dynamic_eval.eval",
	// "network.fetch", "imports.not_allowed", "commands.not_allowed".
	Rule     string `json:"rule"`
	Category string `json:"category,omitempty"`
	// Line and Column are 1-based, in the program's own source.
	Line    int    `json:"line"`
	Column  int    `json:"column"`
	Message string `json:"message"`
	Hint    string `json:"hint,omitempty"`
}

func (f Finding) String() string {
	return fmt.Sprintf("%d:%d: %s (%s)", f.Line, f.Column, f.Message, f.Rule)
}

// Blocks reports whether the policy refuses the category.
func (p *Policy) Blocks(category string) bool {
	return p != nil && slices.Contains(p.Block, category)
}

// Empty reports whether the policy refuses nothing.
func (p *Policy) Empty() bool {
	return p == nil || len(p.Block) == 0 && p.AllowedImports == nil && len(p.BlockedImports) == 0 && p.AllowedCommands == nil
}

// Check says what is wrong with the policy itself: unknown categories,
// empty names, patterns that cannot match.
func (p *Policy) Check() error {
	if p == nil {
		return nil
	}
	for _, c := range p.Block {
		if !slices.Contains(Categories, c) {
			return fmt.Errorf("unknown guardrail category %q; the categories are %s", c, strings.Join(Categories, ", "))
		}
	}
	for _, list := range [][]string{p.AllowedImports, p.BlockedImports} {
		for _, m := range list {
			if m == "" || strings.HasPrefix(m, ".") || strings.HasSuffix(m, ".") || strings.ContainsAny(m, " /*") {
				return fmt.Errorf("module name %q: write a dotted Python module name, such as \"os.path\"", m)
			}
		}
	}
	for _, c := range p.AllowedCommands {
		if strings.TrimSpace(c) == "" {
			return fmt.Errorf("an allowed command pattern is empty")
		}
		if _, err := path.Match(c, ""); err != nil {
			return fmt.Errorf("allowed command pattern %q: %v", c, err)
		}
	}
	return nil
}

// ImportAllowed reports whether a Python program may import module, and if
// not, the rule that refuses it: "imports.blocked" or "imports.not_allowed".
func (p *Policy) ImportAllowed(module string) (bool, string) {
	if p == nil {
		return true, ""
	}
	if moduleIn(module, p.BlockedImports) {
		return false, "imports.blocked"
	}
	if p.AllowedImports != nil && !moduleIn(module, p.AllowedImports) {
		return false, "imports.not_allowed"
	}
	return true, ""
}

// moduleIn reports whether module is one of list or inside one of them.
func moduleIn(module string, list []string) bool {
	for _, m := range list {
		if module == m || strings.HasPrefix(module, m+".") {
			return true
		}
	}
	return false
}

// CommandAllowed reports whether the shell command, its words joined by
// single spaces, is allowed by AllowedCommands.
func (p *Policy) CommandAllowed(command string) bool {
	if p == nil || p.AllowedCommands == nil {
		return true
	}
	return commandIn(command, p.AllowedCommands)
}

func commandIn(command string, patterns []string) bool {
	name, _, _ := strings.Cut(command, " ")
	for _, pat := range patterns {
		pat = strings.Join(strings.Fields(pat), " ")
		if !strings.Contains(pat, " ") && !strings.ContainsAny(pat, "*?[") {
			if name == pat {
				return true
			}
			continue
		}
		if globMatch(pat, command) {
			return true
		}
	}
	return false
}

// globMatch matches like path.Match, except that "*" also matches "/" and
// spaces: a command's words are not paths.
func globMatch(pattern, s string) bool {
	if pattern == "" {
		return s == ""
	}
	switch pattern[0] {
	case '*':
		for i := 0; i <= len(s); i++ {
			if globMatch(pattern[1:], s[i:]) {
				return true
			}
		}
		return false
	case '?':
		return s != "" && globMatch(pattern[1:], s[1:])
	case '[':
		if s == "" {
			return false
		}
		end := strings.IndexByte(pattern, ']')
		if end < 0 {
			return false
		}
		if ok, _ := path.Match(pattern[:end+1], s[:1]); !ok {
			return false
		}
		return globMatch(pattern[end+1:], s[1:])
	}
	return s != "" && s[0] == pattern[0] && globMatch(pattern[1:], s[1:])
}

// Narrow returns the policy that refuses what either refuses: a layer
// (a session, an Exec) narrows the one above it and never widens it.
// Categories and blocked imports add up; allowed imports keep what both
// allow; a narrower layer's command patterns are kept when the wider
// layer's allow them.
func Narrow(wide, narrow *Policy) *Policy {
	if narrow.Empty() {
		return wide
	}
	if wide.Empty() {
		return narrow
	}
	out := &Policy{
		Block:          union(wide.Block, narrow.Block),
		BlockedImports: union(wide.BlockedImports, narrow.BlockedImports),
	}
	switch {
	case wide.AllowedImports == nil:
		out.AllowedImports = narrow.AllowedImports
	case narrow.AllowedImports == nil:
		out.AllowedImports = wide.AllowedImports
	default:
		out.AllowedImports = []string{}
		for _, m := range wide.AllowedImports {
			if moduleIn(m, narrow.AllowedImports) {
				out.AllowedImports = append(out.AllowedImports, m)
			}
		}
		for _, m := range narrow.AllowedImports {
			if moduleIn(m, wide.AllowedImports) {
				out.AllowedImports = append(out.AllowedImports, m)
			}
		}
		// Nothing both allow is an empty list, which allows nothing: not
		// nil, which would allow anything.
		if out.AllowedImports = union(out.AllowedImports, nil); out.AllowedImports == nil {
			out.AllowedImports = []string{}
		}
	}
	switch {
	case wide.AllowedCommands == nil:
		out.AllowedCommands = narrow.AllowedCommands
	case narrow.AllowedCommands == nil:
		out.AllowedCommands = wide.AllowedCommands
	default:
		out.AllowedCommands = []string{}
		for _, c := range narrow.AllowedCommands {
			if commandIn(strings.Join(strings.Fields(c), " "), wide.AllowedCommands) {
				out.AllowedCommands = append(out.AllowedCommands, c)
			}
		}
	}
	return out
}

func union(a, b []string) []string {
	if len(a) == 0 && len(b) == 0 {
		return nil
	}
	set := map[string]bool{}
	var out []string
	for _, s := range append(append([]string{}, a...), b...) {
		if !set[s] {
			set[s] = true
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

// RunnerFile is the policy as the Python runner reads it: one setting a
// line ("block CATEGORY", "allow_import MODULE", "block_import MODULE",
// and "allow_imports" alone when the allowed list is empty). nil when the
// policy refuses nothing a Python program could do.
func (p *Policy) RunnerFile() []byte {
	if p.Empty() || len(p.Block) == 0 && p.AllowedImports == nil && len(p.BlockedImports) == 0 {
		return nil
	}
	var b strings.Builder
	for _, c := range p.Block {
		fmt.Fprintf(&b, "block %s\n", c)
	}
	if p.AllowedImports != nil {
		b.WriteString("allow_imports\n")
	}
	for _, m := range p.AllowedImports {
		fmt.Fprintf(&b, "allow_import %s\n", m)
	}
	for _, m := range p.BlockedImports {
		fmt.Fprintf(&b, "block_import %s\n", m)
	}
	return []byte(b.String())
}
