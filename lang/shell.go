package lang

import "path"

var bash = &Language{
	Name:        "bash",
	Aliases:     []string{"shell", "zsh"},
	Extensions:  []string{".sh", ".bash"},
	Interpreter: "/bin/bash",
	prepare:     prepareShell,
}

var sh = &Language{
	Name:        "sh",
	Aliases:     []string{"posix", "dash"},
	Extensions:  []string{".sh"},
	Interpreter: "/bin/sh",
	prepare:     prepareShell,
}

// prepareShell runs the script as a file, so that error messages name it and
// its line numbers are the user's.
func prepareShell(src *Source, v View) (*Program, error) {
	script := path.Join(v.Runner, "src", src.Filename)
	return &Program{
		Files: map[string][]byte{"src/" + src.Filename: []byte(src.Code)},
		Argv:  append([]string{src.Interpreter, script}, src.Args...),
	}, nil
}
