package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/codeblock"
	"github.com/codecell-dev/codecell/config"
	"github.com/codecell-dev/codecell/lang"
	"github.com/codecell-dev/codecell/tier/docker"
	"github.com/codecell-dev/codecell/tier/native"
	"golang.org/x/sys/unix"
)

// runCodeSize is the code-size limit of `codecell run`: a file on disk is
// not a model's tool call, and may be larger than code mode allows.
const runCodeSize = 1_000_000

type runFlags struct {
	lang, tier, workspace string
	config, log           string
	timeout               string
	memory                string
	json, markdown        bool
	rawOutput             bool
	remote, session       string
	mounts                []string
	allowHosts            []string
	packages              []string
	cpus                  float64
	interpreters          map[string]string
	guard                 guardFlags
}

// network is the network policy --allow-host asks for; nil leaves the
// configuration's.
func (f *runFlags) network() *codecell.NetworkPolicy {
	if len(f.allowHosts) == 0 {
		return nil
	}
	return &codecell.NetworkPolicy{Allow: f.allowHosts}
}

// packagesFor is what --package asks for, for a program of language:
// "LANG:SPEC" for that language, a bare SPEC for the program's own.
func (f *runFlags) packagesFor(language string) codecell.Packages {
	if len(f.packages) == 0 {
		return nil
	}
	out := codecell.Packages{}
	for _, p := range f.packages {
		name, spec, ok := strings.Cut(p, ":")
		if !ok {
			name, spec = language, p
		}
		out[name] = append(out[name], spec)
	}
	return out
}

