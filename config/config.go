// Package config reads and checks codecell's configuration file: the tier,
// the limits, the interpreters, the tool policy, the service's settings,
// and the upstream MCP servers in the "mcpServers" shape that Claude
// Desktop, Claude Code and Cursor use, so that a user pastes what they
// already have. It is data: the binary builds an Engine and its upstream
// servers from it.
//
//	{
//	  "tier": "auto",
//	  "limits": {"timeout": "30s", "memory": "512M", "processes": 128, "cpus": 1,
//	             "tool_calls": 30, "tool_timeout": "30s", "workspace": "1G"},
//	  "interpreters": {"python": "/usr/bin/python3"},
//	  "mounts": ["/opt/node"],
//	  "tools": {"allow": ["everything.*"], "deny": ["everything.get-env"]},
//	  "auth": {"tokens": [{"name": "alice", "token": "…", "max_running": 2},
//	                      {"name": "ops", "token": "…", "role": "admin"}]},
//	  "network": {"allow": ["api.github.com"],
//	              "secrets": [{"name": "github", "env": "GITHUB_TOKEN", "hosts": ["api.github.com"],
//	                           "header": "Authorization: Bearer {value}"}]},
//	  "guard": {"block": ["network", "low_level_network"], "blocked_imports": ["ctypes"],
//	            "allowed_commands": ["ls", "grep *", "codecell-tool *"]},
//	  "mcp": {"prompt_budget_tokens": 2000},
//	  "packages": {"python": ["humanize==4.9.0"]}, "packages_python_wheels": "/srv/wheels",
//	  "mcpServers": {
//	    "everything": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything"]},
//	    "remote": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}}
//	  },
//	  "docker": {"image": "codecell-runtime:1", "images": {"python": "python-sci:3"}}
//	}
//
// Every field is optional; what is left out keeps codecell's default.
// Unknown fields are an error, so that a typo does not silently do nothing.
package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/api"
	"github.com/codecell-dev/codecell/internal/jsonkeys"
	"github.com/codecell-dev/codecell/lang"
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
	// Network is the hosts programs may reach ("none", the default, or
	// {"allow": [...], "deny": [...], "secrets": [...]}); sessions and
	// executions only narrow it. Its secrets are values the proxy adds to
	// the requests to their hosts, which programs never hold (secrets.go).
	Network *codecell.NetworkPolicy `json:"network,omitempty"`
	// Packages are installed for every program of their language, besides
	// those a session or an execution asks for: {"python":
	// ["humanize==4.9.0"], "javascript": ["lodash@4.17.21"]}.
	Packages codecell.Packages `json:"packages,omitempty"`
	// PackagesPythonIndex is the index pip installs Python packages from
	// (https://pypi.org/simple when left out); PackagesPythonWheels,
	// instead, a directory of wheels, installed with no network at all.
	PackagesPythonIndex  string `json:"packages_python_index,omitempty"`
	PackagesPythonWheels string `json:"packages_python_wheels,omitempty"`
	// PackagesNPMRegistry is the registry npm installs from
	// (https://registry.npmjs.org/ when left out).
	PackagesNPMRegistry string `json:"packages_npm_registry,omitempty"`
	// PackagesNetwork adds to what the installer's sandbox may reach:
	// address ranges of a source on a private network, more hosts.
	PackagesNetwork []string `json:"packages_network,omitempty"`
	// PackagesCacheDir keeps installed packages (/var/cache/codecell/packages
	// as root, else $XDG_CACHE_HOME/codecell/packages).
	PackagesCacheDir string `json:"packages_cache_dir,omitempty"`
	// PackagesCAFile is a PEM file of authorities the installer trusts
	// besides the system's, for an index or registry of one's own.
	PackagesCAFile string `json:"packages_ca_file,omitempty"`
	// PackagesTimeout bounds one install (5m when left out).
	PackagesTimeout Duration `json:"packages_timeout,omitempty"`
	// Servers are the upstream MCP servers, under the key "mcpServers".
	Servers api.MCPServers `json:"mcpServers,omitempty"`
	// Auth holds the bearer tokens codecell serve accepts.
	Auth Auth `json:"auth,omitempty"`
	// Server tunes codecell serve's REST API.
	Server Server `json:"server,omitempty"`
	// MCP tunes the MCP server of codecell mcp and codecell serve's /mcp.
	MCP MCP `json:"mcp,omitempty"`
	// Docker configures the docker tier.
	Docker *Docker `json:"docker,omitempty"`
}

