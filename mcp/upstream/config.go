package upstream

import (
	"sort"

	"github.com/codecell-dev/codecell/api"
)

// ServerConfig is one entry of "mcpServers": api.MCPServer.
type ServerConfig = api.MCPServer

// Servers is the "mcpServers" object: api.MCPServers.
type Servers = api.MCPServers

// UnsetVarError is api.UnsetVarError.
type UnsetVarError = api.UnsetVarError

// inheritedEnv is what a stdio server gets of codecell's environment: enough
// to find programs (PATH), a home for caches such as npx's (HOME), and the
// locale (LANG). Everything else must be passed by name in "env".
var inheritedEnv = []string{"PATH", "HOME", "LANG"}

// serverEnv builds a stdio server's environment: the inherited variables,
// then the server's env, which wins.
func serverEnv(env map[string]string, lookup func(string) (string, bool)) []string {
	out := make([]string, 0, len(inheritedEnv)+len(env))
	for _, k := range inheritedEnv {
		if _, override := env[k]; override {
			continue
		}
		if v, ok := lookup(k); ok {
			out = append(out, k+"="+v)
		}
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, k+"="+env[k])
	}
	return out
}
