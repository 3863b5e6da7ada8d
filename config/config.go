// Package config reads codecell's configuration file and builds an Engine
// from it: the tier, the limits, the interpreters, the tool policy, and the
// upstream MCP servers in the "mcpServers" shape that Claude Desktop, Claude
// Code and Cursor use, so that a user pastes what they already have.
//
//	{
//	  "tier": "auto",
//	  "limits": {"timeout": "30s", "memory": "512M", "processes": 128, "cpus": 1,
//	             "tool_calls": 30, "tool_timeout": "30s", "workspace": "1G"},
//	  "interpreters": {"python": "/usr/bin/python3"},
//	  "mounts": ["/opt/node"],
//	  "tools": {"allow": ["everything.*"], "deny": ["everything.get-env"]},
//	  "guard": {"block": ["network", "low_level_network"], "blocked_imports": ["ctypes"],
//	            "allowed_commands": ["ls", "grep *", "codecell-tool *"]},
//	  "mcpServers": {
//	    "everything": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything"]},
//	    "remote": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}}
//	  }
//	}
//
// Every field is optional; what is left out keeps codecell's default.
// Unknown fields are an error, so that a typo does not silently do nothing.
package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/lang"
	"github.com/codecell-dev/codecell/mcp"
)

// Config is the configuration file.
type Config struct {
	// Tier is the default tier: "auto" (the default), "native", "local", …
	Tier         string            `json:"tier,omitempty"`
	Limits       Limits            `json:"limits,omitempty"`
	Interpreters map[string]string `json:"interpreters,omitempty"`
	// Mounts are host directories the native sandbox also shows read-only.
	Mounts []string            `json:"mounts,omitempty"`
	Tools  codecell.ToolPolicy `json:"tools,omitempty"`
	// Guard is what the guardrails refuse before a program runs; it replaces
	// the built-in defaults (which refuse nothing).
	Guard *codecell.GuardPolicy `json:"guard,omitempty"`
	// Servers are the upstream MCP servers, under the key "mcpServers".
	Servers mcp.Servers `json:"mcpServers,omitempty"`
	// Auth holds the bearer tokens codecell serve accepts.
	Auth Auth `json:"auth,omitempty"`
}

// Auth is who may use codecell serve.
type Auth struct {
	// Tokens are accepted as "Authorization: Bearer TOKEN". With none (here
	// or in CODECELL_TOKENS), codecell serve listens on loopback only.
	Tokens []string `json:"tokens,omitempty"`
}

// Limits are codecell.Limits as a person writes them: durations as "30s",
// sizes as "512M".
type Limits struct {
	Timeout     Duration `json:"timeout,omitempty"`
	Memory      Size     `json:"memory,omitempty"`
	Processes   int      `json:"processes,omitempty"`
	CPUs        float64  `json:"cpus,omitempty"`
	Stdout      int      `json:"stdout,omitempty"`
	Stderr      int      `json:"stderr,omitempty"`
	CodeSize    int      `json:"code_size,omitempty"`
	ToolCalls   int      `json:"tool_calls,omitempty"`
	ToolTimeout Duration `json:"tool_timeout,omitempty"`
	ToolResult  Size     `json:"tool_result,omitempty"`
	Value       Size     `json:"value,omitempty"`
	Workspace   Size     `json:"workspace,omitempty"`
}

// Codecell returns the limits as codecell.Limits; zero fields stay zero
// (codecell's defaults).
func (l Limits) Codecell() codecell.Limits {
	return codecell.Limits{
		Timeout: time.Duration(l.Timeout), Memory: int64(l.Memory), Processes: l.Processes, CPU: l.CPUs,
		Stdout: l.Stdout, Stderr: l.Stderr, CodeSize: l.CodeSize, ToolCalls: l.ToolCalls,
		ToolTimeout: time.Duration(l.ToolTimeout), ToolResult: int(l.ToolResult), Value: int(l.Value),
		Workspace: int64(l.Workspace),
	}
}

// Load reads and checks a configuration file.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Parse reads and checks a configuration.
func Parse(data []byte) (*Config, error) {
	var c Config
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("not a codecell configuration: %w", err)
	}
	return &c, c.Validate()
}

