package lang

import (
	_ "embed"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
)

//go:embed runner/python.py
var pythonRunner []byte

var pythonRunnerDigest = sync.OnceValue(func() string { return digestOf(pythonRunner) })

var python = &Language{
	Name:        "python",
	Aliases:     []string{"py", "python3", "py3"},
	Extensions:  []string{".py"},
	Interpreter: "/usr/bin/python3",
	Returns:     true,
	prepare:     preparePython,
	live:        livePython,
	liveRuntime: "python",
	cell: func(code, _ string, _ func(string, string, bool) (string, *SyntaxError, error)) (*Cell, error) {
		return &Cell{Code: code}, nil
	},
	outOfMemory: func(stderr string) bool {
		return strings.Contains(stderr, "\nMemoryError") || strings.HasPrefix(stderr, "MemoryError")
	},
}

func preparePython(src *Source, v View) (*Program, error) {
	prog := &Program{Files: map[string][]byte{"src/" + src.Filename: []byte(src.Code)}}
	// -I: ignore PYTHON* variables and the user's site directory, and keep
	// the runner's directory off sys.path. -B: no .pyc files in the
	// workspace.
	interpreter := []string{src.Interpreter, "-I", "-B"}
	prog.Argv = slices.Clone(interpreter)
	runner, runnerName, digest := pythonRunner, "runner.py", ""
	if code := compiledRunner(src.Interpreter); code != nil {
		runner, runnerName, digest = code.runner, "runner.code", code.digest
		if src.Policy != nil || src.CheckOnly {
			// The runner loads it from beside itself.
			prog.Files["guard.code"] = code.guard
		}
		prog.Argv = append(prog.Argv, "-c", pythonBootstrap)
	}
	prog.Files[runnerName] = runner
	runnerAt := len(prog.Argv)
	prog.Argv = append(prog.Argv, path.Join(v.Runner, runnerName))
	// Options come before the positional settings, so that without them
	// the command is what it always was.
	if src.Policy != nil {
		prog.Files["policy"] = src.Policy
		prog.Argv = append(prog.Argv, "--policy", path.Join(v.Runner, "policy"))
		if blocks := policyBlocks(src.Policy); len(blocks) > 0 && !src.CheckOnly {
			prog.Runtime = "python audit hook (PEP 578): refuses the actions of " + strings.Join(blocks, ", ") + " when they happen"
		}
	}
	if src.CheckOnly {
		prog.Argv = append(prog.Argv, "--check-only")
	}
	// The runner takes its settings as arguments: parsing a file would cost
	// an import of json.
	prog.Argv = append(prog.Argv, strconv.Itoa(src.ValueFD), strconv.Itoa(src.ToolFD), strconv.Itoa(src.ValueLimit), src.Filename,
		path.Join(v.Runner, "src", src.Filename), v.Workspace)
	prog.Argv = append(prog.Argv, src.Args...)
	if digest == "" {
		digest = pythonRunnerDigest() // the runner from its source
	}
	prog.Warm = warmFor(src, v, prog.Argv, runnerAt, runnerName, runner, digest)
	if prog.Warm != nil {
		// The runner defines _codecell_forked when loaded as
		// __codecell_template__.
		prog.Warm.Fork = &Fork{Interpreter: interpreter, Runner: path.Join(v.Runner, warmDir, runnerName), Preload: pythonPreload(src.Code)}
	}
	return prog, nil
}

// livePython starts a live session's Python interpreter: the runner, loaded
// as for a program, waiting for cells (see the runner's _codecell_live).
func livePython(src LiveSource, v View) *Live {
	interp := src.Interpreter
	argv := []string{interp, "-I", "-B"}
	files := map[string][]byte{}
	runner, name := pythonRunner, "runner.py"
	if code := compiledRunner(interp); code != nil {
		runner, name = code.runner, "runner.code"
		argv = append(argv, "-c", pythonBootstrap)
		if src.Policy != nil {
			files["guard.code"] = code.guard
		}
	}
	files[name] = runner
	argv = append(argv, path.Join(v.Runner, name), "--live", strconv.Itoa(src.ControlFD), strconv.Itoa(src.ToolFD), v.Workspace)
	live := &Live{Files: files}
	if src.Policy != nil {
		files["policy"] = src.Policy
		argv = append(argv, path.Join(v.Runner, "policy"))
		if blocks := policyBlocks(src.Policy); len(blocks) > 0 {
			live.Guard = "python audit hook (PEP 578): refuses the actions of " + strings.Join(blocks, ", ") + " when they happen"
		}
	}
	live.Argv = argv
	return live
}

// pythonPreload is what a fork server's template imports for this program
// besides the runner's own: asyncio (with ssl, some 5 MB of the template's
// memory, which every child it forks copies the page tables of and tears
// down) only for a program that may await, as every program that calls a
// tool does; its import would cost the run some 15 ms. A program that
// names neither await nor async forks from the template without it, and
// one that still imports asyncio (through a library) imports it itself.
func pythonPreload(code string) []string {
	if strings.Contains(code, "await") || strings.Contains(code, "async") {
		return []string{"asyncio"}
	}
	return nil
}
