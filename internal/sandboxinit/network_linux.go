//go:build linux

package sandboxinit

import (
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A network by policy. The sandbox's network namespace stays empty of
// routes to anywhere: its loopback holds, besides 127.0.0.0/8, the range
// 198.18.0.0/15, and /etc/hosts gives each name the policy allows an
// address of it (the only resolver a sandbox has: no DNS query leaves it,
// and a name not given does not resolve). init listens, on every address
// of that range, on the ports the policy allows; the program's connection
// to a name reaches init, which hands the socket to the host with the name
// the address stands for. The host's proxy (internal/egress) decides: the
// name and port against the policy, the TLS server name or the HTTP Host
// against the name, and the name's addresses, which it resolves itself,
// against the ranges the policy lists. Any other address has no route
// (ENETUNREACH); UDP reaches nothing; Landlock lets the program connect
// to the allowed ports only.

// The sandbox's range for names, 198.18.0.0/15, and netBase the
// loopback's own address in it (NetBase, for the host).
var (
	netRange = addr4{198, 18, 0, 0}
	netBase  = addr4{198, 18, 0, 1}
)

const netRangeBits = 15

// NetBase is the loopback's own address in the names' range: the host
// gives the names the addresses after it.
const NetBase = "198.18.0.1"

// wildcardBase is where the resolver's addresses for wildcard names
// start: past every host's.
var wildcardBase = addr4{198, 18, 16, 0}

// addr4 is an IPv4 address. init handles addresses without net/netip,
// which Go initialises after the binary's heavy packages (see the
// package's comment).
type addr4 [4]byte

func (a addr4) uint32() uint32 { return binary.BigEndian.Uint32(a[:]) }

func addr4From(u uint32) addr4 {
	var a addr4
	binary.BigEndian.PutUint32(a[:], u)
	return a
}

// next is the address after a.
func (a addr4) next() addr4 { return addr4From(a.uint32() + 1) }

func (a addr4) String() string {
	return strconv.Itoa(int(a[0])) + "." + strconv.Itoa(int(a[1])) + "." + strconv.Itoa(int(a[2])) + "." + strconv.Itoa(int(a[3]))
}

// inNetRange reports whether a is in the names' range.
func inNetRange(a addr4) bool {
	return a.uint32()>>(32-netRangeBits) == netRange.uint32()>>(32-netRangeBits)
}

// parseAddr4 reads an IPv4 address in dotted decimal, as net/netip's
// ParseAddr does: four fields of 0 to 255, without leading zeros.
func parseAddr4(s string) (addr4, bool) {
	var a addr4
	fields := strings.Split(s, ".")
	if len(fields) != 4 {
		return a, false
	}
	for i, f := range fields {
		if f == "" || len(f) > 3 || len(f) > 1 && f[0] == '0' {
			return a, false
		}
		n := 0
		for _, c := range []byte(f) {
			if c < '0' || c > '9' {
				return a, false
			}
			n = n*10 + int(c-'0')
		}
		if n > 255 {
			return a, false
		}
		a[i] = byte(n)
	}
	return a, true
}

// hostsFile is the sandbox's /etc/hosts: localhost, and each name's address.
func hostsFile(hostname string, n *NetSpec) string {
	var b strings.Builder
	b.WriteString("127.0.0.1\tlocalhost " + hostname + "\n::1\tlocalhost ip6-localhost ip6-loopback\n")
	if n != nil {
		for _, h := range n.Hosts {
			b.WriteString(h.Addr + "\t" + h.Name + "\n")
		}
	}
	return b.String()
}

// nsswitch is the sandbox's /etc/nsswitch.conf: names from files, and
// from the sandbox's own resolver when the policy allows wildcards.
func nsswitch(n *NetSpec) string {
	hosts := "files"
	if n != nil && len(n.Wildcards) > 0 {
		hosts = "files dns"
	}
	return "passwd: files\ngroup: files\nshadow: files\nhosts: " + hosts + "\nnetworks: files\nprotocols: files\nservices: files\n"
}

// resolvConf is the sandbox's /etc/resolv.conf.
func resolvConf(n *NetSpec) string {
	if n != nil && len(n.Wildcards) > 0 {
		return "# the sandbox's own resolver: it answers the names the network policy allows, and forwards nothing\nnameserver 127.0.0.1\noptions timeout:2 attempts:1\n"
	}
	return "# no DNS in the sandbox\n"
}

// setUpNetwork gives the loopback the names' range and listens on it, in
// init's first stage (which may bind any port). It returns the listening
// sockets, open across the exec into stage two.
func setUpNetwork(n *NetSpec) (listening []int, dns int, err error) {
	dns = -1
	if err := addLoopbackRange(); err != nil {
		return nil, -1, err
	}
	if len(n.Wildcards) > 0 {
		if dns, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0); err != nil {
			return nil, -1, fmt.Errorf("network: %w", err)
		}
		if err := unix.Bind(dns, &unix.SockaddrInet4{Port: 53, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
			unix.Close(dns)
			return nil, -1, fmt.Errorf("network: the resolver: %w", err)
		}
	}
	fds, err := listenPorts(n.Ports)
	if err != nil && dns >= 0 {
		unix.Close(dns)
		dns = -1
	}
	return fds, dns, err
}

// listenPorts listens on every address of the loopback on each port.
func listenPorts(ports []int) ([]int, error) {
	var fds []int
	for _, port := range ports {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
		if err != nil {
			CloseAll(fds)
			return nil, fmt.Errorf("network: %w", err)
		}
		fds = append(fds, fd)
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
		if err := unix.Bind(fd, &unix.SockaddrInet4{Port: port}); err != nil {
			CloseAll(fds)
			return nil, fmt.Errorf("network: listening on port %d: %w", port, err)
		}
		if err := unix.Listen(fd, 128); err != nil {
			CloseAll(fds)
			return nil, fmt.Errorf("network: %w", err)
		}
	}
	return fds, nil
}

// addLoopbackRange adds NetBase/15 to the loopback interface: on loopback,
// the kernel makes the whole range local.
func addLoopbackRange() error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("network: netlink: %w", err)
	}
	defer unix.Close(fd)
	lo, err := loopbackIndex()
	if err != nil {
		return fmt.Errorf("network: %w", err)
	}
	addr := netBase
	attr := func(typ uint16, data []byte) []byte {
		b := make([]byte, unix.SizeofRtAttr+len(data))
		binary.NativeEndian.PutUint16(b[0:], uint16(len(b)))
		binary.NativeEndian.PutUint16(b[2:], typ)
		copy(b[unix.SizeofRtAttr:], data)
		return b
	}
	ifa := unix.IfAddrmsg{Family: unix.AF_INET, Prefixlen: uint8(netRangeBits), Scope: unix.RT_SCOPE_HOST, Index: lo}
	body := append((*[unix.SizeofIfAddrmsg]byte)(unsafe.Pointer(&ifa))[:], attr(unix.IFA_LOCAL, addr[:])...)
	body = append(body, attr(unix.IFA_ADDRESS, addr[:])...)
	h := unix.NlMsghdr{Len: uint32(unix.SizeofNlMsghdr + len(body)), Type: unix.RTM_NEWADDR,
		Flags: unix.NLM_F_REQUEST | unix.NLM_F_ACK | unix.NLM_F_CREATE | unix.NLM_F_EXCL, Seq: 1}
	msg := append((*[unix.SizeofNlMsghdr]byte)(unsafe.Pointer(&h))[:], body...)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("network: netlink: %w", err)
	}
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return fmt.Errorf("network: netlink: %w", err)
	}
	msgs, err := syscall.ParseNetlinkMessage(buf[:n])
	if err != nil || len(msgs) == 0 || msgs[0].Header.Type != unix.NLMSG_ERROR || len(msgs[0].Data) < 4 {
		return fmt.Errorf("network: netlink gave no answer")
	}
	if code := int32(binary.NativeEndian.Uint32(msgs[0].Data[:4])); code != 0 {
		return fmt.Errorf("network: adding %s/%d to the loopback: %w", netRange, netRangeBits, unix.Errno(-code))
	}
	return nil
}