func (m *Main) run(ctx context.Context, args []string) int {
	var f runFlags
	fs := flag.NewFlagSet("codecell run", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	fs.StringVar(&f.lang, "lang", "", "language: python, javascript, typescript, bash, sh (default: from the file's shebang or extension)")
	fs.StringVar(&f.tier, "tier", "", "where to run: auto, "+strings.Join(codecell.TierNames(), ", ")+" (default auto)")
	fs.StringVar(&f.timeout, "timeout", "", "wall-clock limit, such as 10s or 2m (default 30s)")
	fs.StringVar(&f.memory, "memory", "", "memory limit, such as 256M or 1G (default 512M)")
	fs.Float64Var(&f.cpus, "cpus", 0, "cores the program may use at once, such as 0.5 (default: no limit)")
	fs.StringVar(&f.workspace, "workspace", "", "run in this directory instead of a fresh temporary one")
	fs.StringVar(&f.config, "config", "", "the configuration `FILE`: limits, tier, tool policy, upstream MCP servers")
	fs.StringVar(&f.log, "log", "", "append structured logs (JSON lines: one per run and per tool call) to `FILE`")
	fs.BoolVar(&f.json, "json", false, "print the Result as one JSON object instead of passing output through")
	fs.BoolVar(&f.rawOutput, "raw-output", false, "on a terminal, pass the program's control sequences through as they are (by default all but newline, tab and colours are shown, not obeyed)")
	fs.BoolVar(&f.markdown, "from-markdown", false, "FILE is markdown: run each fenced code block in order, each on its own")
	fs.Func("interpreter", "use `LANG=PATH` as the interpreter of a language, such as python=/usr/bin/python3.12; repeatable", func(v string) error {
		name, path, ok := strings.Cut(v, "=")
		l := lang.Lookup(name)
		if !ok || l == nil || path == "" {
			return fmt.Errorf("%q is not LANG=PATH with LANG one of %s", v, strings.Join(lang.Names(), ", "))
		}
		if f.interpreters == nil {
			f.interpreters = map[string]string{}
		}
		f.interpreters[l.Name] = path
		return nil
	})
	fs.StringVar(&f.remote, "remote", "", "run on the codecell service at `URL` (codecell serve) instead of here; the token comes from CODECELL_TOKEN")
	fs.StringVar(&f.session, "session", "", "with --remote: run in this session `ID`, whose workspace persists")
	f.guard.register(fs)
	fs.Func("allow-host", "let the program reach `HOST` (a name, name:port or address range, as the network policy's allow list takes); repeatable", func(h string) error {
		f.allowHosts = append(f.allowHosts, h)
		return nil
	})
	fs.Func("package", "install `SPEC` for the program first (humanize==4.9.0, lodash@4.17.21; LANG:SPEC for another language's, such as python:humanize); repeatable", func(p string) error {
		f.packages = append(f.packages, p)
		return nil
	})
	fs.Func("mount", "a host `DIR` the sandbox also shows, read-only at the same path (for interpreters installed elsewhere); repeatable", func(dir string) error {
		if !filepath.IsAbs(dir) {
			return fmt.Errorf("%s is not an absolute path", dir)
		}
		if err := checkMount(dir); err != nil {
			return err
		}
		f.mounts = append(f.mounts, filepath.Clean(dir))
		return nil
	})
	fs.Usage = func() {
		fmt.Fprint(m.Stderr, `Usage: codecell run [flags] FILE|- [ARGS...]

Runs FILE (or standard input, for -) in the sandbox. Its stdout and stderr pass
through, and codecell exits with its exit code; with --json it prints the Result
instead. Exit codes of codecell's own: 124 timeout, 137 memory limit, 126 refused
before running, 125 codecell failed, 2 bad usage.

Flags:
`)
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(m.Stderr, "codecell run: name a FILE to run, or - for standard input")
		return exitUsage
	}
	if f.remote != "" || f.session != "" {
		return m.runRemote(ctx, f, fs.Arg(0), fs.Args()[1:])
	}
	// One run, then exit: a pool would be thrown away. This engine has a
	// native tier of its own, unpooled, with the mounts asked for, which
	// builds the run's sandbox as soon as the mounts are known, while the
	// run is made ready.
	nt := &native.Tier{Pool: -1}
	var logger *slog.Logger
	if f.log != "" {
		logFile, err := os.OpenFile(f.log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			fmt.Fprintf(m.Stderr, "codecell run: %v\n", err)
			return exitUsage
		}
		defer logFile.Close()
		logger = slog.New(slog.NewJSONHandler(logFile, nil))
	}
	engP, mounts, closeFn, code := m.engine(f.config, logger)
	if code != 0 {
		return code
	}
	defer closeFn()
	eng := *engP
	if logger != nil {
		eng.Logger = logger
	}
	nt.ExtraMounts = append(mounts, f.mounts...)
	// The docker tier's likewise: no container is readied for a next run.
	d := docker.Default
	dt := &docker.Tier{Host: d.Host, Image: d.Image, Images: d.Images, User: d.User, Tmp: d.Tmp, Pool: -1}
	defer dt.Close()
	eng.Tiers = append([]codecell.Tier{nt, dt}, eng.Tiers...)
	if want := cmp.Or(f.tier, eng.Tier); want == "" || want == "auto" || want == native.Name {
		nt.BuildAhead(eng.InitBinary())
	}
	if len(f.interpreters) > 0 {
		merged := map[string]string{}
		for k, v := range eng.Interpreters {
			merged[k] = v
		}
		for k, v := range f.interpreters {
			merged[k] = v
		}
		eng.Interpreters = merged
	}
	lim, err := f.limits()
	if err != nil {
		fmt.Fprintf(m.Stderr, "codecell run: %v\n", err)
		return exitUsage
	}
	file, progArgs := fs.Arg(0), fs.Args()[1:]
	m.noteFlagsAfterFile(fs, args, progArgs)
	src, err := m.readSource(file)
	if err != nil {
		fmt.Fprintf(m.Stderr, "codecell run: %v\n", err)
		return exitUsage
	}
	policy, err := f.guard.guard()
	if err != nil {
		fmt.Fprintf(m.Stderr, "codecell run: %v\n", err)
		return exitUsage
	}
	base := codecell.Exec{
		Tier:      f.tier,
		Workspace: f.workspace,
		Limits:    lim,
		Args:      progArgs,
		Policy:    codecell.Policy{Guard: policy, Network: f.network()},
	}
	if !f.json {
		base.Stdout, base.Stderr = m.setupTerminal(f.rawOutput)
		defer m.flushTerminal()
	}
	// Calls a rule says a person must approve are asked at the terminal.
	base.Approver = m.approver()
	if f.markdown {
		return m.runMarkdown(ctx, &eng, string(src), f, base)
	}

	x := base
	x.Code = string(src)
	x.Language = f.lang
	if file != "-" {
		x.Filename = filepath.Base(file)
		// Standard input stays the program's when the code came from a file.
		x.Stdin = m.Stdin
	}
	if x.Language == "" {
		if l := lang.ForFile(x.Filename, x.Code); l != nil {
			x.Language = l.Name
		} else {
			x.Language = "?"
		}
	}
	if x.Language == "?" {
		fmt.Fprintf(m.Stderr, "codecell run: cannot tell the language of %s; pass --lang (one of %s)\n", file, strings.Join(lang.Names(), ", "))
		if strings.EqualFold(filepath.Ext(file), ".json") {
			fmt.Fprintf(m.Stderr, "codecell run: a configuration file is given with --config: codecell run --config %s PROGRAM\n", file)
		}
		return exitBlocked
	}
	x.Packages = f.packagesFor(x.Language)
	res, err := eng.Run(ctx, &x)
	if err != nil {
		return m.interrupted(err)
	}
	if f.json {
		m.printJSON(res)
	} else {
		m.flushTerminal()
		m.explain(res)
	}
	return exitCode(res)
}

// markdownResult is one block's entry in the --json output of
// --from-markdown.
type markdownResult struct {
	Block    int              `json:"block"`
	Line     int              `json:"line"`
	Language string           `json:"language"`
	Result   *codecell.Result `json:"result"`
}

// runMarkdown runs each fenced block on its own: a block's failure does not
// stop the next one. It exits 0 when all succeeded, else with the code of the
// first that did not.
func (m *Main) runMarkdown(ctx context.Context, eng *codecell.Engine, text string, f runFlags, base codecell.Exec) int {
	var blocks []codeblock.Block
	for _, b := range codeblock.Extract(text) {
		if b.Language == "" && b.Unlabelled() {
			b.Language = f.lang
			if l := lang.ForFile("", b.Code); b.Language == "" && l != nil {
				b.Language = l.Name
			}
			if b.Language == "" {
				// What code-mode agents do with an unlabelled block.
				b.Language = "python"
			}
		}
		if b.Language != "" {
			blocks = append(blocks, b)
		}
	}
	if len(blocks) == 0 {
		fmt.Fprintln(m.Stderr, "codecell run: the markdown holds no fenced code block in a language codecell runs (```python, ```js, ```ts, ```bash, ```sh)")
		return exitBlocked
	}
	code := 0
	var all []markdownResult
	for i, b := range blocks {
		x := base
		x.Language, x.Code = b.Language, b.Code
		x.Packages = f.packagesFor(b.Language)
		if !f.json {
			m.note("block %d of %d (%s, line %d)", i+1, len(blocks), b.Language, b.Line)
		}
		res, err := eng.Run(ctx, &x)
		if err != nil {
			return m.interrupted(err)
		}
		if f.json {
			all = append(all, markdownResult{Block: i + 1, Line: b.Line, Language: b.Language, Result: res})
		} else {
			m.flushTerminal()
			m.explain(res)
		}
		if c := exitCode(res); code == 0 && c != 0 {
			code = c
		}
	}
	if f.json {
		m.printJSON(all)
	}
	return code
}

func (m *Main) interrupted(err error) int {
	m.note("interrupted: %v", err)
	return exitSignal
}

func (m *Main) printJSON(v any) {
	enc := json.NewEncoder(m.Stdout)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		fmt.Fprintf(m.Stderr, "codecell: %v\n", err)
	}
}

