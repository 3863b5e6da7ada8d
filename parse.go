package codecell

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/codecell-dev/codecell/guard"
	"github.com/codecell-dev/codecell/internal/isolate"
	"github.com/codecell-dev/codecell/lang"
)

// The parsers the Engine runs on the host read untrusted programs: esbuild
// (JavaScript and TypeScript, to run and to check), goja (the guardrails'
// JavaScript parser) and mvdan.cc/sh (the guardrails' shell parser). Each
// program is first read by lang.CheckNesting, which refuses deep nesting in
// one linear pass; then the parsers run in a worker process (this binary,
// re-executed as an init stage) with a bounded heap, stack and time, so
// that whatever else a program does to them costs that one run. Without a
// binary to re-execute (Init not called, no InitPath) they run in this
// process, behind CheckNesting only. A live session's JavaScript cell is
// first read by goja in this process, behind CheckNesting (see
// lang.Language.Cell): its parser is linear once nesting is bounded, and
// a cell pays for no worker's round trip.

// Error codes of programs codecell cannot read.
const (
	// CodeTooDeep: the program nests deeper than codecell reads.
	CodeTooDeep = "CODE_TOO_DEEP"
	// CodeTooComplex: reading the program took more memory, stack, time
	// or output than codecell gives one program.
	CodeTooComplex = "CODE_TOO_COMPLEX"
)

const parseStage = "parse"

const (
	fnTranspile = "transpile"
	fnCheckJS   = "check-javascript"
	fnCheckSh   = "check-shell"
)

type transpileIn struct {
	Code       string `json:"code"`
	Filename   string `json:"filename"`
	TypeScript bool   `json:"typescript,omitempty"`
}

type transpileOut struct {
	JS     string            `json:"js,omitempty"`
	Syntax *lang.SyntaxError `json:"syntax,omitempty"`
	// Output is set when the output would have been too large.
	Output *lang.OutputError `json:"output,omitempty"`
}

type checkIn struct {
	Code     string        `json:"code"`
	Filename string        `json:"filename,omitempty"`
	Language string        `json:"language"`
	Policy   *guard.Policy `json:"policy"`
}

func init() {
	RegisterInitStage(parseStage, isolate.Serve)
	isolate.Register(fnTranspile, func(raw json.RawMessage) (any, error) {
		var in transpileIn
		if err := json.Unmarshal(raw, &in); err != nil {
			return nil, err
		}
		js, syn, err := lang.Transpile(in.Code, in.Filename, in.TypeScript)
		var oe *lang.OutputError
		if errors.As(err, &oe) {
			return transpileOut{Output: oe}, nil
		}
		return transpileOut{JS: js, Syntax: syn}, err
	})
	isolate.Register(fnCheckJS, func(raw json.RawMessage) (any, error) {
		var in checkIn
		if err := json.Unmarshal(raw, &in); err != nil {
			return nil, err
		}
		findings, _ := guard.CheckJavaScript(in.Code, in.Filename, in.Language == "typescript", in.Policy)
		return findings, nil
	})
	isolate.Register(fnCheckSh, func(raw json.RawMessage) (any, error) {
		var in checkIn
		if err := json.Unmarshal(raw, &in); err != nil {
			return nil, err
		}
		return guard.CheckShell(in.Code, in.Language == "bash", in.Policy), nil
	})
}

var (
	parsersMu sync.Mutex
	parsers   = map[string]*isolate.Pool{} // by the binary re-executed
)

// parse runs the parser function fn on in, in a worker when there is a
// binary to re-execute and here when not, and decodes its answer into out.
// A worker that died or ran out of time is the program's fault: the
// envelope says so.
func (e *Engine) parse(ctx context.Context, fn string, in, out any) *Envelope {
	path := e.initPath()
	var err error
	if path == "" {
		err = isolate.Local(fn, in, out)
	} else {
		parsersMu.Lock()
		p := parsers[path]
		if p == nil {
			p = &isolate.Pool{Path: path, Args: []string{InitArg0, parseStage}}
			parsers[path] = p
		}
		parsersMu.Unlock()
		err = p.Call(ctx, fn, in, out)
	}
	if err == nil {
		return nil
	}
	var f *isolate.Failure
	if errors.As(err, &f) {
		return Errorf(KindValidation, CodeTooComplex, "codecell could not read this program: %v", f).WithHints(
			"write the program more plainly: split deep or long expressions into named steps and functions",
			fmt.Sprintf("nest at most %d levels of brackets, blocks and chained arrow functions", lang.MaxNesting))
	}
	if ctx.Err() != nil {
		return Errorf(KindInternal, CodeSandboxFailure, "reading the program: %v", ctx.Err())
	}
	env := Errorf(KindInternal, CodeSandboxFailure, "reading the program: %v", err).WithHints(
		"this is a failure of the host, not of the program; retrying may help")
	env.Retryable = true
	return env
}

// nestingEnvelope is the refusal of a program that nests too deeply, or
// whose comma expression is too long to read in proportionate time.
func nestingEnvelope(n *lang.NestingError) *Envelope {
	var env *Envelope
	if n.Complex {
		env = Errorf(KindValidation, CodeTooComplex, "%v", n).WithHints(
			"split the long comma expression into statements, or put the values in an array",
			fmt.Sprintf("join at most %d expressions with commas in one expression", lang.MaxSequence))
	} else {
		env = Errorf(KindValidation, CodeTooDeep, "%v", n).WithHints(
			"split the deep part into named variables or functions",
			fmt.Sprintf("nest at most %d levels of brackets, blocks, labels, chained arrow functions and statements without braces", lang.MaxNesting))
	}
	env.Meta = map[string]any{"line": n.Line, "column": n.Column}
	return env
}

// transpiler is lang.Source.Transpile through e.parse.
func (e *Engine) transpiler(ctx context.Context) func(code, filename string, typescript bool) (string, *lang.SyntaxError, error) {
	return func(code, filename string, typescript bool) (string, *lang.SyntaxError, error) {
		var out transpileOut
		if env := e.parse(ctx, fnTranspile, transpileIn{Code: code, Filename: filename, TypeScript: typescript}, &out); env != nil {
			return "", nil, env
		}
		if out.Output != nil {
			return "", nil, Errorf(KindValidation, CodeTooComplex, "codecell could not run this program: %v", out.Output).WithHints(
				"nest less deeply: every level of nesting is indented in the transpiled program")
		}
		return out.JS, out.Syntax, nil
	}
}

// checkStatic runs the guardrails that run on the host: JavaScript and
// TypeScript on their syntax tree, shell on its. Python's run in the
// sandbox, in the runner (see lang.Source.Policy). A program that does not
// parse has no findings here: running it reports the syntax error.
func (e *Engine) checkStatic(ctx context.Context, l *lang.Language, x *Exec, p *GuardPolicy) ([]GuardFinding, *Envelope) {
	if p.Empty() {
		return nil, nil
	}
	filename := x.Filename
	if filename == "" {
		filename = l.DefaultFilename()
	}
	var fn string
	switch l.Name {
	case "javascript", "typescript":
		fn = fnCheckJS
	case "bash", "sh":
		fn = fnCheckSh
	default:
		return nil, nil
	}
	var findings []GuardFinding
	if env := e.parse(ctx, fn, checkIn{Code: x.Code, Filename: filename, Language: l.Name, Policy: p}, &findings); env != nil {
		return nil, env
	}
	return findings, nil
}