// Docker configures the docker tier, which runs each program in a
// container through the Docker Engine API (Docker, or Podman's service):
//
//	"docker": {"image": "codecell-runtime:1", "images": {"python": "python-sci:3"},
//	           "host": "unix:///run/podman/podman.sock", "user": "65534:65534", "tmp": "128M", "pool": 1}
type Docker struct {
	// Host is the engine's address; empty means DOCKER_HOST, else
	// /var/run/docker.sock, else /run/podman/podman.sock.
	Host string `json:"host,omitempty"`
	// Image is the image programs run in; Images overrides it per language.
	Image  string            `json:"image,omitempty"`
	Images map[string]string `json:"images,omitempty"`
	// User runs the programs, "uid:gid" (65534:65534 when empty); never root.
	User string `json:"user,omitempty"`
	// Tmp is the size of the container's /tmp (128M when empty).
	Tmp Size `json:"tmp,omitempty"`
	// Pool is how many containers to keep ready (1 when 0; -1 for none).
	Pool int `json:"pool,omitempty"`
}

// Check reports what is wrong in the docker section.
func (d *Docker) Check() error {
	if d == nil {
		return nil
	}
	if d.Host != "" {
		u, err := url.Parse(d.Host)
		if err != nil || (u.Scheme != "unix" && u.Scheme != "tcp" && u.Scheme != "ssh" && u.Scheme != "npipe") {
			return fmt.Errorf("docker.host: %q is not an engine address; write unix:///path/to/socket or tcp://host:port", d.Host)
		}
	}
	for name, img := range d.Images {
		if lang.Lookup(name) == nil {
			return fmt.Errorf("docker.images: %q is not a language codecell runs (%s)", name, strings.Join(lang.Names(), ", "))
		}
		if img == "" {
			return fmt.Errorf("docker.images: %s has no image", name)
		}
	}
	if d.User != "" {
		us, gs, _ := strings.Cut(d.User, ":")
		if gs == "" {
			gs = us
		}
		uid, err1 := strconv.Atoi(us)
		gid, err2 := strconv.Atoi(gs)
		if err1 != nil || err2 != nil || uid < 0 || gid < 0 {
			return fmt.Errorf("docker.user: %q is not \"uid:gid\" in numbers, such as \"65534:65534\"", d.User)
		}
		if uid == 0 || gid == 0 {
			return fmt.Errorf("docker.user: %q is root; programs run as an unprivileged user, such as \"65534:65534\"", d.User)
		}
	}
	if d.Tmp < 0 {
		return fmt.Errorf("docker.tmp: must not be negative")
	}
	return nil
}

// MCP tunes the MCP server.
type MCP struct {
	// PromptBudgetTokens bounds the description of the execute tool, in
	// tokens estimated as characters / 4 (2000 when left out): it carries
	// the tools' TypeScript declarations while they fit, else a line per
	// tool, else the servers and their tools' counts, and points to
	// search_tools and tools_info. -1 means no bound.
	PromptBudgetTokens int `json:"prompt_budget_tokens,omitempty"`
}

// MinPromptBudgetTokens is the least prompt budget a configuration may
// give: the rules of code mode alone take about 310 tokens.
const MinPromptBudgetTokens = 500

