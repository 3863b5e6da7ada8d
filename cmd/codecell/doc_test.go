package main

import (
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

// The package comment lists every command the usage names, so that
// go doc and the usage agree.
func TestPackageDocListsEveryCommand(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	doc := map[string]bool{}
	for _, line := range strings.Split(f.Doc.Text(), "\n") {
		if name := command(line); name != "" {
			doc[name] = true
		}
	}
	n := 0
	for _, line := range strings.Split(usage, "\n") {
		if !strings.HasPrefix(line, "  codecell ") {
			continue // the usage's commands are indented
		}
		name := command(line)
		if name == "" {
			continue
		}
		n++
		if !doc[name] {
			t.Errorf("the package comment does not list %q", name)
		}
	}
	if n < 10 {
		t.Fatalf("found %d commands in the usage", n)
	}
}

// command is the command a line names, "codecell bench load", up to its
// first flag or argument; "" for a line that names none.
func command(line string) string {
	fields := strings.Fields(line)
	if len(fields) == 0 || fields[0] != "codecell" {
		return ""
	}
	name := fields[0]
	for _, f := range fields[1:] {
		if f == "" || f[0] < 'a' || f[0] > 'z' {
			break
		}
		name += " " + f
		if len(strings.Fields(name)) == 3 {
			break
		}
	}
	return name
}
