// Package lang knows how each language codecell runs is prepared: which
// interpreter starts it, which runner prelude wraps it, and how its return
// value reaches the host.
package lang

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// Language is one language codecell runs.
type Language struct {
	// Name is the canonical name: python, javascript, typescript, bash, sh.
	Name string
	// Aliases are other names accepted for it, such as "py" or "node".
	Aliases []string
	// Extensions are the file extensions that select it, with the dot.
	Extensions []string
	// Interpreter is the default interpreter's path.
	Interpreter string
	// Returns reports whether programs in this language can return a value.
	Returns bool

	prepare func(src *Source, v View) (*Program, error)
	// live starts a live session's interpreter; nil for a language whose
	// sessions keep files only.
	live func(src LiveSource, v View) *Live
	// liveRuntime names the interpreter live starts (see Live.Runtime).
	liveRuntime string
	// cell prepares a live session's cell.
	cell func(code, filename string, transpile func(code, filename string, typescript bool) (string, *SyntaxError, error)) (*Cell, error)
	// outOfMemory reports whether a failed run's stderr shows that the
	// interpreter ran out of memory (a limit it hit, not a crash).
	outOfMemory func(stderrTail string) bool
}

// Source is a program to prepare.
type Source struct {
	Code string
	// Filename is shown in tracebacks; it must be a plain file name.
	Filename string
	Args     []string
	// Interpreter overrides the language's default interpreter path.
	Interpreter string
	// ValueFD is the file descriptor, in the program, of the result channel.
	ValueFD int
	// ToolFD is the file descriptor, in the program, of the tool channel.
	ToolFD int
	// WarmFD, when not 0, asks for Program.Warm: the descriptor a warm
	// interpreter reads its job from.
	WarmFD int
	// ValueLimit is the largest return value, in bytes of JSON.
	ValueLimit int
	// Memory is the memory limit in bytes, for interpreters that size their
	// heaps from it; 0 means none.
	Memory int64
	// Policy is the guardrail policy for runners that check the program
	// themselves (Python's), as guard.Policy.RunnerFile writes it; nil
	// means none.
	Policy []byte
	// CheckOnly asks the runner to check the program against Policy and
	// send the findings (Record.Guard), without running it.
	CheckOnly bool
	// Transpile, when set, stands in for the package's Transpile for
	// JavaScript and TypeScript: a caller runs esbuild where a crash or a
	// blow-up costs only this program (see internal/isolate). Its error
	// is returned by Prepare as it is.
	Transpile func(code, filename string, typescript bool) (js string, syn *SyntaxError, err error)
}

// View is where the program sees its directories.
type View struct {
	Workspace string
	Runner    string
}

// Program is a prepared program: files for the runner directory and the
// command that starts it.
type Program struct {
	// Files are written into the runner directory, which the program sees
	// read-only; keys are slash-separated relative paths.
	Files map[string][]byte
	// Argv starts the program, in the program's view.
	Argv []string
	// Syntax is set when the host already found the source invalid (the
	// JavaScript and TypeScript transpiler does); nothing should run then.
	Syntax *SyntaxError
	// Runtime describes the guardrail layer the interpreter applies itself
	// (see Isolation.Runtime); empty when none.
	Runtime string
	// Warm says how the interpreter can be started before the program (see
	// codecell.WarmStart); nil when the language has no runner that waits.
	Warm *Warm
}

// Warm is an interpreter that loads its runner and then waits for the
// program: started as Argv, with Files (relative to the runner directory)
// in place, it reads a WarmMessage of Args and the environment on the
// descriptor Source.WarmFD, and then runs as Program.Argv would have.
type Warm struct {
	Argv  []string
	Files map[string][]byte
	Args  []string
	// Digest stands for Files: equal exactly when their names and contents
	// are. It is worked out once per runner, not per program.
	Digest string
	// Fork, when not nil, says the runner can also be loaded as a fork
	// server's template (see codecell.ForkStart).
	Fork *Fork
}

// Fork is how a runner is loaded as a template: Interpreter (the command up
// to the runner) runs a tier's script, which loads Runner, one of Files,
// and imports Preload (see codecell.ForkStart).
type Fork struct {
	Interpreter []string
	Runner      string
	Preload     []string
}

// warmDir is where, in the runner directory, a warm interpreter's files
// are: apart from a program's.
const warmDir = "warm"

// warmFor makes the Warm of a program whose runner is Argv[i], read from
// the file name in the runner directory: the warm interpreter runs the
// same runner, from its own copy, and is told the rest of the command.
func warmFor(src *Source, v View, argv []string, i int, name string, runner []byte, digest string) *Warm {
	if src.WarmFD <= 0 {
		return nil
	}
	own := path.Join(warmDir, name)
	w := &Warm{
		Argv:  append(append(append([]string{}, argv[:i]...), path.Join(v.Runner, own)), "--warm", fmt.Sprint(src.WarmFD)),
		Files: map[string][]byte{own: runner},
		Args:  append([]string{}, argv[i:]...),
	}
	w.Digest = own + " " + digest
	return w
}

