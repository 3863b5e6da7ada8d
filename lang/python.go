package lang

import (
	_ "embed"
	"path"
	"strings"
)

//go:embed runner/python.py
var pythonRunner []byte

var python = &Language{
	Name:        "python",
	Aliases:     []string{"py", "python3", "py3"},
	Extensions:  []string{".py"},
	Interpreter: "/usr/bin/python3",
	Returns:     true,
	prepare:     preparePython,
	outOfMemory: func(stderr string) bool {
		return strings.Contains(stderr, "\nMemoryError") || strings.HasPrefix(stderr, "MemoryError")
	},
}

func preparePython(src *Source, v View) (*Program, error) {
	cfg := runnerConfig{
		Source:     path.Join(v.Runner, "src", src.Filename),
		Filename:   src.Filename,
		Workspace:  v.Workspace,
		Args:       src.Args,
		ValueFD:    src.ValueFD,
		ValueLimit: src.ValueLimit,
	}
	return &Program{
		Files: map[string][]byte{
			"runner.py":           pythonRunner,
			"config.json":         cfg.json(),
			"src/" + src.Filename: []byte(src.Code),
		},
		// -I: ignore PYTHON* variables and the user's site directory, and
		// keep the runner's directory off sys.path. -B: no .pyc files in the
		// workspace.
		Argv: []string{src.Interpreter, "-I", "-B", path.Join(v.Runner, "runner.py"), path.Join(v.Runner, "config.json")},
	}, nil
}
