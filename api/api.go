// Package api is the wire format of codecell's HTTP service (codecell
// serve): the JSON bodies its REST endpoints take and give, shared by the
// server and its Go client. /openapi.json describes the same shapes.
package api

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/codecell-dev/codecell"
)

// Limits are codecell.Limits as a person writes them: durations as "30s",
// sizes as "512M". A zero field keeps the default of the layer above.
type Limits struct {
	Timeout     Duration `json:"timeout,omitempty"`
	Memory      Size     `json:"memory,omitempty"`
	Processes   int      `json:"processes,omitempty"`
	CPUs        float64  `json:"cpus,omitempty"`
	Stdout      int      `json:"stdout,omitempty"`
	Stderr      int      `json:"stderr,omitempty"`
	CodeSize    int      `json:"code_size,omitempty"`
	ToolCalls   int      `json:"tool_calls,omitempty"`
	ToolTimeout Duration `json:"tool_timeout,omitempty"`
	ToolResult  Size     `json:"tool_result,omitempty"`
	ToolHandles Size     `json:"tool_handles,omitempty"`
	Value       Size     `json:"value,omitempty"`
	Workspace   Size     `json:"workspace,omitempty"`
}

// Codecell returns the limits as codecell.Limits; zero fields stay zero.
func (l Limits) Codecell() codecell.Limits {
	var out codecell.Limits
	v := reflect.ValueOf(l)
	for i, f := range codecell.LimitFields {
		field := v.Field(apiFields[i])
		switch field.Kind() {
		case reflect.Float64:
			f.Set(&out, field.Float())
		default:
			f.Set(&out, float64(field.Int()))
		}
	}
	return out
}

// apiFields holds, for each of codecell.LimitFields, the index of the field
// of Limits whose JSON name is its name: the table in the root is the one
// list of limits, and Limits only spells them for JSON.
var apiFields = func() []int {
	t := reflect.TypeFor[Limits]()
	out := make([]int, len(codecell.LimitFields))
	for i, f := range codecell.LimitFields {
		out[i] = -1
		for j := range t.NumField() {
			if name, _, _ := strings.Cut(t.Field(j).Tag.Get("json"), ","); name == f.Name {
				out[i] = j
			}
		}
		if out[i] < 0 {
			panic("api.Limits has no field for the limit " + f.Name)
		}
	}
	return out
}()

// Check says which limit, if any, is negative.
func (l Limits) Check() error {
	c := l.Codecell()
	for _, f := range LimitFields {
		if v := f.Get(c); v < 0 || math.IsNaN(v) {
			return fmt.Errorf("the %s limit is %s: a limit must not be negative; leave it out for the default", f.Name, f.Show(v))
		}
	}
	return nil
}

// LimitField is one limit, as codecell.LimitFields has it.
type LimitField = codecell.LimitField

// LimitFields are the limits: codecell.LimitFields.
var LimitFields = codecell.LimitFields

// LimitsOf writes codecell.Limits as Limits.
func LimitsOf(l codecell.Limits) Limits {
	var out Limits
	v := reflect.ValueOf(&out).Elem()
	for i, f := range codecell.LimitFields {
		field := v.Field(apiFields[i])
		switch field.Kind() {
		case reflect.Float64:
			field.SetFloat(f.Get(l))
		default:
			field.SetInt(int64(f.Get(l)))
		}
	}
	return out
}

// Policy is what a session or an execution may do: it narrows the
// server's, never widens it.
type Policy struct {
	Guard *codecell.GuardPolicy `json:"guard,omitempty"`
	Tools *codecell.ToolPolicy  `json:"tools,omitempty"`
	// Network narrows the hosts the program may reach: "none", or
	// {"allow": [...], "deny": [...]} (see codecell.NetworkPolicy).
	Network *codecell.NetworkPolicy `json:"network,omitempty"`
}

// Codecell returns the policy as codecell.Policy.
func (p *Policy) Codecell() *codecell.Policy {
	if p == nil {
		return nil
	}
	out := &codecell.Policy{Guard: p.Guard, Network: p.Network}
	if p.Tools != nil {
		out.Tools = *p.Tools
	}
	return out
}

