//go:build linux && race

package native

// initEnv is init's environment. A binary built with the race detector
// sleeps a second when it exits, to let other threads report races; init
// has none to report, and every sandbox's teardown would wait for it.
var initEnv = []string{"GORACE=atexit_sleep_ms=0"}
