// Command codecell runs code that an AI model wrote in a sandbox, and lets
// that code call the host's tools.
//
//	codecell run [flags] FILE|- [ARGS…]   run one program (or, with --remote, on a codecell serve)
//	codecell check [flags] FILE|-         check a program against the guardrails, without running it
//	codecell tools [--ts|--py|--json]     the tools programs may call, typed
//	codecell doctor [--json]              what this host offers, and which tier auto picks
//	codecell bench [--runs N]             what the sandbox costs, against bare interpreters
//	codecell bench load [flags]           load the HTTP service; check nothing is left
//	codecell bench side [flags]           the library, REST and MCP beside bare interpreters and go-judge
//	codecell bench live [--runs N]        a live session's cell against a one-shot run
//	codecell bench prompt [flags]         codecell's tools/list against the upstream servers' own
//	codecell bench codemode [--runs N]    tasks done by direct tool calls and by one program
//	codecell mcp [flags]                  serve MCP over stdio
//	codecell serve [flags]                the HTTP service: REST at /v1, MCP at /mcp, /metrics
//	codecell version                      print the version
//
// Each command's -h gives its flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/instdir"
	_ "github.com/codecell-dev/codecell/tier/local"
	_ "github.com/codecell-dev/codecell/tier/native"
)

// Exit codes of codecell itself, as timeout(1) and docker run use them. A
// program that ran exits with its own code.
const (
	exitUsage    = 2   // bad flags or arguments
	exitInternal = 125 // codecell itself failed
	exitBlocked  = 126 // the program was refused before running
	exitTimeout  = 124 // the time limit ended the program
	exitMemory   = 137 // the memory limit ended the program
	exitSignal   = 130 // codecell was interrupted
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	// First: in a re-executed sandbox init this never returns.
	codecell.Init()
	if len(os.Args) > 1 {
		setGCPercent(os.Args[1])
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	m := &Main{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Engine: &codecell.Engine{}}
	code := m.Run(ctx, os.Args[1:])
	// Last: the process's own temporary directory (on /dev/shm), which a
	// killed process leaves for the next one to remove, goes with a process
	// that ends normally. It is empty but for its lock by now (each run
	// removes its own files), so this costs a few system calls.
	_ = instdir.ReleaseProcess()
	os.Exit(code)
}

// setGCPercent sets how far the heap grows past what it keeps before Go
// collects it, for the commands that gain from a ratio other than Go's
// (100), unless GOGC is set:
//
//   - run (400): what a one-shot run allocates (the runner it reads and
//     writes into the sandbox, its control messages) reached Go's first
//     goal, 4 MB, just as the sandbox was ready for the program, and that
//     collection cost the run about 1 ms of its latency and freed nothing
//     it would have used again. A long run's heap is still collected, at
//     that ratio.
//   - serve and mcp (200): the heap a server keeps between runs is small
//     (its reads of sandboxes' control sockets hold no buffer while they
//     wait), and at Go's ratio it collected about four times as often, for
//     about 0.25 ms more CPU per run under load; at 200 the CPU is back,
//     and the memory under load stays about 10 MB under what it was.
func setGCPercent(command string) {
	percent := map[string]int{"run": 400, "serve": 200, "mcp": 200}[command]
	if _, set := os.LookupEnv("GOGC"); percent == 0 || set {
		return
	}
	debug.SetGCPercent(percent)
}

// Main is the codecell command, with its streams and engine as fields so
// that tests drive it like a user would.
type Main struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// tty is how a run here shows on a terminal (see setupTerminal).
	tty    *termOut
	Engine *codecell.Engine
}