// Server tunes codecell serve. Zero fields take the defaults written
// beside them; flags of codecell serve override the file.
type Server struct {
	// StateDir holds the sessions' workspaces: /var/lib/codecell as root,
	// else $XDG_STATE_HOME/codecell (~/.local/state/codecell).
	StateDir string `json:"state_dir,omitempty"`
	// MaxRunning executions run at once (twice the CPUs); one more gets 429.
	MaxRunning int `json:"max_running,omitempty"`
	// MaxSessions exist at once (100).
	MaxSessions int `json:"max_sessions,omitempty"`
	// SessionTTL is a session's lifetime when it asks for none (1h);
	// MaxSessionTTL the most it may ask for (24h).
	SessionTTL    Duration `json:"session_ttl,omitempty"`
	MaxSessionTTL Duration `json:"max_session_ttl,omitempty"`
	// IdleTimeout ends a session unused for this long (30m).
	IdleTimeout Duration `json:"idle_timeout,omitempty"`
	// Tiers a client may ask for besides the configured tier, which it
	// always may.
	Tiers []string `json:"tiers,omitempty"`
	// MaxLimits bound what a session or an execution may ask for.
	MaxLimits Limits `json:"max_limits,omitempty"`
	// AllowedOrigins are the origins (scheme://host[:port]) of web pages
	// that may call the service from a browser, beside its own.
	AllowedOrigins []string `json:"allowed_origins,omitempty"`
	// AllowedHosts are the host names, beside loopback ones, a request may
	// give in its Host header when codecell serve listens on loopback: the
	// names a reverse proxy in front passes on.
	AllowedHosts []string `json:"allowed_hosts,omitempty"`
}

// Auth is who may use codecell serve (see auth.go).
type Auth struct {
	// Tokens are accepted as "Authorization: Bearer TOKEN", each the token
	// of a principal that owns the sessions it makes. With none (here or
	// in CODECELL_TOKENS), codecell serve listens on loopback only.
	Tokens []Token `json:"tokens,omitempty"`
}

// Limits are codecell.Limits as a person writes them: durations as "30s",
// sizes as "512M".
type Limits = api.Limits

// Duration is a time.Duration written as "30s", "2m" or a number of
// seconds.
type Duration = api.Duration

// Size is a byte count written as "512M", "1G", "64KiB" or a number.
type Size = api.Size

// ParseDuration accepts Go durations (1m30s) and plain seconds (90, 0.5).
func ParseDuration(s string) (time.Duration, error) { return api.ParseDuration(s) }

// ParseSize accepts bytes or a number with a binary unit: 512M, 512MiB, 1g.
func ParseSize(s string) (int64, error) { return api.ParseSize(s) }

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
	if err := c.Servers.CheckEnv(os.LookupEnv); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := c.CheckSecretValues(nil, nil); err != nil {
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
		return nil, decodeError(data, dec.InputOffset(), err)
	}
	if end := dec.InputOffset(); len(bytes.TrimSpace(data[end:])) > 0 {
		off := end + int64(len(data[end:])-len(bytes.TrimLeft(data[end:], " \t\r\n")))
		line, col := lineCol(data, off)
		return nil, fmt.Errorf("line %d, column %d: more follows the configuration's object: the file holds one JSON object", line, col)
	}
	// The decoder keeps the last of a key given twice, where a person
	// reading the file, or another tool, may take the first; and it takes
	// "TIER" for "tier", which that tool may not.
	err := jsonkeys.CheckFields(data[:dec.InputOffset()], &c)
	if d, ok := jsonkeys.IsDuplicate(err); ok {
		line, col := lineCol(data, d.Offset)
		return nil, fmt.Errorf("line %d, column %d: %s is given twice: give each key once, with the value you mean", line, col, d.At())
	}
	if w, ok := jsonkeys.IsWrongCase(err); ok {
		line, col := lineCol(data, w.Offset)
		return nil, fmt.Errorf("line %d, column %d: the key %q is spelled %q: keys are matched exactly", line, col, w.Key, w.Field)
	}
	return &c, c.Validate()
}

