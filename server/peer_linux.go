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
	"syscall"

	"golang.org/x/sys/unix"
)

// socketUID is the uid that owns the TCP socket whose own address is
// client and whose peer is server: the client's end of a connection to
// this machine (a connection on loopback has both ends in this network
// namespace). The kernel finds that one socket by its addresses
// (sock_diag); where it does not, /proc/net/tcp and tcp6 list every
// socket, read line by line, which costs in proportion to the machine's
// connections.
func socketUID(client, server *net.TCPAddr) (int, error) {
	if uid, err := diagUID(client, server); err == nil {
		return uid, nil
	}
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

// diagUID asks the kernel for the TCP socket at client connected to
// server, by an exact lookup of NETLINK_SOCK_DIAG (inet_diag), and returns
// its owner. An IPv4 address is looked up as such: the kernel's table of
// connections holds an IPv6 socket's IPv4-mapped ones under the same key.
func diagUID(client, server *net.TCPAddr) (int, error) {
	family, src, dst := unix.AF_INET6, client.IP.To16(), server.IP.To16()
	if c4, s4 := client.IP.To4(), server.IP.To4(); c4 != nil && s4 != nil {
		family, src, dst = unix.AF_INET, c4, s4
	}
	if src == nil || dst == nil {
		return -1, fmt.Errorf("addresses %s and %s", client, server)
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return -1, fmt.Errorf("sock_diag: %w", err)
	}
	defer unix.Close(fd)
	// struct nlmsghdr, then struct inet_diag_req_v2 (its inet_diag_sockid
	// at 8: ports and addresses in network byte order, no cookie).
	const hdr, reqLen = unix.SizeofNlMsghdr, 56
	req := make([]byte, hdr+reqLen)
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST)
	binary.NativeEndian.PutUint32(req[8:], 1) // seq
	r := req[hdr:]
	r[0], r[1] = byte(family), unix.IPPROTO_TCP
	binary.NativeEndian.PutUint32(r[4:], ^uint32(0)) // every state
	binary.BigEndian.PutUint16(r[8:], uint16(client.Port))
	binary.BigEndian.PutUint16(r[10:], uint16(server.Port))
	copy(r[12:28], src)
	copy(r[28:44], dst)
	binary.NativeEndian.PutUint32(r[48:], ^uint32(0)) // INET_DIAG_NOCOOKIE
	binary.NativeEndian.PutUint32(r[52:], ^uint32(0))
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return -1, fmt.Errorf("sock_diag: %w", err)
	}
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return -1, fmt.Errorf("sock_diag: %w", err)
	}
	msgs, err := syscall.ParseNetlinkMessage(buf[:n])
	if err != nil || len(msgs) == 0 {
		return -1, fmt.Errorf("sock_diag: an answer of %d bytes: %v", n, err)
	}
	m := msgs[0]
	switch m.Header.Type {
	case unix.NLMSG_ERROR:
		if len(m.Data) < 4 {
			return -1, errors.New("sock_diag: a short error")
		}
		errno := unix.Errno(-int32(binary.NativeEndian.Uint32(m.Data)))
		if errno == unix.ENOENT {
			return -1, errNoSocket
		}
		return -1, fmt.Errorf("sock_diag: %w", errno)
	case unix.SOCK_DIAG_BY_FAMILY:
		// struct inet_diag_msg: idiag_uid at 64.
		if len(m.Data) < 72 {
			return -1, fmt.Errorf("sock_diag: an answer of %d bytes", len(m.Data))
		}
		return int(binary.NativeEndian.Uint32(m.Data[64:])), nil
	}
	return -1, fmt.Errorf("sock_diag: an answer of type %d", m.Header.Type)
}