const usage = `codecell runs code that an AI model wrote, in a sandbox.

Usage:
  codecell run [flags] FILE|- [ARGS...]   run a program and pass its output through
  codecell check [flags] FILE|-           check a program against the guardrails, without running it
  codecell mcp [--config FILE] [--log FILE]
                                          serve MCP over stdio (for Claude Desktop, Claude Code, Cursor)
  codecell serve [--addr A] [--config FILE] [--log FILE] [--state DIR]
                                          the HTTP service: the REST API at /v1, MCP at /mcp
  codecell tools [--ts|--py|--json] [--config FILE]
                                          the tools programs may call, typed
  codecell doctor [--json]                what this host offers, and which tier auto picks
  codecell bench [--runs N]               measure what the sandbox costs
  codecell bench load [--executions N] [--clients N] [--max-running N]
                                          load the HTTP service; check nothing is left
  codecell bench side [--runs N] [--clients 1,2,8] [--peer-go-judge URL]
                                          the library, REST and MCP beside bare interpreters
  codecell bench live [--runs N]          a live session's cell against a one-shot run
  codecell bench prompt [--synthetic 100,500]
                                          codecell's tools/list against the upstream servers' own
  codecell bench codemode [--runs N]      tasks done by direct tool calls and by one program
  codecell version                        print the version

Run "codecell run -h" for the flags of run.
`

// commands are the commands Run knows, for a misspelt one's suggestion.
var commands = []string{"run", "check", "bench", "doctor", "tools", "mcp", "serve", "version", "help"}

// Run runs one command line and returns the process exit code.
func (m *Main) Run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		fmt.Fprint(m.Stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "run":
		return m.run(ctx, args[1:])
	case "check":
		return m.checkCommand(ctx, args[1:])
	case "bench":
		return m.bench(ctx, args[1:])
	case "doctor":
		return m.doctor(ctx, args[1:])
	case "tools":
		return m.tools(ctx, args[1:])
	case "mcp":
		return m.mcpCommand(ctx, args[1:])
	case "serve":
		return m.serve(ctx, args[1:])
	case "version", "--version", "-v":
		fmt.Fprintf(m.Stdout, "codecell %s\n", versionString())
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(m.Stdout, usage)
		return 0
	}
	msg := fmt.Sprintf("codecell: unknown command %q", args[0])
	if near := codecell.Suggest(args[0], commands); near != "" {
		msg += fmt.Sprintf("; did you mean %q?", near)
	}
	fmt.Fprintf(m.Stderr, "%s\n\n%s", msg, usage)
	return exitUsage
}

func versionString() string {
	v := version
	if info, ok := debug.ReadBuildInfo(); ok {
		if v == "dev" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			v = info.Main.Version
		}
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += " (" + s.Value[:12] + ")"
			}
		}
	}
	return fmt.Sprintf("%s %s/%s %s", v, runtime.GOOS, runtime.GOARCH, runtime.Version())
}

// parseFlags parses a command's flags: -h prints the command's usage and
// ends it with 0, a bad flag with exitUsage, after one line that says what
// was wrong (a misspelt flag, with the flag meant) and where the flags are
// listed, rather than the whole usage, which would bury that line. ok is
// true when the command goes on.
func parseFlags(fs *flag.FlagSet, args []string) (code int, ok bool) {
	out, usage := fs.Output(), fs.Usage
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.SetOutput(out)
	fs.Usage = usage
	switch {
	case err == nil:
		return 0, true
	case errors.Is(err, flag.ErrHelp):
		if usage != nil {
			usage()
		} else {
			fmt.Fprintf(out, "Usage of %s:\n", fs.Name())
			fs.PrintDefaults()
		}
		return 0, false
	}
	fmt.Fprintf(out, "%s: %s\nRun \"%s -h\" for its flags.\n", fs.Name(), flagError(fs, err), fs.Name())
	return exitUsage, false
}

// flagError is what the flag package's err says, in this command's terms:
// a flag it does not define is named with the one meant, when one is near.
func flagError(fs *flag.FlagSet, err error) string {
	name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: ")
	if !ok {
		return err.Error()
	}
	name = strings.TrimLeft(name, "-")
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	msg := fmt.Sprintf("unknown flag --%s", name)
	if near := codecell.Suggest(name, names); near != "" {
		msg += fmt.Sprintf("; did you mean --%s?", near)
	}
	return msg
}
