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
	"fmt"
	"io"
	"math"
	"time"

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
	// Tools, when set, are tools for this Exec only, on top of the Engine's.
	Tools []Tool
}

// File is a file placed in the workspace before a run.
type File struct {
	Path string // relative to the workspace, with forward slashes
	Data []byte
	Mode uint32 // permission bits; 0 means 0644
}

// Limits bound one run. A zero field means "the default" (DefaultLimits),
// so Limits{} is a valid configuration.
type Limits struct {
	Timeout   time.Duration // wall clock
	Memory    int64         // bytes
	Processes int           // processes and threads
	CPU       float64       // cores the program may use at once; 0 means no limit
	Stdout    int           // characters kept, then truncated and flagged
	Stderr    int           // characters kept, then truncated and flagged
	CodeSize  int           // characters of source
	ToolCalls int           // tool calls per Exec
	// ToolTimeout bounds each tool call, on the host.
	ToolTimeout time.Duration
	// ToolResult bounds each tool call's result, in bytes of JSON.
	ToolResult int
	Value      int   // bytes of the return value's JSON
	Workspace  int64 // bytes written to the workspace
}

// DefaultLimits are the limits of an Exec that sets none.
var DefaultLimits = Limits{
	Timeout:     30 * time.Second,
	Memory:      512 << 20,
	Processes:   128,
	Stdout:      200_000,
	Stderr:      200_000,
	CodeSize:    12_000,
	ToolCalls:   30,
	ToolTimeout: 30 * time.Second,
	ToolResult:  1 << 20,
	Value:       1 << 20,
	Workspace:   1 << 30,
}

// check says which field, if any, is negative: a limit below zero bounds
// nothing that makes sense.
func (l Limits) check() error {
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"Timeout", float64(l.Timeout)}, {"Memory", float64(l.Memory)}, {"Processes", float64(l.Processes)},
		{"CPU", l.CPU}, {"Stdout", float64(l.Stdout)}, {"Stderr", float64(l.Stderr)},
		{"CodeSize", float64(l.CodeSize)}, {"ToolCalls", float64(l.ToolCalls)}, {"ToolTimeout", float64(l.ToolTimeout)},
		{"ToolResult", float64(l.ToolResult)}, {"Value", float64(l.Value)}, {"Workspace", float64(l.Workspace)},
	} {
		if f.v < 0 || math.IsNaN(f.v) {
			return fmt.Errorf("the %s limit is %v; limits are positive, or zero for the default", f.name, f.v)
		}
	}
	return nil
}

// Or returns l with each zero field taken from d.
func (l Limits) Or(d Limits) Limits {
	if l.Timeout == 0 {
		l.Timeout = d.Timeout
	}
	if l.Memory == 0 {
		l.Memory = d.Memory
	}
	if l.Processes == 0 {
		l.Processes = d.Processes
	}
	if l.CPU == 0 {
		l.CPU = d.CPU
	}
	if l.Stdout == 0 {
		l.Stdout = d.Stdout
	}
	if l.Stderr == 0 {
		l.Stderr = d.Stderr
	}
	if l.CodeSize == 0 {
		l.CodeSize = d.CodeSize
	}
	if l.ToolCalls == 0 {
		l.ToolCalls = d.ToolCalls
	}
	if l.ToolTimeout == 0 {
		l.ToolTimeout = d.ToolTimeout
	}
	if l.ToolResult == 0 {
		l.ToolResult = d.ToolResult
	}
	if l.Value == 0 {
		l.Value = d.Value
	}
	if l.Workspace == 0 {
		l.Workspace = d.Workspace
	}
	return l
}

// Policy says what a program may do beyond computing. The zero value allows
// no network and every tool of the Engine's.
type Policy struct {
	// Network lists hosts the program may reach. Empty means no network. A
	// tier that cannot confine the network says so in the Result's warnings;
	// a tier that cannot honour a non-empty list refuses the Exec.
	Network []string
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
