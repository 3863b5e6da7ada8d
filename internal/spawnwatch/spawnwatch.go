// Package spawnwatch lets this module's own checks watch a native tier's
// sandboxes start, each with its init's host pid and its cgroup's
// directories, to see every one of them gone once the tier is closed. It
// is internal: what a sandbox is, and what it shows its program, is no
// knob of the tier's users.
package spawnwatch

import "sync"

// Func is told of one sandbox as its init starts.
type Func func(pid int, cgroupDirs []string)

var watchers sync.Map // a tier (any comparable key) → Func

// Watch calls f for each sandbox the tier keyed by key starts, until the
// returned stop is called.
func Watch(key any, f Func) (stop func()) {
	watchers.Store(key, f)
	return func() { watchers.Delete(key) }
}

// Spawned tells the watcher of key, if any, of a sandbox. dirs is called
// only when one watches.
func Spawned(key any, pid int, dirs func() []string) {
	if f, ok := watchers.Load(key); ok {
		f.(Func)(pid, dirs())
	}
}
