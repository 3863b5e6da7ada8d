//go:build linux && !race

package sandboxinit

// InitEnv is init's environment: empty.
var InitEnv = []string{}