// Validate checks what the JSON decoder cannot.
func (c *Config) Validate() error {
	l := c.Limits
	if l.Processes < 0 || l.CPUs < 0 || l.Stdout < 0 || l.Stderr < 0 || l.CodeSize < 0 || l.ToolCalls < 0 {
		return fmt.Errorf("limits must not be negative")
	}
	for name, path := range c.Interpreters {
		if lang.Lookup(name) == nil {
			return fmt.Errorf("interpreters: %q is not a language codecell runs (%s)", name, strings.Join(lang.Names(), ", "))
		}
		if path == "" {
			return fmt.Errorf("interpreters: %s has no path", name)
		}
	}
	for _, m := range c.Mounts {
		if !filepath.IsAbs(m) {
			return fmt.Errorf("mounts: %q is not an absolute path", m)
		}
	}
	if err := c.Guard.Check(); err != nil {
		return fmt.Errorf("guard: %w", err)
	}
	return c.Servers.Validate()
}

// Duration is a time.Duration written as "30s", "2m" or a number of
// seconds.
type Duration time.Duration

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var secs float64
		if err := json.Unmarshal(b, &secs); err != nil {
			return fmt.Errorf("a duration is a string such as \"30s\" or a number of seconds, not %s", b)
		}
		s = strconv.FormatFloat(secs, 'f', -1, 64)
	}
	v, err := ParseDuration(s)
	*d = Duration(v)
	return err
}

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// Size is a byte count written as "512M", "1G", "64KiB" or a number.
type Size int64

func (s *Size) UnmarshalJSON(b []byte) error {
	var str string
	if err := json.Unmarshal(b, &str); err != nil {
		var n int64
		if err := json.Unmarshal(b, &n); err != nil {
			return fmt.Errorf("a size is a string such as \"512M\" or a number of bytes, not %s", b)
		}
		str = strconv.FormatInt(n, 10)
	}
	v, err := ParseSize(str)
	*s = Size(v)
	return err
}

// ParseDuration accepts Go durations (1m30s) and plain seconds (90, 0.5).
func ParseDuration(s string) (time.Duration, error) {
	if secs, err := strconv.ParseFloat(s, 64); err == nil {
		if secs <= 0 {
			return 0, fmt.Errorf("duration %q must be positive", s)
		}
		return time.Duration(secs * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q is not a positive duration such as 10s, 2m or 90", s)
	}
	return d, nil
}

// ParseSize accepts bytes or a number with a binary unit: 512M, 512MiB, 1g.
func ParseSize(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "ib"), "b")
	mult := int64(1)
	if t != "" {
		switch t[len(t)-1] {
		case 'k':
			mult = 1 << 10
		case 'm':
			mult = 1 << 20
		case 'g':
			mult = 1 << 30
		}
		if mult > 1 {
			t = t[:len(t)-1]
		}
	}
	n, err := strconv.ParseFloat(t, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q is not a size such as 256M, 1G or 1073741824", s)
	}
	return int64(n * float64(mult)), nil
}

// Engine builds an Engine from the configuration: its tier, limits,
// interpreters and tool policy, and a Toolbox holding the upstream MCP
// servers, which connect on first use. Close ends the servers. Mounts are
// left to the caller, which configures its native tier.
func (c *Config) Engine() (eng *codecell.Engine, closeFn func(), err error) {
	box := &codecell.Toolbox{}
	var ups []*mcp.Upstream
	names := make([]string, 0, len(c.Servers))
	for name := range c.Servers {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		u := mcp.NewUpstream(name, c.Servers[name])
		if err := box.AddSource(u); err != nil {
			for _, u := range ups {
				u.Close()
			}
			return nil, nil, err
		}
		ups = append(ups, u)
	}
	eng = &codecell.Engine{
		Tier:         c.Tier,
		Limits:       c.Limits.Codecell(),
		Interpreters: c.Interpreters,
		Tools:        box,
		Policy:       codecell.Policy{Tools: c.Tools, Guard: c.Guard},
	}
	return eng, func() {
		for _, u := range ups {
			u.Close()
		}
	}, nil
}
