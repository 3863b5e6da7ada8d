//go:build !linux

package docker

// registerInit registers nothing: the container's launcher runs inside a
// Linux container, from a Linux build of codecell.
func registerInit() {}
