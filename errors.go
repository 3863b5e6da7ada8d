package codecell

import (
	"encoding/json"
	"fmt"
)

// ErrorKind is the coarse class of an Envelope. The set is closed: callers
// switch on it, so a new kind is a breaking change.
type ErrorKind string

const (
	KindValidation     ErrorKind = "validation"      // the request itself is wrong
	KindGuardrail      ErrorKind = "guardrail"       // a static check refused the code
	KindSandboxRuntime ErrorKind = "sandbox_runtime" // the program ran and failed
	KindTool           ErrorKind = "tool"            // a tool call failed
	KindUpstream       ErrorKind = "upstream"        // an upstream MCP server failed
	KindTimeout        ErrorKind = "timeout"         // a time limit ended the work
	KindLimit          ErrorKind = "limit"           // another limit ended or refused the work
	KindInternal       ErrorKind = "internal"        // codecell or its host failed
)

// Stable error codes. Clients may match on them; messages may change.
const (
	CodeEmptyCode         = "EMPTY_CODE"
	CodeUnknownLanguage   = "UNKNOWN_LANGUAGE"
	CodeCodeTooLarge      = "CODE_TOO_LARGE"
	CodeInvalidRequest    = "INVALID_REQUEST"
	CodeUnknownTier       = "UNKNOWN_TIER"
	CodeTierUnavailable   = "TIER_UNAVAILABLE"
	CodeNoIsolation       = "NO_ISOLATING_TIER"
	CodePolicyUnsupported = "POLICY_UNSUPPORTED"
	CodeSyntaxError       = "SYNTAX_ERROR"
	CodeRuntimeError      = "SANDBOX_RUNTIME_ERROR"
	CodeNonZeroExit       = "NONZERO_EXIT"
	CodeKilledBySignal    = "KILLED_BY_SIGNAL"
	CodeTimeout           = "TIMEOUT"
	CodeMemoryLimit       = "MEMORY_LIMIT"
	CodeSandboxFailure    = "SANDBOX_FAILURE"
	// CodeWorkspaceTooLarge: the workspace given does not fit the
	// workspace limit the run has.
	CodeWorkspaceTooLarge = "WORKSPACE_TOO_LARGE"
	// CodeMountUnavailable: a host directory the run was to show (a
	// mount) is missing, is not a directory, or cannot be reached by the
	// sandbox.
	CodeMountUnavailable = "MOUNT_UNAVAILABLE"
	// CodePackageInstallFailed: a package the Exec asked for could not
	// be installed; the message ends with the installer's own words.
	CodePackageInstallFailed = "PACKAGE_INSTALL_FAILED"

	// Tool calls.
	CodeToolNotFound        = "TOOL_NOT_FOUND"
	CodeToolNotAllowed      = "TOOL_NOT_ALLOWED"
	CodeToolBadParams       = "TOOL_BAD_PARAMS"
	CodeToolCallLimit       = "TOOL_CALL_LIMIT"
	CodeToolTimeout         = "TOOL_TIMEOUT"
	CodeToolFailed          = "TOOL_FAILED"
	CodeToolResultTooLarge  = "TOOL_RESULT_TOO_LARGE"
	CodeUpstreamUnavailable = "UPSTREAM_UNAVAILABLE"
	CodeUpstreamError       = "UPSTREAM_ERROR"
)

// Envelope is the one error shape codecell uses everywhere: in a Result, in
// tool failures, in MCP tool errors and in HTTP error bodies. Messages are
// written for a model that will retry: what went wrong and what to do instead.
type Envelope struct {
	Kind      ErrorKind      `json:"error_kind"`
	Code      string         `json:"error_code"`
	Message   string         `json:"message"`
	Retryable bool           `json:"retryable"`
	Hints     []string       `json:"hints,omitempty"`
	Meta      map[string]any `json:"_meta,omitempty"`
}

// Error makes an Envelope usable as a Go error.
func (e *Envelope) Error() string {
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// JSON returns the envelope as one line of JSON.
func (e *Envelope) JSON() string {
	b, err := json.Marshal(e)
	if err != nil {
		// Meta holds only values codecell put there; failing here is a bug.
		panic(err)
	}
	return string(b)
}

// Errorf builds an Envelope. Hints may be added afterwards.
func Errorf(kind ErrorKind, code, format string, args ...any) *Envelope {
	return &Envelope{Kind: kind, Code: code, Message: fmt.Sprintf(format, args...)}
}

// WithHints returns e with hints appended.
func (e *Envelope) WithHints(hints ...string) *Envelope {
	e.Hints = append(e.Hints, hints...)
	return e
}
