//go:build linux && !race

package native

// initEnv is init's environment: empty.
var initEnv = []string{}
