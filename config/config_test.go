package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codecell-dev/codecell"
)

func TestParse(t *testing.T) {
	c, err := Parse([]byte(`{
  "tier": "native",
  "limits": {"timeout": "10s", "memory": "256M", "processes": 64, "cpus": 0.5, "tool_calls": 50,
             "tool_timeout": 5, "workspace": "64MiB", "value": 4096},
  "interpreters": {"py": "/usr/bin/python3"},
  "mounts": ["/opt/node"],
  "tools": {"allow": ["everything.*"], "deny": ["everything.get-env"]},
  "guard": {"block": ["network"], "allowed_imports": ["json", "math"], "allowed_commands": ["ls", "grep *"]},
  "mcp": {"prompt_budget_tokens": 3000},
  "mcpServers": {"everything": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything"]}},
  "docker": {"image": "codecell:1", "images": {"python": "py:3"}, "host": "unix:///run/podman/podman.sock", "user": "1000:1000", "tmp": "64M"}
}`))
	if err != nil {
		t.Fatal(err)
	}
	want := codecell.Limits{Timeout: 10 * time.Second, Memory: 256 << 20, Processes: 64, CPU: 0.5, ToolCalls: 50,
		ToolTimeout: 5 * time.Second, Workspace: 64 << 20, Value: 4096}
	if got := c.Limits.Codecell(); got != want {
		t.Errorf("limits %+v, want %+v", got, want)
	}
	if c.Tier != "native" || c.Interpreters["py"] != "/usr/bin/python3" || !c.Tools.Permits("everything.echo") || c.Tools.Permits("everything.get-env") {
		t.Errorf("config %+v", c)
	}
	if g := c.Guard; g == nil || !g.Blocks("network") || g.Blocks("process") || len(g.AllowedImports) != 2 || !g.CommandAllowed("grep -n x") || g.CommandAllowed("rm x") {
		t.Errorf("guard %+v", c.Guard)
	}
	if d := c.Docker; d == nil || d.Image != "codecell:1" || d.Images["python"] != "py:3" || d.User != "1000:1000" || d.Tmp != 64<<20 || d.Host != "unix:///run/podman/podman.sock" {
		t.Errorf("docker %+v", c.Docker)
	}
	if s := c.Servers["everything"]; s.Command != "npx" {
		t.Errorf("servers %+v", c.Servers)
	}
	if c.MCP.PromptBudgetTokens != 3000 {
		t.Errorf("mcp %+v", c.MCP)
	}
}

func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct{ json, want string }{
		{`{"tiers": "native"}`, "tiers is not a field of the configuration; did you mean tier?"},
		{`{"limits": {"timeout": "soon"}}`, "not a positive duration"},
		{`{"limits": {"memory": "lots"}}`, "not a size"},
		{`{"limits": {"processes": -1}}`, "negative"},
		{`{"interpreters": {"cobol": "/bin/true"}}`, "not a language"},
		{`{"mounts": ["relative/dir"]}`, "absolute"},
		{`{"mcpServers": {"bad name!": {"command": "x"}}}`, "bad name!"},
		{`{"mcpServers": {"both": {"command": "x", "url": "https://x"}}}`, "both"},
		{`not json`, "not a codecell configuration"},
		{`{"guard": {"block": ["networking"]}}`, "unknown guardrail category"},
		{`{"guard": {"allowed_imports": ["os/path"]}}`, "dotted Python module name"},
		{`{"mcp": {"prompt_budget_tokens": 100}}`, "mcp.prompt_budget_tokens: 100 is too small: give at least 500"},
		{`{"mcp": {"prompt_budget_tokens": -5}}`, "or -1 for no bound"},
		{`{"mcp": {"prompt_budget": 2000}}`, "mcp.prompt_budget is not a field"},
		{`{"guard": {"bock": ["network"]}}`, "guard.bock is not a field of the configuration; did you mean guard.block?"},
		{`{"docker": {"user": "0:0"}}`, "docker.user: \"0:0\" is root"},
		{`{"docker": {"user": "nobody"}}`, "in numbers"},
		{`{"docker": {"images": {"cobol": "x"}}}`, "docker.images: \"cobol\" is not a language"},
		{`{"docker": {"host": "/run/docker.sock"}}`, "unix:///path/to/socket"},
		{`{"docker": {"imag": "x"}}`, "docker.imag is not a field"},
		{`{"packages": {"ruby": ["rails"]}}`, `packages: packages for "ruby"`},
		{`{"packages": {"python": ["--index-url=https://evil.test"]}}`, "not a Python requirement"},
		{`{"packages_python_index": "http://pypi.internal/simple"}`, "packages_python_index: \"http://pypi.internal/simple\" is not an https:// URL"},
		{`{"packages_python_wheels": "wheels"}`, "packages_python_wheels: \"wheels\" is not an absolute path"},
		{`{"packages_python_wheels": "/srv/wheels", "packages_python_index": "https://pypi.org/simple"}`, "give one"},
	} {
		if _, err := Parse([]byte(tc.json)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.json, err, tc.want)
		}
	}
}

