package server

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
)

// procAddr writes a as /proc/net/tcp does: the IP as 32-bit words in the
// host's byte order, in hex, a colon, the port in hex.
func procAddr(a *net.TCPAddr) string {
	ip := a.IP.To4()
	if ip == nil {
		ip = a.IP.To16()
	}
	var b strings.Builder
	for i := 0; i < len(ip); i += 4 {
		fmt.Fprintf(&b, "%08X", binary.NativeEndian.Uint32(ip[i:]))
	}
	return fmt.Sprintf("%s:%04X", b.String(), a.Port)
}

// FuzzSameAddr: sameAddr reads whatever a line of /proc/net/tcp holds
// without failing, and knows an address written as the kernel writes it.
func FuzzSameAddr(f *testing.F) {
	for _, seed := range []string{"0100007F:1F90", "00000000000000000000000001000000:0035", "", ":", "0100007F:", "zz:1", "0100007F:FFFFFF", "0100007F0:1"} {
		f.Add(seed, "127.0.0.1", 8080)
	}
	f.Fuzz(func(t *testing.T, s, ip string, port int) {
		a := &net.TCPAddr{IP: net.ParseIP(ip), Port: port & 0xffff}
		sameAddr(s, a)
		if a.IP != nil && !sameAddr(procAddr(a), a) {
			t.Errorf("%s, written %s, is not itself", a, procAddr(a))
		}
	})
}

func TestSameAddr(t *testing.T) {
	if !sameAddr("0100007F:1F90", &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 8080}) && binary.NativeEndian.Uint16([]byte{1, 0}) == 1 {
		t.Error("127.0.0.1:8080 as a little-endian kernel writes it is not read as such")
	}
	if sameAddr("0100007F:1F91", &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 8080}) {
		t.Error("another port matched")
	}
	six := &net.TCPAddr{IP: net.ParseIP("::1"), Port: 53}
	if !sameAddr(procAddr(six), six) {
		t.Errorf("::1 written %s", procAddr(six))
	}
}

// TestDiagUIDFindsTheSocket: the kernel's exact lookup finds the client's
// end of a loopback connection, over IPv4 and IPv6, and says whose it is,
// as /proc/net/tcp does; a connection that does not exist is errNoSocket.
func TestDiagUIDFindsTheSocket(t *testing.T) {
	for _, network := range []string{"tcp4", "tcp6"} {
		addr := map[string]string{"tcp4": "127.0.0.1:0", "tcp6": "[::1]:0"}[network]
		ln, err := net.Listen(network, addr)
		if err != nil {
			t.Logf("%s: %v (no such loopback here)", network, err)
			continue
		}
		defer ln.Close()
		c, err := net.Dial(network, ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		client, server := c.LocalAddr().(*net.TCPAddr), c.RemoteAddr().(*net.TCPAddr)
		uid, err := diagUID(client, server)
		if err != nil || uid != os.Geteuid() {
			t.Errorf("%s: sock_diag says uid %d, %v; want %d", network, uid, err, os.Geteuid())
		}
		want := -1
		for _, name := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
			if u, err := socketUIDIn(name, client, server); err == nil {
				want = u
			}
		}
		if uid != want {
			t.Errorf("%s: sock_diag says uid %d, /proc/net says %d", network, uid, want)
		}
		// A port no socket of this connection has: none.
		gone := &net.TCPAddr{IP: client.IP, Port: 1}
		if _, err := diagUID(gone, server); !errors.Is(err, errNoSocket) {
			t.Errorf("%s: a socket that does not exist: %v, want errNoSocket", network, err)
		}
	}
}