// digestOf is the hex SHA-256 of a runner's file.
func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// WarmMessage is what a warm interpreter reads as its job: the rest of its
// command and its environment.
func WarmMessage(args, env []string) []byte {
	parts := append(append([]string{"codecell-warm 1", fmt.Sprint(len(args))}, args...), env...)
	return []byte(strings.Join(parts, "\x00"))
}

// policyBlocks returns the categories a runner policy file (as
// guard.Policy.RunnerFile writes it) blocks.
func policyBlocks(policy []byte) []string {
	var out []string
	for _, line := range strings.Split(string(policy), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "block "); ok && v != "" {
			out = append(out, strings.TrimSpace(v))
		}
	}
	return out
}

// SyntaxError is a program that does not parse.
type SyntaxError struct {
	Filename string
	Line     int // 1-based
	Column   int // 1-based
	Message  string
	// Text is the error as the interpreter would print it.
	Text string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("%s:%d:%d: %s", e.Filename, e.Line, e.Column, e.Message)
}

var languages = []*Language{python, javascript, typescript, bash, sh}

// Lookup returns the language with this name or alias, case-insensitively.
func Lookup(name string) *Language {
	name = strings.ToLower(strings.TrimSpace(name))
	for _, l := range languages {
		if l.Name == name {
			return l
		}
		for _, a := range l.Aliases {
			if a == name {
				return l
			}
		}
	}
	return nil
}

// Names lists the canonical language names, sorted.
func Names() []string {
	names := make([]string, len(languages))
	for i, l := range languages {
		names[i] = l.Name
	}
	sort.Strings(names)
	return names
}

// ForFile picks the language of a file from its shebang line, then its
// extension. A .sh file without a shebang runs in bash, which accepts what
// models usually write in one. It returns nil when neither decides.
func ForFile(name, code string) *Language {
	if l := fromShebang(code); l != nil {
		return l
	}
	ext := strings.ToLower(filepath.Ext(name))
	if ext == ".sh" {
		return bash
	}
	for _, l := range languages {
		for _, e := range l.Extensions {
			if e == ext {
				return l
			}
		}
	}
	return nil
}

func fromShebang(code string) *Language {
	if !strings.HasPrefix(code, "#!") {
		return nil
	}
	line, _, _ := strings.Cut(code, "\n")
	fields := strings.Fields(strings.TrimPrefix(line, "#!"))
	if len(fields) == 0 {
		return nil
	}
	prog := path.Base(fields[0])
	if prog == "env" {
		for _, f := range fields[1:] {
			if !strings.HasPrefix(f, "-") {
				prog = path.Base(f)
				break
			}
		}
	}
	switch {
	case strings.HasPrefix(prog, "python"):
		return python
	case prog == "node" || prog == "nodejs":
		return javascript
	case prog == "ts-node" || prog == "tsx" || prog == "deno" || prog == "bun":
		return typescript
	case prog == "bash" || prog == "zsh":
		return bash
	case prog == "sh" || prog == "dash" || prog == "ash":
		return sh
	}
	return nil
}

// DefaultFilename is the file name tracebacks show when the caller gave none.
func (l *Language) DefaultFilename() string {
	return "main" + l.Extensions[0]
}

// Prepare turns a program into runner files and a command for the view v.
func (l *Language) Prepare(src Source, v View) (*Program, error) {
	if src.Filename == "" {
		src.Filename = l.DefaultFilename()
	}
	if src.Filename != filepath.Base(src.Filename) || src.Filename == "." || src.Filename == ".." ||
		strings.ContainsAny(src.Filename, "\x00\\") {
		return nil, fmt.Errorf("filename %q must be a plain file name", src.Filename)
	}
	if src.Interpreter == "" {
		src.Interpreter = l.Interpreter
	}
	return l.prepare(&src, v)
}

// Live is how a live session's interpreter starts: Argv, in the program's
// view, with Files written in the runner directory first. It reads cells
// from the control socket at the descriptor it was given, and calls tools
// on the tool socket.
type Live struct {
	// Runtime names the interpreter: languages of one runtime share it
	// (JavaScript's and TypeScript's cells run in one node).
	Runtime string
	Argv    []string
	Files   map[string][]byte
	// Guard describes the guardrail layer the interpreter applies itself
	// (see Program.Runtime); empty when none.
	Guard string
}

// LiveSource is what a live session's interpreter is started with.
type LiveSource struct {
	// Interpreter overrides the language's default interpreter path.
	Interpreter string
	// Memory is the session's memory limit, for interpreters that size
	// their heaps from it; 0 means none.
	Memory int64
	// ControlFD and ToolFD are the interpreter's descriptors of the control
	// and tool sockets.
	ControlFD, ToolFD int
	// Policy is the guardrail policy the interpreter applies at run time to
	// every cell (guard.Policy.RunnerFile's format); nil means none. Cells
	// are checked statically before they reach the interpreter.
	Policy []byte
}