// Validate checks what the JSON decoder cannot.
func (c *Config) Validate() error {
	if err := CheckTokens(c.Auth.Tokens); err != nil {
		return fmt.Errorf("auth.tokens: %w", err)
	}
	if err := c.Limits.Check(); err != nil {
		return err
	}
	if err := c.Server.MaxLimits.Check(); err != nil {
		return fmt.Errorf("server.max_limits: %w", err)
	}
	if c.Server.MaxRunning < 0 || c.Server.MaxSessions < 0 {
		return fmt.Errorf("server: max_running and max_sessions must not be negative")
	}
	if c.Server.StateDir != "" && !filepath.IsAbs(c.Server.StateDir) {
		return fmt.Errorf("server.state_dir: %q is not an absolute path", c.Server.StateDir)
	}
	for _, o := range c.Server.AllowedOrigins {
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.TrimSuffix(u.Path, "/") != "" || u.RawQuery != "" || u.User != nil {
			return fmt.Errorf("server.allowed_origins: %q is not an origin; write it as a browser sends it: scheme://host[:port], such as https://app.example.com", o)
		}
	}
	for _, h := range c.Server.AllowedHosts {
		if h == "" || strings.ContainsAny(h, "/@ ") {
			return fmt.Errorf("server.allowed_hosts: %q is not a host name; give the name alone, such as codecell.example.com", h)
		}
	}
	for _, t := range c.Server.Tiers {
		if t == "" {
			return fmt.Errorf("server.tiers: an empty tier name")
		}
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
	if err := c.checkPackages(); err != nil {
		return err
	}
	if b := c.MCP.PromptBudgetTokens; b != 0 && b != -1 && b < MinPromptBudgetTokens {
		return fmt.Errorf("mcp.prompt_budget_tokens: %d is too small: give at least %d (the rules of code mode alone take about 310 tokens), or -1 for no bound", b, MinPromptBudgetTokens)
	}
	if err := c.Docker.Check(); err != nil {
		return err
	}
	if err := c.Guard.Check(); err != nil {
		return fmt.Errorf("guard: %w", err)
	}
	if err := c.Tools.Check(); err != nil {
		return fmt.Errorf("tools: %w", err)
	}
	if err := c.checkSecrets(); err != nil {
		return err
	}
	return c.Servers.Validate()
}

// checkPackages checks the packages and where they come from.
func (c *Config) checkPackages() error {
	if err := c.Packages.Check(); err != nil {
		return fmt.Errorf("packages: %w", err)
	}
	for _, f := range []struct{ name, url string }{{"packages_python_index", c.PackagesPythonIndex}, {"packages_npm_registry", c.PackagesNPMRegistry}} {
		if f.url == "" {
			continue
		}
		u, err := url.Parse(f.url)
		if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil {
			return fmt.Errorf("%s: %q is not an https:// URL without credentials, such as https://pypi.org/simple", f.name, f.url)
		}
	}
	for _, f := range []struct{ name, dir string }{{"packages_python_wheels", c.PackagesPythonWheels}, {"packages_cache_dir", c.PackagesCacheDir}, {"packages_ca_file", c.PackagesCAFile}} {
		if f.dir != "" && !filepath.IsAbs(f.dir) {
			return fmt.Errorf("%s: %q is not an absolute path", f.name, f.dir)
		}
	}
	if c.PackagesPythonWheels != "" && c.PackagesPythonIndex != "" {
		return fmt.Errorf("packages_python_wheels and packages_python_index: give one; pip installs from the wheel directory alone, with no network")
	}
	if c.PackagesTimeout < 0 {
		return fmt.Errorf("packages_timeout must not be negative")
	}
	return nil
}

// PackageSources are the configuration's packages for an Engine.
func (c *Config) PackageSources() codecell.PackageSources {
	return codecell.PackageSources{Base: c.Packages, CacheDir: c.PackagesCacheDir, PythonIndex: c.PackagesPythonIndex,
		PythonWheels: c.PackagesPythonWheels, NPMRegistry: c.PackagesNPMRegistry, Network: c.PackagesNetwork, CAFile: c.PackagesCAFile,
		Timeout: time.Duration(c.PackagesTimeout)}
}
