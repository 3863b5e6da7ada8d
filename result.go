package codecell

import "encoding/json"

// Status says how an Exec ended.
type Status string

const (
	// StatusSuccess: the program ran and exited with code 0.
	StatusSuccess Status = "success"
	// StatusFailure: the program ran and exited non-zero, raised, or was
	// killed by a signal that no limit explains.
	StatusFailure Status = "failure"
	// StatusTimeout: the wall-clock limit ended the program.
	StatusTimeout Status = "timeout"
	// StatusMemoryLimit: the memory limit ended the program.
	StatusMemoryLimit Status = "memory_limit"
	// StatusBlocked: refused before running (bad request, guardrail, policy).
	StatusBlocked Status = "blocked"
	// StatusSandboxError: the infrastructure failed, not the code.
	StatusSandboxError Status = "sandbox_error"
)

// Result is what happened to one Exec. Every field is filled in by codecell,
// never parsed out of the program's output.
type Result struct {
	ID     string `json:"id"`
	Status Status `json:"status"`
	// ExitCode is the program's exit code; 128+N when signal N killed it,
	// as a shell reports it. It is -1 when the program never started.
	ExitCode        int    `json:"exit_code"`
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	StdoutTruncated bool   `json:"stdout_truncated"`
	StderrTruncated bool   `json:"stderr_truncated"`
	// Value is the program's return value as JSON: the value of a top-level
	// return, or of the final expression. Absent when there is none.
	Value      json.RawMessage `json:"value,omitempty"`
	Error      *Envelope       `json:"error,omitempty"`
	DurationMS int64           `json:"duration_ms"`
	// Files lists what the program created, modified or deleted in its
	// workspace.
	Files     []FileChange `json:"files"`
	ToolCalls []ToolCall   `json:"tool_calls"`
	Tier      string       `json:"tier"`
	Language  string       `json:"language"`
	Isolation Isolation    `json:"isolation"`
	Warnings  []string     `json:"warnings"`
	// Policy is the policy that applied, and the layers it came from.
	Policy *AppliedPolicy `json:"policy,omitempty"`
	// Findings are what the guardrails refused, when they refused the
	// program (status blocked, GUARDRAIL_BLOCKED).
	Findings []GuardFinding `json:"findings,omitempty"`
	// Network lists the connections the program opened, allowed or not,
	// when its policy let it reach any host.
	Network []NetworkConnection `json:"network,omitempty"`
	// Packages says, by language, which packages the program had and
	// whether they were installed for it or taken from the cache.
	Packages map[string]PackageReport `json:"packages,omitempty"`
	// SessionState, for a cell of a live session, says whether the
	// session's interpreter lives on with what the cell left ("kept") or
	// ended with it ("lost"): the next cell then starts a fresh one, in the
	// same workspace. Empty outside live sessions.
	SessionState string `json:"session_state,omitempty"`
}

// AppliedPolicy is the policy a run had: the guardrails in force, and the
// layers that set them.
type AppliedPolicy struct {
	// Guard is what the guardrails refused: every layer's, narrowed
	// together.
	Guard GuardPolicy `json:"guard"`
	// Network is the network policy's layers, widest first; none means no
	// network.
	Network []NetworkLayer `json:"network,omitempty"`
	// Layers are where the policy came from, widest first: "defaults"
	// (built in), "config" (the Engine's: codecell's configuration file),
	// "session", "exec". A layer that sets nothing is left out, except the
	// defaults.
	Layers []PolicyLayer `json:"layers"`
}

// PolicyLayer is what one layer of the policy set.
type PolicyLayer struct {
	Name  string       `json:"name"`
	Guard *GuardPolicy `json:"guard,omitempty"`
	Tools *ToolPolicy  `json:"tools,omitempty"`
	// Network is what the layer's network policy says; absent when it
	// says nothing.
	Network *NetworkPolicy `json:"network,omitempty"`
}

// Change is what happened to a file in the workspace.
type Change string

const (
	Created  Change = "created"
	Modified Change = "modified" // its size or modification time changed
	Deleted  Change = "deleted"
)

// FileChange is one file the program created, modified or deleted.
type FileChange struct {
	Path   string `json:"path"` // relative to the workspace, with forward slashes
	Change Change `json:"change"`
	Size   int64  `json:"size"`
	// SHA256 of the content after the run; empty for deleted files.
	SHA256 string `json:"sha256,omitempty"`
	// Symlink holds the link's target when the entry is a symbolic link; its
	// target is never followed.
	Symlink string `json:"symlink,omitempty"`
	// MIME is the content's media type, sniffed from its first bytes, never
	// taken from its name: "image/png", "text/plain; charset=utf-8",
	// "application/octet-stream" when nothing matches. Empty for deleted
	// and empty files and for links.
	MIME string `json:"mime,omitempty"`
}

// ToolCall is one call the program made to a host tool, in the order the
// calls were made.
type ToolCall struct {
	Name       string    `json:"name"`
	DurationMS float64   `json:"duration_ms"`
	OK         bool      `json:"ok"`
	ErrorKind  ErrorKind `json:"error_kind,omitempty"`
	ErrorCode  string    `json:"error_code,omitempty"`
	// Rule is the policy's rule that decided the call by its arguments or
	// its rate, with the layer it came from ("config: allow
	// github.create_issue with repo=\"myorg/*\""), when one did.
	Rule string `json:"rule,omitempty"`
	// Approval, for a call that a rule said to ask about, is who decided
	// it and how.
	Approval *ToolApproval `json:"approval,omitempty"`
}

// Isolation says what a tier really applied to one run. A weaker setting
// than asked for is never silent: it shows here and in Result.Warnings.
type Isolation struct {
	// Level is "none" (a plain subprocess), "sandbox" (kernel isolation),
	// "interpreter" (an in-process interpreter) or "container".
	Level string `json:"level"`
	// Namespaces lists the Linux namespaces the program was put in.
	Namespaces []string `json:"namespaces,omitempty"`
	Seccomp    string   `json:"seccomp,omitempty"`
	Landlock   string   `json:"landlock,omitempty"`
	NoNewPrivs bool     `json:"no_new_privs,omitempty"`
	// User describes who the program ran as, inside and on the host.
	User    string `json:"user,omitempty"`
	Network string `json:"network"`
	// Cgroup is "v2", "v1" or "none".
	Cgroup string `json:"cgroup,omitempty"`
	// Engine is the container engine that ran the program, its version and
	// the image: "podman 4.3.1, image codecell:1" (the docker tier).
	Engine string `json:"engine,omitempty"`
	// Runtime is the guardrail layer inside the interpreter, when the
	// policy blocks something: Python's audit hook, node's permission
	// model, and what each refuses.
	Runtime string `json:"runtime,omitempty"`
	// Interpreter says when the program's interpreter started: "started
	// for this run", or "started before this run, in this run's sandbox,
	// for this run alone" (a warm interpreter, which no other run used).
	Interpreter string `json:"interpreter,omitempty"`
	// Limits says, per limit, what enforced it ("cgroup v1", "rlimit", "not
	// enforced").
	Limits LimitsApplied `json:"limits"`
}

// LimitsApplied names the mechanism behind each limit in one run.
type LimitsApplied struct {
	Timeout   string `json:"timeout"`
	Memory    string `json:"memory"`
	Processes string `json:"processes"`
	CPU       string `json:"cpu"`
	Workspace string `json:"workspace"`
	Output    string `json:"output"`
}
