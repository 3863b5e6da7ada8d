package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/codecell-dev/codecell/internal/lazyre"
)

// DefaultMCPStartTimeout bounds starting an upstream MCP server and its
// handshake when its entry sets no "start_timeout": long, because "npx -y
// some-server" may download the server on its first start.
const DefaultMCPStartTimeout = 60 * time.Second

// MCPServer is one entry of "mcpServers", as Claude Desktop, Claude Code
// and Cursor write it. A server is either a command codecell starts and
// speaks to over stdin and stdout, or the URL of a streamable HTTP endpoint.
//
// Every string may hold ${VAR} (or ${VAR:-default}) references to codecell's
// environment, as Claude Code allows; they are expanded when the server is
// connected, and a variable that is not set (and has no default) is an error
// naming it. A bare $VAR is left as it is.
type MCPServer struct {
	// Command is the program to start, found in PATH as exec.Command finds
	// it. Args are its arguments.
	Command string   `json:"command,omitempty"`
	Args    []string `json:"args,omitempty"`
	// Env is the server's environment, on top of PATH, HOME and LANG taken
	// from codecell's own. Nothing else of codecell's environment reaches
	// the server: it holds the secrets of every other server and of the
	// host, and an upstream server is code of someone else's. Pass what a
	// server needs here, by reference if it is a secret:
	// "GITHUB_TOKEN": "${GITHUB_TOKEN}".
	Env map[string]string `json:"env,omitempty"`
	// Cwd is the server's working directory; empty means codecell's.
	Cwd string `json:"cwd,omitempty"`

	// Type is "stdio", or "http" / "streamable-http" for a URL; empty means
	// whichever of Command and URL is set. "sse" (the transport of 2024,
	// superseded by streamable HTTP) is refused.
	Type string `json:"type,omitempty"`
	// URL is the streamable HTTP endpoint, http or https.
	URL string `json:"url,omitempty"`
	// Headers are sent with every HTTP request, typically
	// "Authorization": "Bearer ${TOKEN}".
	Headers map[string]string `json:"headers,omitempty"`

	// StartTimeout bounds starting the server (or connecting to it) and
	// the MCP handshake, as "30s" or seconds; DefaultMCPStartTimeout when
	// left out. A server slower than this is reported as failed, and
	// started again when a program calls one of its tools.
	StartTimeout Duration `json:"start_timeout,omitempty"`
}

// MCPServers is the "mcpServers" object: server name to its config. The name
// prefixes the server's tools: tool "search" of server "github" is called
// as "github.search".
type MCPServers map[string]MCPServer

// serverName is codecell's rule for tool-source names (see
// codecell.Toolbox.AddSource): no '.', which separates a server's name
// from its tools' names.
// ValidMCPServerName reports whether name may name an upstream MCP server.
func ValidMCPServerName(name string) bool { return mcpServerName().MatchString(name) }

var mcpServerName = lazyre.New(`^[A-Za-z0-9_][A-Za-z0-9_-]{0,63}$`)

