//go:build linux && race

package sandboxinit

// InitEnv is init's environment. A binary built with the race detector
// sleeps a second when it exits, to let other threads report races; init
// has none to report, and every sandbox's teardown would wait for it.
var InitEnv = []string{"GORACE=atexit_sleep_ms=0"}