// PolicyOf writes a codecell.Policy as a Policy; nil stays nil.
func PolicyOf(p *codecell.Policy) *Policy {
	if p == nil || p.Guard == nil && p.Tools.IsZero() && p.Network == nil {
		return nil
	}
	out := &Policy{Guard: p.Guard, Network: p.Network}
	if !p.Tools.IsZero() {
		tools := p.Tools
		out.Tools = &tools
	}
	return out
}

// SessionSpec is what POST /v1/sessions takes. Every field is optional.
type SessionSpec struct {
	// Tier runs the session's executions: "auto" (the server's default),
	// "native", "local", …
	Tier   string  `json:"tier,omitempty"`
	Limits *Limits `json:"limits,omitempty"`
	Policy *Policy `json:"policy,omitempty"`
	// Packages are installed for each of the session's executions of
	// their language, besides the execution's own (see
	// codecell.Exec.Packages).
	Packages codecell.Packages `json:"packages,omitempty"`
	// TTL is the session's lifetime: it ends this long after it was
	// created, used or not. Zero means the server's default; at most the
	// server's maximum.
	TTL Duration `json:"ttl,omitempty"`
	// IdleTimeout ends the session when no execution or upload used it for
	// this long; zero means the server's default.
	IdleTimeout Duration `json:"idle_timeout,omitempty"`
	// State is "files" (the default: the workspace is kept between
	// executions) or "live": the session also keeps one interpreter per
	// language, so that variables, imports and functions persist from one
	// execution to the next, as in a notebook (Python).
	State string `json:"state,omitempty"`
}

// Session states.
const (
	StateFiles = "files"
	StateLive  = "live"
)

// Interpreter is one of a live session's interpreters.
type Interpreter struct {
	Language string `json:"language"`
	// Running is false once it ended (the next execution starts another).
	Running bool      `json:"running"`
	Memory  int64     `json:"memory_bytes"`
	Started time.Time `json:"started_at"`
	Cells   int       `json:"executions"`
}

// Variables is what GET /v1/sessions/{id}/variables gives: the names a
// live session's interpreter holds.
type Variables struct {
	Language  string              `json:"language"`
	Variables []codecell.Variable `json:"variables"`
}

// SessionList is what GET /v1/sessions gives.
type SessionList struct {
	Sessions []Session `json:"sessions"`
}

// Session is what the service says of a session.
type Session struct {
	ID string `json:"id"`
	// Owner names the principal (the token's holder) the session belongs
	// to.
	Owner string `json:"owner"`
	// Name is the name an MCP client gave the session with execute's
	// session argument; empty for a session made with POST /v1/sessions.
	Name   string  `json:"name,omitempty"`
	Tier   string  `json:"tier,omitempty"`
	Limits *Limits `json:"limits,omitempty"`
	Policy *Policy `json:"policy,omitempty"`
	// Packages are the session's packages (SessionSpec.Packages).
	Packages codecell.Packages `json:"packages,omitempty"`
	// TTL is the session's lifetime; absent for a session that has none
	// (one an MCP client named), which ends when idle.
	TTL         Duration  `json:"ttl,omitempty"`
	IdleTimeout Duration  `json:"idle_timeout"`
	CreatedAt   time.Time `json:"created_at"`
	LastUsedAt  time.Time `json:"last_used_at"`
	// ExpiresAt is when the session ends if it is not used before.
	ExpiresAt  time.Time `json:"expires_at"`
	Executions int       `json:"executions"`
	// Running says whether one of its executions runs now.
	Running bool `json:"running"`
	// WorkspaceBytes is what the workspace costs its disk now (the blocks
	// of every file, directory and link, at least 4 KiB each), and
	// WorkspaceQuota the most it may; GET /v1/sessions/{id} says, a list
	// does not.
	WorkspaceBytes int64 `json:"workspace_bytes,omitempty"`
	WorkspaceQuota int64 `json:"workspace_quota,omitempty"`
	// State is "files" or "live" (see SessionSpec.State).
	State string `json:"state"`
	// Interpreters are a live session's interpreters, by language: those
	// its executions started and that have not been restarted since.
	Interpreters []Interpreter `json:"interpreters,omitempty"`
}

