//go:build unix && !linux

package mcp

import "syscall"

// dieWithParent does nothing where there is no parent-death signal: a
// server sees its stdin close when codecell dies.
func dieWithParent(*syscall.SysProcAttr) {}
