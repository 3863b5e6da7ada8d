package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/codecell-dev/codecell/config"
)

// The Engine the binary builds from a configuration file: its tier,
// interpreters and policies as the file says, and a source per upstream
// server, none started until used.
func TestEngineOf(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.json")
	if err := os.WriteFile(p, []byte(`{"tier": "native", "interpreters": {"py": "/usr/bin/python3"},
  "tools": {"deny": ["everything.get-env"]}, "guard": {"block": ["network"]},
  "mcpServers": {"everything": {"command": "npx", "args": ["-y", "x"]}, "b": {"url": "https://example.com/mcp"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	eng, closeFn, err := engineOf(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	if eng.Tier != "native" || eng.Interpreters["py"] != "/usr/bin/python3" || eng.Policy.Tools.Permits("everything.get-env") || !eng.Policy.Guard.Blocks("network") {
		t.Errorf("engine %+v", eng)
	}
	tools, waiting := eng.Tools.Available(t.Context())
	if len(tools) != 0 || len(waiting) != 2 || waiting[0].Name != "b" || waiting[1].Name != "everything" || waiting[0].State != "idle" {
		t.Errorf("tools %v, sources %+v", tools, waiting)
	}
}
