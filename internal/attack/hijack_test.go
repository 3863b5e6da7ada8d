package attack_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codecell-dev/codecell"
)

// attackRunnerHijack: modules a program left in its workspace (a session's,
// or a --workspace directory) under the names of the modules the runner
// uses, and of the files Python loads at start, must never become the
// runner's. Each planted module, if imported, writes a marker beside itself
// and would forge the value. The next programs there are checked and run as
// if the files were not there: a refused program stays refused, a value is
// the program's own, and no marker appears.
func attackRunnerHijack(t *testing.T) {
	requireNative(t)
	ws := filepath.Join(hostTempDir(t), "ws")
	if err := os.Mkdir(ws, 0o777); err != nil {
		t.Fatal(err)
	}
	planted := []string{"json", "traceback", "linecache", "asyncio", "threading", "tempfile", "shutil", "importlib",
		"re", "tokenize", "sitecustomize", "usercustomize", "site", "os", "codecs", "encodings", "abc", "io", "enum", "types", "functools"}
	for _, name := range planted {
		src := "open(__file__ + '.imported', 'w').write('x')\n"
		if err := os.WriteFile(filepath.Join(ws, name+".py"), []byte(src), 0o666); err != nil {
			t.Fatal(err)
		}
	}
	markers := func() []string {
		var found []string
		entries, _ := os.ReadDir(ws)
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".imported") {
				found = append(found, e.Name())
			}
		}
		return found
	}
	// A program the guardrails refuse is refused, before anything of the
	// workspace could load.
	res, err := engine.Run(context.Background(), &codecell.Exec{Tier: "native", Language: "python", Workspace: ws,
		Code: "import subprocess\nsubprocess.run(['true'])\n6 * 7\n", Policy: codecell.Policy{Guard: &codecell.GuardPolicy{Block: []string{"process"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != codecell.StatusBlocked || res.Error == nil || res.Error.Code != codecell.CodeGuardrailBlocked {
		t.Errorf("a refused program with planted modules: %s", describe(res))
	}
	for _, c := range []struct{ name, code, value string }{
		{"a value", "6 * 7\n", "42"},
		{"await", "import asyncio\nawait asyncio.sleep(0)\n6 * 7\n", "42"},
		{"threads", "import threading\nt = threading.Thread(target=lambda: None)\nt.start()\nt.join()\n{'n': 6 * 7}\n", `{"n":42}`},
	} {
		res := run(t, codecell.Exec{Workspace: ws, Code: c.code})
		if res.Status != codecell.StatusSuccess || strings.ReplaceAll(string(res.Value), " ", "") != c.value {
			t.Errorf("%s with planted modules: %s", c.name, describe(res))
		}
	}
	// A tool call and a failure use json, threading and traceback.
	res = run(t, codecell.Exec{Workspace: ws, Code: "call_tool_sync('no-such-tool', {})\n"})
	if res.Status != codecell.StatusFailure || res.Error == nil || res.Error.Code != "TOOL_NOT_FOUND" || !strings.Contains(res.Stderr, "Traceback") {
		t.Errorf("a failing tool call with planted modules: %s", describe(res))
	}
	// Node: files and packages named after the modules the runner and a
	// program require, and a package.json that would change how modules
	// load. The runner requires node:-prefixed built-ins only; a program's
	// require of a built-in gets the built-in.
	nodeSrc := []byte("require('node:fs').writeFileSync(__filename + '.imported', 'x')\n")
	for _, name := range []string{"fs", "path", "vm", "util", "net", "url", "module", "child_process", "worker_threads"} {
		if err := os.WriteFile(filepath.Join(ws, name+".js"), nodeSrc, 0o666); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(ws, "node_modules", name)
		if err := os.MkdirAll(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "index.js"), nodeSrc, 0o666); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ws, "package.json"), []byte(`{"type":"module","main":"fs.js","imports":{"#fs":"./fs.js"}}`), 0o666); err != nil {
		t.Fatal(err)
	}
	res, err = engine.Run(context.Background(), &codecell.Exec{Tier: "native", Language: "javascript", Workspace: ws,
		Code: "require('child_process').execSync('true');\n42\n", Policy: codecell.Policy{Guard: &codecell.GuardPolicy{Block: []string{"process"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != codecell.StatusBlocked || res.Error == nil || res.Error.Code != codecell.CodeGuardrailBlocked {
		t.Errorf("a refused JavaScript program with planted modules: %s", describe(res))
	}
	res = run(t, codecell.Exec{Language: "javascript", Workspace: ws,
		Code: "const fs = require('fs'), path = require('path'), util = require('util');\nawait new Promise(r => setTimeout(r, 1));\n[typeof fs.readFileSync, path.sep, typeof util.inspect]\n"})
	if res.Status != codecell.StatusSuccess || strings.ReplaceAll(string(res.Value), " ", "") != `["function","/","function"]` {
		t.Errorf("JavaScript with planted modules: %s", describe(res))
	}
	res = run(t, codecell.Exec{Language: "javascript", Workspace: ws, Code: "await callTool('no-such-tool', {});\n"})
	if res.Status != codecell.StatusFailure || res.Error == nil || res.Error.Code != "TOOL_NOT_FOUND" {
		t.Errorf("a failing JavaScript tool call with planted modules: %s", describe(res))
	}
	if found := markers(); len(found) > 0 {
		t.Errorf("planted modules were imported: %v", found)
	}
	if found, _ := filepath.Glob(filepath.Join(ws, "node_modules", "*", "*.imported")); len(found) > 0 {
		t.Errorf("planted packages were required: %v", found)
	}
}