// ForkedSession is the answer to POST /v1/sessions/{id}/fork: the new
// session, the one it was forked from, and what was copied of each of that
// session's interpreters (a live session's Python state; see
// codecell.Live.Fork).
type ForkedSession struct {
	Session
	ForkedFrom string                `json:"forked_from"`
	Fork       []codecell.ForkReport `json:"fork"`
}

// File is one entry of a workspace listing.
type File struct {
	// Path is relative to the workspace, with forward slashes.
	Path string `json:"path"`
	// Type is "file", "dir" or "symlink".
	Type string `json:"type"`
	Size int64  `json:"size"`
	Mode uint32 `json:"mode"`
	// SHA256 of a file's content.
	SHA256 string `json:"sha256,omitempty"`
	// Target of a symlink, which is never followed.
	Target string `json:"target,omitempty"`
}

// FileList is what GET /v1/sessions/{id}/files gives.
type FileList struct {
	Files []File `json:"files"`
}

// ArchiveResult is what POST /v1/sessions/{id}/files (a tar) gives.
type ArchiveResult struct {
	// Path is the directory the archive went into, "" for the workspace.
	Path    string `json:"path"`
	Entries int    `json:"entries"`
	Bytes   int64  `json:"bytes"`
}

// Execution is what POST /v1/executions and POST
// /v1/sessions/{id}/executions take: one program to run.
type Execution struct {
	Language string `json:"language"`
	Code     string `json:"code"`
	// Filename is the program's file name in tracebacks.
	Filename string            `json:"filename,omitempty"`
	Args     []string          `json:"args,omitempty"`
	Env      map[string]string `json:"env,omitempty"`
	Stdin    string            `json:"stdin,omitempty"`
	// Files are written into the workspace before the program runs.
	Files  []InputFile `json:"files,omitempty"`
	Tier   string      `json:"tier,omitempty"`
	Limits *Limits     `json:"limits,omitempty"`
	Policy *Policy     `json:"policy,omitempty"`
	// Packages the program imports, by language: {"python":
	// ["humanize==4.9.0"], "javascript": ["lodash@4.17.21"]}.
	Packages codecell.Packages `json:"packages,omitempty"`
}

// InputFile is a file an execution brings: its content as text, or as
// base64 in data.
type InputFile struct {
	// Path is relative to the workspace, with forward slashes.
	Path string `json:"path"`
	Text string `json:"text,omitempty"`
	Data []byte `json:"data,omitempty"`
	// Mode is the permission bits; 0 means 0644.
	Mode uint32 `json:"mode,omitempty"`
}

// Codecell returns the file as a codecell.File.
func (f InputFile) Codecell() codecell.File {
	data := f.Data
	if f.Text != "" {
		data = append([]byte(f.Text), f.Data...)
	}
	return codecell.File{Path: f.Path, Data: data, Mode: f.Mode}
}

// Events of a streamed execution (Accept: text/event-stream): stdout and
// stderr carry Output as the program writes it; approval carries a
// codecell.ApprovalRequest, a tool call waiting for a person's answer
// (POST /v1/executions/{exec_id}/approvals/{id}); result carries the
// codecell.Result and ends the stream; error carries a codecell.Envelope
// and ends it.
const (
	EventStdout   = "stdout"
	EventStderr   = "stderr"
	EventApproval = "approval"
	EventResult   = "result"
	EventError    = "error"
)

// ApprovalAnswer is what POST /v1/executions/{exec_id}/approvals/{id}
// takes: whether the call may go on, and optionally why.
type ApprovalAnswer struct {
	Approve bool   `json:"approve"`
	Reason  string `json:"reason,omitempty"`
}

// Output is a piece of a stream.
type Output struct {
	Text string `json:"text"`
}

