package server

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
)

// socketUID is the uid that owns the TCP socket whose own address is
// client and whose peer is server: the client's end of a connection to
// this machine, as /proc/net/tcp and /proc/net/tcp6 list it (a connection
// on loopback has both ends in this network namespace).
func socketUID(client, server *net.TCPAddr) (int, error) {
	for _, name := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		uid, err := socketUIDIn(name, client, server)
		if err == nil {
			return uid, nil
		}
		if !errors.Is(err, errNoSocket) {
			return -1, err
		}
	}
	return -1, fmt.Errorf("no socket of this machine's is at %s, connected to %s: the client is not on this machine's loopback", client, server)
}

var errNoSocket = errors.New("no such socket")

func socketUIDIn(name string, client, server *net.TCPAddr) (int, error) {
	f, err := os.Open(name)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return -1, errNoSocket // no IPv6
		}
		return -1, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid ...
		fields := strings.Fields(sc.Text())
		if len(fields) < 8 {
			continue
		}
		if !sameAddr(fields[1], client) || !sameAddr(fields[2], server) {
			continue
		}
		uid, err := strconv.Atoi(fields[7])
		if err != nil {
			return -1, fmt.Errorf("%s: uid %q: %w", name, fields[7], err)
		}
		return uid, nil
	}
	if err := sc.Err(); err != nil {
		return -1, err
	}
	return -1, errNoSocket
}

// sameAddr reports whether s, an address as /proc/net/tcp writes it (the
// IP as 32-bit words in the host's byte order, in hex, a colon, the port
// in hex), is a.
func sameAddr(s string, a *net.TCPAddr) bool {
	ipHex, portHex, ok := strings.Cut(s, ":")
	if !ok {
		return false
	}
	port, err := strconv.ParseUint(portHex, 16, 16)
	if err != nil || int(port) != a.Port {
		return false
	}
	raw, err := hex.DecodeString(ipHex)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return false
	}
	ip := make(net.IP, len(raw))
	for i := 0; i < len(raw); i += 4 {
		binary.NativeEndian.PutUint32(ip[i:], binary.BigEndian.Uint32(raw[i:]))
	}
	return ip.Equal(a.IP)
}
