// Package lazyre compiles a regular expression the first time it is used
// rather than when its package is initialised. Every codecell process (the
// CLI, each sandbox's init, a server) runs every package's initialisers;
// patterns that only one command needs are compiled by that command alone.
package lazyre

import (
	"regexp"
	"sync"
)

// New returns a function that gives the compiled expr, compiling it on the
// first call. expr must be valid: as with regexp.MustCompile, an invalid
// pattern panics, on first use.
func New(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