// loopbackIndex is the loopback interface's index.
func loopbackIndex() (uint32, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return 0, err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFINDEX, ifr); err != nil {
		return 0, fmt.Errorf("the loopback's index: %w", err)
	}
	return ifr.Uint32(), nil
}

// serveConnections, in init's second stage, hands each connection the
// program opens on the listening sockets to the host, with the name its
// address stands for (the sandbox's /etc/hosts, which init wrote, and the
// names its resolver gave out). A connection to any other address of the
// loopback goes with that address for a name, which no policy entry
// allows. With dns (not -1), the resolver answers there for the hosts and
// for names under the wildcards.
func serveConnections(c *Conn, fds []int, dns int, wildcards []string) {
	names := &sandboxNames{byAddr: map[addr4]string{}, byName: map[string]addr4{}, wildcards: wildcards, next: wildcardBase}
	if b, err := os.ReadFile("/etc/hosts"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) == 2 {
				if a, ok := parseAddr4(f[0]); ok && inNetRange(a) {
					names.add(f[1], a)
				}
			}
		}
	}
	if dns >= 0 {
		go serveDNS(dns, names)
	}
	for _, fd := range fds {
		go func() {
			for {
				nfd, _, err := unix.Accept4(fd, unix.SOCK_CLOEXEC)
				if err != nil {
					if err == unix.EINTR || err == unix.ECONNABORTED {
						continue
					}
					return
				}
				sa, err := unix.Getsockname(nfd)
				in4, ok := sa.(*unix.SockaddrInet4)
				if err != nil || !ok {
					unix.Close(nfd)
					continue
				}
				dst := addr4(in4.Addr)
				name, ok := names.name(dst)
				if !ok {
					// An address of the loopback, not a name's: the
					// proxy refuses it, and the Result says so.
					name = dst.String()
				}
				_ = c.Send(Message{Conn: &ConnInfo{Name: name, Port: in4.Port}}, nfd)
				unix.Close(nfd)
			}
		}()
	}
}

