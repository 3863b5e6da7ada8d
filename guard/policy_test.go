package guard

import (
	"reflect"
	"strings"
	"testing"
)

func TestImportAllowed(t *testing.T) {
	p := &Policy{AllowedImports: []string{"json", "os.path", "numpy"}, BlockedImports: []string{"numpy.ctypeslib"}}
	for mod, want := range map[string]string{
		"json": "", "json.decoder": "", "os.path": "", "os": "imports.not_allowed", "osx": "imports.not_allowed",
		"numpy": "", "numpy.linalg": "", "numpy.ctypeslib": "imports.blocked", "jsonx": "imports.not_allowed",
	} {
		ok, rule := p.ImportAllowed(mod)
		if ok != (want == "") || rule != want {
			t.Errorf("%s: %v %q, want %q", mod, ok, rule, want)
		}
	}
	if ok, _ := (*Policy)(nil).ImportAllowed("socket"); !ok {
		t.Error("a nil policy refused an import")
	}
	if ok, rule := (&Policy{AllowedImports: []string{}}).ImportAllowed("json"); ok || rule != "imports.not_allowed" {
		t.Error("an empty allow-list allowed an import")
	}
}

func TestCommandAllowed(t *testing.T) {
	p := &Policy{AllowedCommands: []string{"ls", "git  status*", "grep *", "python3 -c ?"}}
	for cmd, want := range map[string]bool{
		"ls": true, "ls -la /tmp": true, "lsof": false, "git status": true, "git status --short": true,
		"git push": false, "grep -n x file": true, "grep": false, "python3 -c x": true, "python3 -c xy": false,
		"rm -rf x": false,
	} {
		if got := p.CommandAllowed(cmd); got != want {
			t.Errorf("%q: %v, want %v", cmd, got, want)
		}
	}
	if !(&Policy{}).CommandAllowed("anything") {
		t.Error("no AllowedCommands refused a command")
	}
}

func TestNarrow(t *testing.T) {
	wide := &Policy{Block: []string{Network}, AllowedImports: []string{"json", "os"}, AllowedCommands: []string{"git *", "ls"}}
	narrow := &Policy{Block: []string{Process, Network}, AllowedImports: []string{"os.path", "socket"}, BlockedImports: []string{"pickle"},
		AllowedCommands: []string{"git status", "ls -l", "rm x"}}
	got := Narrow(wide, narrow)
	want := &Policy{Block: []string{Network, Process}, AllowedImports: []string{"os.path"}, BlockedImports: []string{"pickle"},
		AllowedCommands: []string{"git status", "ls -l"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Narrow = %+v\nwant %+v", got, want)
	}
	// A narrower layer can never allow what the wider one refuses.
	for _, mod := range []string{"socket", "json", "os", "os.path.x"} {
		wok, _ := wide.ImportAllowed(mod)
		nok, _ := narrow.ImportAllowed(mod)
		if gok, _ := got.ImportAllowed(mod); gok && !(wok && nok) {
			t.Errorf("%s allowed by the narrowed policy but not by both layers", mod)
		}
	}
	// Nothing in common allows nothing.
	none := Narrow(&Policy{AllowedImports: []string{"json"}}, &Policy{AllowedImports: []string{"socket"}})
	if ok, _ := none.ImportAllowed("socket"); ok || none.AllowedImports == nil {
		t.Errorf("disjoint allow-lists narrowed to %+v", none)
	}
	noCommands := Narrow(&Policy{AllowedCommands: []string{"ls"}}, &Policy{AllowedCommands: []string{"rm *"}})
	if noCommands.CommandAllowed("rm x") || noCommands.AllowedCommands == nil {
		t.Errorf("disjoint command patterns narrowed to %+v", noCommands)
	}
	if Narrow(wide, nil) != wide || Narrow(nil, narrow) != narrow {
		t.Error("narrowing with an empty layer changed the policy")
	}
}

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		p    Policy
		want string
	}{
		{Policy{Block: []string{"networking"}}, "unknown guardrail category"},
		{Policy{AllowedImports: []string{""}}, "module name"},
		{Policy{BlockedImports: []string{"os/path"}}, "module name"},
		{Policy{AllowedCommands: []string{" "}}, "empty"},
		{Policy{AllowedCommands: []string{"ls ["}}, "pattern"},
	} {
		if err := c.p.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error about %q", c.p, err, c.want)
		}
	}
	ok := Policy{Block: Categories, AllowedImports: []string{"os.path"}, AllowedCommands: []string{"git status*"}}
	if err := ok.Check(); err != nil {
		t.Error(err)
	}
}

func TestRunnerFile(t *testing.T) {
	if f := (&Policy{AllowedCommands: []string{"ls"}}).RunnerFile(); f != nil {
		t.Errorf("a shell-only policy gives Python a policy file: %q", f)
	}
	got := string((&Policy{Block: []string{Network}, AllowedImports: []string{}, BlockedImports: []string{"ctypes"}}).RunnerFile())
	if want := "block network\nallow_imports\nblock_import ctypes\n"; got != want {
		t.Errorf("RunnerFile = %q, want %q", got, want)
	}
}