// ParseMCPServers reads an mcpServers declaration: either a whole Claude
// Desktop or Cursor file ({"mcpServers": {...}}) or the object itself. The
// result is validated.
func ParseMCPServers(data []byte) (MCPServers, error) {
	var file struct {
		MCPServers MCPServers `json:"mcpServers"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&file); err != nil {
		return nil, fmt.Errorf("mcpServers: %w", err)
	}
	servers := file.MCPServers
	if servers == nil {
		if err := json.Unmarshal(data, &servers); err != nil {
			return nil, fmt.Errorf("mcpServers: %w", err)
		}
	}
	if err := servers.Validate(); err != nil {
		return nil, err
	}
	return servers, nil
}

// CheckEnv reports the first ${VAR} a server's config refers to that lookup
// (os.LookupEnv) does not have and that has no default (${VAR:-default}):
// at load, so that a missing variable is found when codecell starts, not
// when a program first calls the server's tools.
func (s MCPServers) CheckEnv(lookup func(string) (string, bool)) error {
	names := make([]string, 0, len(s))
	for name := range s {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if _, err := s[name].Expand(lookup); err != nil {
			var unset *UnsetVarError
			if errors.As(err, &unset) {
				return fmt.Errorf("mcpServers.%s: %w; set it before starting codecell, or give a default as ${%s:-value}", name, err, unset.Var)
			}
			return fmt.Errorf("mcpServers.%s: %w", name, err)
		}
	}
	return nil
}

// Validate checks every server's name and config, and reports every
// problem found, one per line, servers in name order.
func (s MCPServers) Validate() error {
	names := make([]string, 0, len(s))
	for name := range s {
		names = append(names, name)
	}
	sort.Strings(names)
	var errs []error
	for _, name := range names {
		if !mcpServerName().MatchString(name) {
			errs = append(errs, fmt.Errorf("mcpServers: server name %q: use 1 to 64 letters, digits, '_' and '-' (no '.': the name prefixes its tools as %q)", name, "name.tool"))
			continue
		}
		if err := s[name].validate(); err != nil {
			errs = append(errs, fmt.Errorf("mcpServers.%s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// Validate checks one server's config, as MCPServers.Validate does.
func (c MCPServer) Validate() error { return c.validate() }

func (c MCPServer) validate() error {
	if c.StartTimeout < 0 {
		return fmt.Errorf(`"start_timeout" is %s: it must be positive; leave it out for %s`, time.Duration(c.StartTimeout), DefaultMCPStartTimeout)
	}
	switch strings.ToLower(c.Type) {
	case "", "stdio", "http", "streamable-http", "streamablehttp":
	case "sse":
		return errors.New(`"type": "sse": servers that speak only the SSE transport (of protocol version 2024-11-05) are not supported; use the server's streamable HTTP endpoint ("type": "http", often the same URL ending in /mcp instead of /sse)`)
	default:
		return fmt.Errorf(`"type": %q: use "stdio" with "command", or "http" with "url"`, c.Type)
	}
	switch {
	case c.Command != "" && c.URL != "":
		return errors.New(`both "command" and "url" are set: a server is either a command (stdio) or a URL (streamable HTTP)`)
	case c.Command == "" && c.URL == "":
		return errors.New(`set "command" (a server codecell starts) or "url" (a streamable HTTP endpoint)`)
	case c.Command != "":
		if t := strings.ToLower(c.Type); t != "" && t != "stdio" {
			return fmt.Errorf(`"type": %q needs "url", but "command" is set`, c.Type)
		}
		if len(c.Headers) > 0 {
			return errors.New(`"headers" apply to a "url" server; give a command server its secrets in "env"`)
		}
	default:
		if strings.ToLower(c.Type) == "stdio" {
			return errors.New(`"type": "stdio" needs "command", but "url" is set`)
		}
		if len(c.Args) > 0 || len(c.Env) > 0 || c.Cwd != "" {
			return errors.New(`"args", "env" and "cwd" apply to a "command" server; a "url" server takes "headers"`)
		}
		// A URL made of a variable is checked once it is expanded.
		if !strings.HasPrefix(c.URL, "${") {
			if err := checkURL(c.URL); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf(`"url": %w`, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf(`"url" %q: use an http:// or https:// URL`, raw)
	}
	if u.Host == "" {
		return fmt.Errorf(`"url" %q has no host`, raw)
	}
	return nil
}

// varRef is Claude Code's reference form: ${VAR} and ${VAR:-default}.
var varRef = lazyre.New(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}`)

// UnsetVarError is the error for a ${VAR} reference to a variable that is not
// set in codecell's environment.
type UnsetVarError struct {
	Var   string // the variable's name
	Field string // where the reference is, such as `env["GITHUB_TOKEN"]`
}

func (e *UnsetVarError) Error() string {
	return fmt.Sprintf("%s refers to ${%s}, which is not set in codecell's environment", e.Field, e.Var)
}

// expand returns the config with every ${VAR} reference replaced from
// lookup (os.LookupEnv at connect time).
func (c MCPServer) Expand(lookup func(string) (string, bool)) (MCPServer, error) {
	var first error
	ex := func(field, s string) string {
		return varRef().ReplaceAllStringFunc(s, func(ref string) string {
			m := varRef().FindStringSubmatch(ref)
			v, ok := lookup(m[1])
			if m[2] != "" && v == "" { // ${VAR:-default}: unset or empty, as in sh
				return m[3]
			}
			if !ok && first == nil {
				first = &UnsetVarError{Var: m[1], Field: field}
			}
			return v
		})
	}
	out := c
	out.Command = ex(`"command"`, c.Command)
	out.Cwd = ex(`"cwd"`, c.Cwd)
	out.URL = ex(`"url"`, c.URL)
	if c.Args != nil {
		out.Args = make([]string, len(c.Args))
		for i, a := range c.Args {
			out.Args[i] = ex(fmt.Sprintf(`"args"[%d]`, i), a)
		}
	}
	out.Env = expandMap(`"env"`, c.Env, ex)
	out.Headers = expandMap(`"headers"`, c.Headers, ex)
	if first != nil {
		return MCPServer{}, first
	}
	if out.URL != "" {
		if err := checkURL(out.URL); err != nil {
			return MCPServer{}, err
		}
	}
	return out, nil
}

func expandMap(field string, m map[string]string, ex func(field, s string) string) map[string]string {
	if m == nil {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys) // the first unset variable reported is the same every time
	out := make(map[string]string, len(m))
	for _, k := range keys {
		out[k] = ex(fmt.Sprintf("%s[%q]", field, k), m[k])
	}
	return out
}