// landlockNetPort is the kernel's struct landlock_net_port_attr.
type landlockNetPort struct {
	allowedAccess uint64
	port          uint64
}

// landlockRuleNetPort is LANDLOCK_RULE_NET_PORT.
const landlockRuleNetPort = 2

// allowConnect adds rules that let the sandbox connect to the ports.
func allowConnect(ruleset int, ports []int) error {
	for _, port := range ports {
		rule := landlockNetPort{allowedAccess: unix.LANDLOCK_ACCESS_NET_CONNECT_TCP, port: uint64(port)}
		_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), landlockRuleNetPort,
			uintptr(unsafe.Pointer(&rule)), 0, 0, 0)
		if errno != 0 {
			return fmt.Errorf("landlock rule for port %d: %w", port, errno)
		}
	}
	return nil
}

// fdList writes descriptors for stage two's arguments; parseFDList reads
// them.
func fdList(fds []int) string {
	parts := make([]string, len(fds))
	for i, fd := range fds {
		parts[i] = strconv.Itoa(fd)
	}
	return strings.Join(parts, ",")
}

func parseFDList(s string) []int {
	var out []int
	for _, p := range strings.Split(s, ",") {
		if n, err := strconv.Atoi(p); err == nil && n > 2 {
			out = append(out, n)
		}
	}
	return out
}

// Network secrets. The values stay on the host, with the run's proxy; the
// program's environment holds placeholders, and, so that its clients
// trust the certificates the proxy shows for the secrets' hosts, a CA
// bundle: the host's roots and the authority's certificate. Only a
// sandbox given a secret has either.

// CABundlePath is the sandbox's CA bundle, when it has secrets.
const CABundlePath = "/etc/codecell-ca-bundle.pem"

// CAPath holds the authority's certificate alone, for clients that add
// it to roots of their own (Node.js, by NODE_EXTRA_CA_CERTS): Node parses
// every certificate of that file at each start, about 45 ms for a host's
// whole bundle.
const CAPath = "/etc/codecell-ca.pem"

// systemBundles are where Linux distributions keep their roots, as
// crypto/x509 looks for them.
var systemBundles = []string{
	"/etc/ssl/certs/ca-certificates.crt",
	"/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/ssl/ca-bundle.pem",
	"/etc/pki/tls/cacert.pem",
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
	"/etc/ssl/cert.pem",
}

// caBundle is the host's roots and ca, read by init while it still sees
// the host's /etc.
func caBundle(ca string) string {
	for _, path := range systemBundles {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			s := string(b)
			if !strings.HasSuffix(s, "\n") {
				s += "\n"
			}
			return s + "# codecell's egress authority: the proxy's certificates for the hosts of network secrets\n" + ca
		}
	}
	return ca
}
