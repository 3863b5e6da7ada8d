//go:build !linux

package workspace

// Unlock opens nothing where the native sandbox does not run: the trees
// copied back there are the caller's own.
func Unlock(dir string) *Locked { return &Locked{} }

// Restore has nothing to give back.
func (l *Locked) Restore(dir string) {}

// openUp opens nothing here.
func openUp(dirfd int, name string) {}