// Live returns how a live session's interpreter of this language starts,
// or nil when the language has none.
func (l *Language) Live(src LiveSource, v View) *Live {
	if l.live == nil {
		return nil
	}
	if src.Interpreter == "" {
		src.Interpreter = l.Interpreter
	}
	live := l.live(src, v)
	live.Runtime = l.liveRuntime
	return live
}

// LiveRuntime is the runtime of the language's live interpreter ("python",
// "node"), or "" when it has none.
func (l *Language) LiveRuntime() string {
	if l.live == nil {
		return ""
	}
	return l.liveRuntime
}

// Cell is a cell of a live session, prepared for its interpreter.
type Cell struct {
	// Code is what the interpreter runs: the source (Python), or the
	// program as Transpile makes it, its declarations made globals
	// (JavaScript, TypeScript).
	Code string
	// Globals are the names the cell's top-level declarations bind, which
	// the interpreter makes globals before it runs.
	Globals []string
	// Syntax is set when the host already found the source invalid.
	Syntax *SyntaxError
	// Warning says what of the cell will not be kept, if anything.
	Warning string
}

// Cell prepares code as a cell of a live session. transpile, when set,
// stands in for Transpile (see Source.Transpile).
func (l *Language) Cell(code, filename string, transpile func(code, filename string, typescript bool) (string, *SyntaxError, error)) (*Cell, error) {
	if l.cell == nil {
		return nil, fmt.Errorf("a live session keeps no %s interpreter", l.Name)
	}
	if filename == "" {
		filename = l.DefaultFilename()
	}
	return l.cell(code, filename, transpile)
}

// OutOfMemory reports whether a failed run's stderr shows the interpreter
// ran out of memory.
func (l *Language) OutOfMemory(stderrTail string) bool {
	return l.outOfMemory != nil && l.outOfMemory(stderrTail)
}

// runnerConfig is what a runner prelude reads from config.json.
type runnerConfig struct {
	Source     string   `json:"source"`
	Main       string   `json:"main,omitempty"`
	Filename   string   `json:"filename"`
	Workspace  string   `json:"workspace"`
	Args       []string `json:"args"`
	ValueFD    int      `json:"value_fd"`
	ToolFD     int      `json:"tool_fd"`
	ValueLimit int      `json:"value_limit"`
}

func (c runnerConfig) json() []byte {
	if c.Args == nil {
		c.Args = []string{}
	}
	b, err := json.Marshal(c)
	if err != nil {
		panic(err) // only strings and ints
	}
	return b
}

// Record is the one JSON message a runner prelude sends on the result
// channel when the program ends.
type Record struct {
	// Value is the return value; nil when the program returned none.
	Value json.RawMessage `json:"value"`
	// ValueTooLarge is the size of a value over the limit, which was dropped.
	ValueTooLarge int64        `json:"value_too_large"`
	Error         *RecordError `json:"error"`
	// Warnings say which parts of the value were not JSON and became text.
	Warnings []string `json:"warnings"`
	// Guard holds the findings of the runner's own guardrail checks, a JSON
	// array in the shape of guard.Finding: sent instead of running a
	// program the policy refuses, and in check-only mode (then possibly
	// empty).
	Guard json.RawMessage `json:"guard"`
	// Start is the runner's word, written before any of the program runs,
	// that the program starts: what follows on the channel is the
	// program's record, which the program could have written itself.
	Start bool `json:"start"`
}

// ToolEnvelope is a tool's error envelope as a runner passes it on.
type ToolEnvelope struct {
	Kind      string   `json:"error_kind"`
	Code      string   `json:"error_code"`
	Message   string   `json:"message"`
	Retryable bool     `json:"retryable"`
	Hints     []string `json:"hints"`
}

// RecordError is an uncaught exception, as the runner saw it.
type RecordError struct {
	Type     string `json:"type"`
	Message  string `json:"message"`
	Filename string `json:"filename"`
	Line     int    `json:"line"`
	Column   int    `json:"column"`
	Syntax   bool   `json:"syntax"`
	Memory   bool   `json:"memory"`
	// ModuleBlocked is the module whose import the run-time policy
	// refused, when that refusal ended the program; Rule names the rule.
	ModuleBlocked string `json:"module_blocked"`
	// PolicyBlocked is the audit event (os.system, socket.connect, …) the
	// run-time policy refused, when that refusal ended the program.
	PolicyBlocked string `json:"policy_blocked"`
	// ToolError is the envelope of the tool call whose failure, uncaught,
	// ended the program.
	ToolError *ToolEnvelope `json:"tool_error"`
	Rule      string        `json:"rule"`
}
