//go:build unix && !linux

package upstream

import "syscall"

// dieWithParent does nothing where there is no parent-death signal: a
// server sees its stdin close when codecell dies.
func dieWithParent(*syscall.SysProcAttr) {}