// explain tells a person at a terminal what the program's own output does
// not: why it was stopped or refused, the warnings, and its return value.
func (m *Main) explain(res *codecell.Result) {
	if res.StdoutTruncated {
		m.note("stdout was truncated at the output limit")
	}
	if e := res.Error; e != nil && res.Status != codecell.StatusFailure {
		m.note("%s: %s", res.Status, e.Message)
		for _, h := range e.Hints {
			if m.tty != nil && m.tty.mark {
				m.note("  hint: %s", h)
			} else {
				fmt.Fprintf(m.Stderr, "  hint: %s\n", h)
			}
		}
	}
	for _, w := range res.Warnings {
		m.note("warning: %s", w)
	}
	if len(res.Value) > 0 {
		m.note("value: %s", res.Value)
	}
	if res.Status == codecell.StatusFailure {
		// An exit status the program chose, which codecell also exits with
		// for a reason of its own.
		code := exitCode(res)
		if why, ok := ownExits[code]; ok {
			m.note("the program itself exited with %d, which codecell also exits with when %s; --json tells the two apart", code, why)
		}
	}
}

// ownExits are the exit codes codecell run exits with for a reason of its
// own, which a program may also choose.
var ownExits = map[int]string{
	exitTimeout:  "the time limit ends a program",
	exitMemory:   "the memory limit ends a program",
	exitBlocked:  "it refuses a program before running it",
	exitInternal: "it fails itself",
}

