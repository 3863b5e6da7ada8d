//go:build darwin || freebsd || netbsd || openbsd || dragonfly

package main

import "golang.org/x/sys/unix"

// ioctlReadTermios reads a terminal's settings.
const ioctlReadTermios = unix.TIOCGETA