// Duration is a time.Duration written as "30s", "2m" or a number of
// seconds.
type Duration time.Duration

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var secs float64
		if err := json.Unmarshal(b, &secs); err != nil {
			return fmt.Errorf("a duration is a string such as \"30s\" or a number of seconds, not %s", b)
		}
		s = strconv.FormatFloat(secs, 'f', -1, 64)
	}
	v, err := ParseDuration(s)
	*d = Duration(v)
	return err
}

// MarshalJSON writes the duration as it would be asked for: "2h", "30m",
// "1h30m", "1m30s", "5s", "500ms" (not Go's "2h0m0s").
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

func (d Duration) String() string {
	s := time.Duration(d).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// Size is a byte count written as "512M", "1G", "64KiB" or a number.
type Size int64

func (s *Size) UnmarshalJSON(b []byte) error {
	var str string
	if err := json.Unmarshal(b, &str); err != nil {
		var n int64
		if err := json.Unmarshal(b, &n); err != nil {
			return fmt.Errorf("a size is a string such as \"512M\" or a number of bytes, not %s", b)
		}
		str = strconv.FormatInt(n, 10)
	}
	v, err := ParseSize(str)
	*s = Size(v)
	return err
}

// MarshalJSON writes a size as a string in the largest binary unit that
// holds it exactly ("128M", "1G", "64K"), else as its bytes ("1000"):
// the spelling requests use, so that what the API says can be sent back.
func (s Size) MarshalJSON() ([]byte, error) { return json.Marshal(FormatSize(int64(s))) }

// FormatSize writes n bytes as Size does.
func FormatSize(n int64) string {
	for _, u := range []struct {
		unit  string
		bytes int64
	}{{"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if n != 0 && n%u.bytes == 0 {
			return strconv.FormatInt(n/u.bytes, 10) + u.unit
		}
	}
	return strconv.FormatInt(n, 10)
}

// ParseDuration accepts Go durations (1m30s) and plain seconds (90, 0.5).
func ParseDuration(s string) (time.Duration, error) {
	if secs, err := strconv.ParseFloat(s, 64); err == nil {
		// Checked as nanoseconds, before the conversion: a float out of
		// int64's range (1e300, Inf, NaN) converts to a negative duration,
		// and one under a nanosecond to none.
		switch ns := secs * float64(time.Second); {
		case math.IsNaN(ns) || math.IsInf(ns, 0):
			return 0, fmt.Errorf("%q is not a positive duration such as 10s, 2m or 90", s)
		case secs <= 0:
			return 0, fmt.Errorf("duration %q must be positive", s)
		case ns < 1:
			return 0, fmt.Errorf("duration %q is under a nanosecond: give at least 1ns", s)
		case ns >= math.MaxInt64:
			return 0, fmt.Errorf("duration %q is too long: at most %d seconds", s, int64(math.MaxInt64/time.Second))
		default:
			return time.Duration(ns), nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q is not a positive duration such as 10s, 2m or 90", s)
	}
	return d, nil
}

// ParseSize accepts bytes or a number with a binary unit: 512M, 512MiB, 1g.
func ParseSize(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "ib"), "b")
	mult := int64(1)
	if t != "" {
		switch t[len(t)-1] {
		case 'k':
			mult = 1 << 10
		case 'm':
			mult = 1 << 20
		case 'g':
			mult = 1 << 30
		}
		if mult > 1 {
			t = t[:len(t)-1]
		}
	}
	n, err := strconv.ParseFloat(t, 64)
	if err != nil || !(n > 0) || math.IsInf(n, 0) {
		return 0, fmt.Errorf("%q is not a size such as 256M, 1G or 1073741824", s)
	}
	// Checked as bytes, before the conversion: a float out of int64's range
	// converts to a negative size, and one under a byte to none.
	switch b := n * float64(mult); {
	case b < 1:
		return 0, fmt.Errorf("size %q is under a byte: give at least 1", s)
	case b >= math.MaxInt64:
		return 0, fmt.Errorf("size %q is too large: at most %dG", s, int64(math.MaxInt64>>30))
	default:
		return int64(b), nil
	}
}