func TestSizesAndDurations(t *testing.T) {
	for s, want := range map[string]int64{"512M": 512 << 20, "1G": 1 << 30, "64KiB": 64 << 10, "100": 100, "1.5m": 3 << 19} {
		if got, err := ParseSize(s); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for s, want := range map[string]time.Duration{"30s": 30 * time.Second, "2m": 2 * time.Minute, "90": 90 * time.Second, "0.5": 500 * time.Millisecond} {
		if got, err := ParseDuration(s); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "-1", "0", "soon"} {
		if _, err := ParseDuration(s); err == nil {
			t.Errorf("ParseDuration(%q) should fail", s)
		}
	}
}

// A configuration that cannot be read says where and what to change: the
// line and column, the field's path, the field meant.
func TestConfigErrorsSayWhere(t *testing.T) {
	for _, c := range []struct{ name, json, want string }{
		{"unknown field", "{\n  \"limits\": {\n    \"timout\": \"5s\"\n  }\n}\n", "line 3, column 5: limits.timout is not a field of the configuration; did you mean limits.timeout?"},
		{"unknown top-level field", `{"tier": "native", "sever": {}}`, "line 1, column 20: sever is not a field of the configuration; did you mean server?"},
		{"unknown server field", `{"mcpServers": {"gh": {"command": "x", "evn": {}}}}`, "mcpServers.gh.evn is not a field"},
		{"syntax", "{\n  \"limits\": {\"timeout\": \"5s\",\n  }\n}\n", "line 3, column 3: not a codecell configuration: the file is not valid JSON"},
		{"truncated", "{\"limits\": {\"timeout\": \"5s\"}\n", "line 2, column 1: not a codecell configuration: the file ends inside its JSON"},
		{"two objects", "{}\n {\"tier\": \"native\"}", "line 2, column 2: more follows the configuration's object"},
		{"type", `{"limits": {"processes": "many"}}`, "line 1, column 26: limits.processes must be a whole number, not a string"},
		{"type in a map", "{\"mcpServers\": {\n  \"gh\": {\"command\": 5}}}", "line 2, column 21: mcpServers.gh.command must be a string, not a number"},
		{"list", `{"tools": {"allow": "x"}}`, "line 1, column 21: tools.allow must be a list ([...]), not a string"},
		{"duration", "{\n \"limits\": {\"timeout\": \"soon\"}\n}\n", `line 2, column 24: limits.timeout: "soon" is not a positive duration`},
		{"size", `{"server": {"max_limits": {"memory": "lots"}}}`, `line 1, column 38: server.max_limits.memory: "lots" is not a size`},
		{"auth", `{"tier": "native", "auth": {"tokens": [42]}}`, `line 1, column 28: auth.tokens: token 1 is not a string or`},
		{"no value in the message", `{"auth": {"tokens": [{"name": "a", "token": 123456789}]}}`, "auth.tokens: token 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.json))
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "123456789") {
				t.Fatalf("got %v, want %q", err, c.want)
			}
		})
	}
}

// A ${VAR} an upstream server's config needs is checked when the file is
// loaded, not when a program first calls the server's tools.
func TestUnsetVariableAtLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "codecell.json")
	if err := os.WriteFile(path, []byte(`{"mcpServers": {"gh": {"command": "x", "env": {"T": "${CODECELL_TEST_UNSET_VAR}", "U": "${CODECELL_TEST_UNSET_VAR2:-fallback}"}}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if err == nil || !strings.Contains(err.Error(), "${CODECELL_TEST_UNSET_VAR}") || !strings.Contains(err.Error(), "mcpServers.gh") || strings.Contains(err.Error(), "VAR2") {
		t.Fatalf("got %v", err)
	}
	t.Setenv("CODECELL_TEST_UNSET_VAR", "set")
	if _, err := Load(path); err != nil {
		t.Fatalf("with the variable set: %v", err)
	}
}

func TestParsePackages(t *testing.T) {
	c, err := Parse([]byte(`{"packages": {"python": ["humanize==4.9.0"], "js": ["lodash@4.17.21"]},
  "packages_python_wheels": "/srv/wheels", "packages_npm_registry": "https://npm.internal/",
  "packages_network": ["10.0.0.0/8"], "packages_cache_dir": "/var/cache/cc", "packages_timeout": "2m",
  "packages_ca_file": "/etc/codecell/ca.pem"}`))
	if err != nil {
		t.Fatal(err)
	}
	src := c.PackageSources()
	if src.PythonWheels != "/srv/wheels" || src.NPMRegistry != "https://npm.internal/" || src.CacheDir != "/var/cache/cc" ||
		src.Timeout != 2*time.Minute || src.CAFile != "/etc/codecell/ca.pem" || len(src.Network) != 1 || src.Base["python"][0] != "humanize==4.9.0" || src.Base["js"][0] != "lodash@4.17.21" {
		t.Fatalf("%+v", src)
	}
}
