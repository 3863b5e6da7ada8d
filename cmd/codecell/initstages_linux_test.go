package main

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/codecell-dev/codecell"
)

// heavyInit are the import paths of the libraries whose package
// initialisers the sandbox's init must not pay: a re-executed init runs
// on the path of every sandbox built, twice.
var heavyInit = []string{
	"modelcontextprotocol", "prometheus", "distribution/reference", "go-digest", "jsonschema",
	"google.golang.org/protobuf", "dop251/goja", "evanw/esbuild", "encoding/gob", "github.com/moby/",
	"mvdan.cc/sh",
}

// initBeforeAnyStage are the few of them Go initialises before the
// sandbox's init can run, whatever it imports. Go initialises a package
// once all it imports are, and among those ready the first by import
// path: these import only what every program needs (os, reflect) and
// sort before the standard library's strconv, sort and the rest that
// golang.org/x/sys/unix, which init needs, imports. Each is cheap.
var initBeforeAnyStage = map[string]bool{
	"encoding/gob":                                               true,
	"github.com/dop251/goja/token":                               true,
	"google.golang.org/protobuf/internal/detrand":                true,
	"google.golang.org/protobuf/internal/errors":                 true,
	"google.golang.org/protobuf/encoding/protowire":              true,
	"github.com/modelcontextprotocol/go-sdk/internal/mcpgodebug": true,
}

// The sandbox's init stages run before this binary's heavy libraries are
// initialised (internal/sandboxinit). Each stage is started here as the
// tier starts it, with a descriptor that is no control socket: it ends at
// once, and GODEBUG=inittrace=1 has listed every package initialised
// before it.
func TestInitStagesSkipHeavyInitialisers(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, argv := range [][]string{
		{"native", "99"},
		{"native-run", "99", "", "", "1000", "-1", "", "-1", ""},
	} {
		t.Run(argv[0], func(t *testing.T) {
			cmd := exec.Command(exe, argv...)
			cmd.Args[0] = codecell.InitArg0
			cmd.Env = []string{"GODEBUG=inittrace=1"}
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 125 {
				t.Fatalf("the stage with a bad descriptor: %v, want exit status 125\n%s", err, out)
			}
			var inits []string
			for _, line := range strings.Split(string(out), "\n") {
				if f := strings.Fields(line); len(f) > 2 && f[0] == "init" && strings.HasPrefix(f[2], "@") {
					inits = append(inits, f[1])
				}
			}
			if len(inits) == 0 || inits[0] != "internal/bytealg" && inits[0] != "runtime" {
				t.Fatalf("no initialiser traced:\n%s", out)
			}
			for _, p := range inits {
				for _, heavy := range heavyInit {
					if strings.Contains(p, heavy) && !initBeforeAnyStage[p] {
						t.Errorf("%s was initialised before the init stage ran", p)
					}
				}
			}
			t.Logf("%d packages initialised before the stage", len(inits))
		})
	}
}
