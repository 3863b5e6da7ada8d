// Package codecell runs code that an AI model wrote — Python, JavaScript,
// TypeScript, shell — in a sandbox, and returns an honest Result.
//
// The root package holds the domain (Exec, Result, Limits, Policy, Envelope)
// and the Engine that runs the pipeline. Tiers, which decide where code runs,
// live in subpackages and register themselves by name; a program picks its
// tiers with imports:
//
//	import _ "github.com/codecell-dev/codecell/tier/local"
//
// Tiers that re-execute the running binary (as runc does) need Init to be the
// first call in main.
package codecell

import (
	"io"

	"github.com/codecell-dev/codecell/guard"
)

// Exec is one program to run. Its zero value is not runnable (it has no
// code); every other field has a useful zero value.
type Exec struct {
	// Language is "python", "javascript", "typescript", "bash" or "sh", or an
	// alias such as "py", "js", "ts", "node".
	Language string
	// Code is the program's source.
	Code string
	// Filename is the name tracebacks show for the program, such as
	// "hello.py". Empty means main.<ext>.
	Filename string
	// Args are the program's arguments (sys.argv[1:], process.argv.slice(2),
	// $1…).
	Args []string
	// Files are written into the workspace before the program starts; they
	// are not reported as created.
	Files []File
	// Stdin is the program's standard input. Nil means empty.
	Stdin io.Reader
	// Stdout and Stderr, when set, receive the program's output as it comes,
	// up to the output limits. The Result holds it either way.
	Stdout, Stderr io.Writer
	// Env is added to the program's minimal environment (PATH, HOME, LANG).
	// The host's environment is never passed on.
	Env map[string]string
	// Tier names where to run: "auto", "local", "native", …; empty means the
	// Engine's default.
	Tier string
	// Workspace is a host directory to run in. Empty means a fresh temporary
	// directory, removed afterwards.
	Workspace string
	// Limits override the Engine's limits; zero fields keep them.
	Limits Limits
	// Policy says what the program may do beyond computing.
	Policy Policy
	// SessionPolicy is the policy of the session the Exec runs in, set by
	// whoever opened the session: it narrows the Engine's, and Policy
	// narrows it. nil when the Exec runs outside a session.
	SessionPolicy *Policy
	// ToolUsage counts the tool calls of the session the Exec runs in,
	// for the policy's per-session rates (ToolRate.PerSession); nil means
	// the Exec is a session of its own.
	ToolUsage *ToolUsage
	// Approver asks a person about the calls that a tool rule says to ask
	// about ("action": "ask"); nil refuses them (TOOL_DENIED).
	Approver Approver
	// Tools, when set, are tools for this Exec only, on top of the Engine's.
	Tools []Tool
	// Packages are third-party packages the program imports, by
	// language: {"python": ["humanize==4.9.0"], "javascript":
	// ["lodash@4.17.21"]}. The list for the Exec's language (JavaScript's
	// for TypeScript too) is installed once, in a sandbox that reaches
	// only the package source, into a cache the program then sees
	// read-only (Engine.Packages); the others are ignored.
	Packages Packages
	// mounts are host directories the program sees read-only: the
	// package installer's own runs only.
	mounts []Mount
	// Live, when set, runs the Exec as a cell of that live session (see
	// Engine.NewLive), in its interpreter of the Exec's language, which
	// keeps what earlier cells left. Workspace must be the session's.
	Live *Live
}

// File is a file placed in the workspace before a run.
type File struct {
	Path string // relative to the workspace, with forward slashes
	Data []byte
	Mode uint32 // permission bits; 0 means 0644
}

// Policy says what a program may do beyond computing. The zero value allows
// no network and every tool of the Engine's.
type Policy struct {
	// Network says which hosts the program may reach (see NetworkPolicy);
	// nil leaves the layers above as they are, and with none the program
	// has no network. A tier that cannot give a program some hosts and
	// not others refuses an Exec whose policy allows any.
	Network *NetworkPolicy
	// Tools says which of the Engine's tools the program may call. The
	// Engine's policy, the session's and the Exec's all apply: each can only
	// narrow.
	Tools ToolPolicy
	// Guard is what the guardrails refuse before a program runs (package
	// guard): categories of operations, Python imports, shell commands. On
	// the Engine (codecell's configuration file), a non-nil Guard replaces
	// the built-in DefaultGuard; a session's and an Exec's narrow the layer
	// above them and never widen it.
	Guard *GuardPolicy
}

// GuardPolicy is what the guardrails refuse: see guard.Policy.
type GuardPolicy = guard.Policy

// GuardFinding is one thing the guardrails refused: see guard.Finding.
type GuardFinding = guard.Finding

// DefaultGuard is the guardrail policy of an Engine that sets none. It
// refuses nothing: the sandbox is the boundary, and guardrails are defence in
// depth that an operator turns on in the configuration file.
var DefaultGuard = GuardPolicy{}
