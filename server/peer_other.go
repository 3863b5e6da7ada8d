//go:build !linux

package server

import (
	"net"
	"os"
)

// socketUID tells no one apart here: there is no /proc/net/tcp to say who
// owns a socket, and every client is taken for this user's.
func socketUID(client, server *net.TCPAddr) (int, error) { return os.Geteuid(), nil }