// exitCode maps a Result to the process exit code.
func exitCode(res *codecell.Result) int {
	switch res.Status {
	case codecell.StatusSuccess:
		return 0
	case codecell.StatusFailure:
		if res.ExitCode > 0 && res.ExitCode < 256 {
			return res.ExitCode
		}
		return 1
	case codecell.StatusTimeout:
		return exitTimeout
	case codecell.StatusMemoryLimit:
		return exitMemory
	case codecell.StatusBlocked:
		return exitBlocked
	}
	return exitInternal
}

func (f runFlags) limits() (codecell.Limits, error) {
	lim := codecell.Limits{CodeSize: runCodeSize}
	if f.timeout != "" {
		d, err := config.ParseDuration(f.timeout)
		if err != nil {
			return lim, err
		}
		lim.Timeout = d
	}
	if f.memory != "" {
		n, err := config.ParseSize(f.memory)
		if err != nil {
			return lim, err
		}
		lim.Memory = n
	}
	if f.cpus < 0 {
		return lim, fmt.Errorf("--cpus %g must not be negative", f.cpus)
	}
	lim.CPU = f.cpus
	return lim, nil
}

// readSource reads a program from its file, or from standard input for -.
func (m *Main) readSource(file string) ([]byte, error) {
	if file == "-" {
		return io.ReadAll(m.Stdin)
	}
	return os.ReadFile(file)
}

// checkMount refuses a mount (--mount, or the configuration's mounts)
// the sandbox could not show: what the caller asked for is to change, not
// to retry.
func checkMount(dir string) error {
	info, err := os.Stat(dir)
	switch {
	case err != nil:
		return fmt.Errorf("%s: %v; give a directory that exists on this host", dir, errors.Unwrap(err))
	case !info.IsDir():
		return fmt.Errorf("%s is not a directory; a mount shows a directory (give the directory that holds it)", dir)
	}
	if err := unix.Access(dir, unix.R_OK|unix.X_OK); err != nil {
		return fmt.Errorf("%s cannot be read by codecell (%v); make it readable, or mount another directory", dir, err)
	}
	return nil
}

// noteFlagsAfterFile says, on stderr, that a flag of codecell run's own
// written after FILE went to the program as an argument (codecell run
// prog.py --json), which is easy to mean otherwise. A "--" before FILE says
// that the arguments are the program's, and silences the note.
func (m *Main) noteFlagsAfterFile(fs *flag.FlagSet, args, progArgs []string) {
	if slices.Contains(args[:len(args)-len(progArgs)], "--") {
		return
	}
	for _, a := range progArgs {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name == "" || fs.Lookup(name) == nil {
			continue
		}
		fmt.Fprintf(m.Stderr, "codecell: note: %s comes after the program's file, so it is the program's argument, not codecell's; put codecell's flags before the file (or -- before the file to pass them on without this note)\n", a)
		return
	}
}
