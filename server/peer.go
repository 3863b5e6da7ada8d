package server

import (
	"fmt"
	"net"
	"net/http"
	"os"
)

// Another user of the machine reaches a server on loopback as easily as
// its own user does. Without tokens, codecell serve would run that user's
// programs as its own user: with its configuration's mounts, packages and
// network secrets, and the sessions and files of its one local principal.
// So a server without tokens answers only its own user's connections (and
// root's, who could act as that user anyway), telling by the uid that owns
// the client's socket. With tokens, the token says who the caller is.

// peerIsOwner says why a request on a TCP loopback connection is not from
// a process of this process's user (or root); nil when it is, or when the
// request came otherwise (no TCP listener: a handler called directly).
func peerIsOwner(r *http.Request) error {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr)
	if !ok {
		return nil
	}
	remote, err := net.ResolveTCPAddr("tcp", r.RemoteAddr)
	if err != nil {
		return fmt.Errorf("the client's address %q: %w", r.RemoteAddr, err)
	}
	uid, err := socketUID(remote, local)
	if err != nil {
		return err
	}
	if me := os.Geteuid(); uid != me && uid != 0 {
		return fmt.Errorf("the client runs as uid %d, and this server as uid %d", uid, me)
	}
	return nil
}
