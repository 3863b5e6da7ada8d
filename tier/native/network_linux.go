//go:build linux

package native

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/egress"
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

// netRange is the sandbox's range for names, and netBase the loopback's
// own address in it.
var (
	netRange = netip.MustParsePrefix("198.18.0.0/15")
	netBase  = netip.MustParseAddr("198.18.0.1")
)

// maxNetHosts bounds the names a sandbox is given.
const maxNetHosts = 1000

// netSpecFor works out a sandbox's network from a run's policy: the names
// the narrowest layer lists that the whole policy allows on some port, and
// the ports.
func netSpecFor(p *egress.Policy) (*netSpec, error) {
	if p.Empty() {
		return nil, nil
	}
	last := p.Layers[len(p.Layers)-1]
	ports := p.Ports()
	spec := &netSpec{}
	seen := map[string]bool{}
	next := netBase.Next()
	for _, r := range last.Allow {
		if r.Host == "" || seen[r.Host] {
			continue
		}
		seen[r.Host] = true
		if sub, ok := strings.CutPrefix(r.Host, "*."); ok {
			spec.Wildcards = append(spec.Wildcards, "."+sub)
			continue
		}
		allowed := false
		for _, port := range ports {
			allowed = allowed || p.Allows(r.Host, port).Allowed
		}
		if !allowed {
			continue
		}
		if len(spec.Hosts) == maxNetHosts {
			return nil, fmt.Errorf("the network policy names more than %d hosts", maxNetHosts)
		}
		spec.Hosts = append(spec.Hosts, hostAddr{Name: r.Host, Addr: next.String()})
		next = next.Next()
	}
	spec.Ports = ports
	sort.Ints(spec.Ports)
	if len(spec.Hosts) == 0 && len(spec.Wildcards) == 0 || len(spec.Ports) == 0 {
		return nil, nil
	}
	return spec, nil
}

// wildcardBase is where the resolver's addresses for wildcard names
// start: past every host's.
var wildcardBase = netip.MustParseAddr("198.18.16.0")

// hostsFile is the sandbox's /etc/hosts: localhost, and each name's address.
func hostsFile(hostname string, n *netSpec) string {
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
func nsswitch(n *netSpec) string {
	hosts := "files"
	if n != nil && len(n.Wildcards) > 0 {
		hosts = "files dns"
	}
	return "passwd: files\ngroup: files\nshadow: files\nhosts: " + hosts + "\nnetworks: files\nprotocols: files\nservices: files\n"
}

// resolvConf is the sandbox's /etc/resolv.conf.
func resolvConf(n *netSpec) string {
	if n != nil && len(n.Wildcards) > 0 {
		return "# the sandbox's own resolver: it answers the names the network policy allows, and forwards nothing\nnameserver 127.0.0.1\noptions timeout:2 attempts:1\n"
	}
	return "# no DNS in the sandbox\n"
}

// setUpNetwork gives the loopback the names' range and listens on it, in
// init's first stage (which may bind any port). It returns the listening
// sockets, open across the exec into stage two.
func setUpNetwork(n *netSpec) (listening []int, dns int, err error) {
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
			closeAll(fds)
			return nil, fmt.Errorf("network: %w", err)
		}
		fds = append(fds, fd)
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
		if err := unix.Bind(fd, &unix.SockaddrInet4{Port: port}); err != nil {
			closeAll(fds)
			return nil, fmt.Errorf("network: listening on port %d: %w", port, err)
		}
		if err := unix.Listen(fd, 128); err != nil {
			closeAll(fds)
			return nil, fmt.Errorf("network: %w", err)
		}
	}
	return fds, nil
}

// addLoopbackRange adds netBase/15 to the loopback interface: on loopback,
// the kernel makes the whole range local.
func addLoopbackRange() error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("network: netlink: %w", err)
	}
	defer unix.Close(fd)
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		return fmt.Errorf("network: %w", err)
	}
	addr := netBase.As4()
	attr := func(typ uint16, data []byte) []byte {
		b := make([]byte, unix.SizeofRtAttr+len(data))
		binary.NativeEndian.PutUint16(b[0:], uint16(len(b)))
		binary.NativeEndian.PutUint16(b[2:], typ)
		copy(b[unix.SizeofRtAttr:], data)
		return b
	}
	ifa := unix.IfAddrmsg{Family: unix.AF_INET, Prefixlen: uint8(netRange.Bits()), Scope: unix.RT_SCOPE_HOST, Index: uint32(lo.Index)}
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
		return fmt.Errorf("network: adding %s to the loopback: %w", netRange, unix.Errno(-code))
	}
	return nil
}

// serveConnections, in init's second stage, hands each connection the
// program opens on the listening sockets to the host, with the name its
// address stands for (the sandbox's /etc/hosts, which init wrote, and the
// names its resolver gave out). A connection to any other address of the
// loopback goes with that address for a name, which no policy entry
// allows. With dns (not -1), the resolver answers there for the hosts and
// for names under the wildcards.
func serveConnections(c *conn, fds []int, dns int, wildcards []string) {
	names := &sandboxNames{byAddr: map[netip.Addr]string{}, byName: map[string]netip.Addr{}, wildcards: wildcards, next: wildcardBase}
	if b, err := os.ReadFile("/etc/hosts"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) == 2 {
				if a, err := netip.ParseAddr(f[0]); err == nil && netRange.Contains(a) {
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
				dst := netip.AddrFrom4(in4.Addr)
				name, ok := names.name(dst)
				if !ok {
					// An address of the loopback, not a name's: the
					// proxy refuses it, and the Result says so.
					name = dst.String()
				}
				_ = c.send(message{Conn: &connInfo{Name: name, Port: in4.Port}}, nfd)
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

// proxying is the host's side of a sandbox's network: the proxy, and the
// connections it serves for the run.
type proxying struct {
	proxy *egress.Proxy
	ctx   context.Context
	stop  context.CancelFunc
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []codecell.NetworkConnection
}

// serve hands one connection the program opened to the proxy.
func (px *proxying) serve(info *connInfo, fd int) {
	f := os.NewFile(uintptr(fd), "conn")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return
	}
	px.wg.Add(1)
	go func() {
		defer px.wg.Done()
		got := px.proxy.Serve(px.ctx, c, info.Name, info.Port)
		px.mu.Lock()
		defer px.mu.Unlock()
		if len(px.conns) < maxListedConns {
			px.conns = append(px.conns, codecell.NetworkConnection(got))
		}
	}()
}

// maxListedConns bounds the connections a Result lists.
const maxListedConns = 1000

// finish ends the connections still open, once the program is gone, and
// returns them all.
func (px *proxying) finish() []codecell.NetworkConnection {
	px.stop()
	px.wg.Wait()
	px.mu.Lock()
	defer px.mu.Unlock()
	return append([]codecell.NetworkConnection{}, px.conns...)
}

// take returns the connections that ended since the last take, and
// forgets them.
func (px *proxying) take() []codecell.NetworkConnection {
	px.mu.Lock()
	defer px.mu.Unlock()
	out := px.conns
	px.conns = nil
	if out == nil {
		out = []codecell.NetworkConnection{}
	}
	return out
}

// networkIsolation says what a run's network was.
func networkIsolation(n *netSpec) string {
	var names []string
	for _, h := range n.Hosts {
		names = append(names, h.Name)
	}
	ports := make([]string, len(n.Ports))
	for i, p := range n.Ports {
		ports[i] = strconv.Itoa(p)
	}
	for _, w := range n.Wildcards {
		names = append(names, "*"+w)
	}
	resolver := "names resolve from the sandbox's /etc/hosts alone (no DNS)"
	if len(n.Wildcards) > 0 {
		resolver = "names resolve in the sandbox alone (its /etc/hosts, and its own resolver for the wildcards, which forwards nothing)"
	}
	secrets := ""
	if len(n.Secrets) > 0 {
		secrets = fmt.Sprintf("; secrets %s added by the proxy to the requests to their hosts, whose TLS it ends with a certificate authority this sandbox alone trusts (the program holds placeholders)", strings.Join(n.Secrets, ", "))
	}
	return fmt.Sprintf("only %s on ports %s, through codecell's proxy on the host, which checks the TLS server name or HTTP Host and refuses private addresses unless a range is listed; %s; no other address is routed%s",
		strings.Join(names, ", "), strings.Join(ports, ", "), resolver, secrets)
}

// Network secrets. The values stay on the host, with the run's proxy; the
// program's environment holds placeholders, and, so that its clients
// trust the certificates the proxy shows for the secrets' hosts, a CA
// bundle: the host's roots and the authority's certificate. Only a
// sandbox given a secret has either.

// caBundlePath is the sandbox's CA bundle, when it has secrets.
const caBundlePath = "/etc/codecell-ca-bundle.pem"

// caBundleEnv are the variables that point clients at the bundle:
// OpenSSL (Python's ssl, curl), requests, curl, Node.js, pip, and git
// (whose libcurl, GnuTLS's on Debian, reads none of the others).
var caBundleEnv = []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "PIP_CERT", "GIT_SSL_CAINFO"}

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

// egressAuthority is the tier's certificate authority for secrets' hosts,
// made on first use and replaced past half its life.
type egressAuthority struct {
	mu sync.Mutex
	a  *egress.Authority
}

func (e *egressAuthority) get() (*egress.Authority, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.a == nil || !e.a.Fresh(time.Now()) {
		a, err := egress.NewAuthority()
		if err != nil {
			return nil, fmt.Errorf("network secrets: a certificate authority: %w", err)
		}
		e.a = a
	}
	return e.a, nil
}

// secretsFor reads the values of the secrets whose hosts the policy
// reaches, with a new placeholder each, and gives spec the authority's
// certificate and the secrets' names. A secret none of whose hosts the
// program can reach is left out: its sandbox has no placeholder for it.
func (t *Tier) secretsFor(p *egress.Policy, layers []codecell.NetworkLayer, spec *netSpec) ([]*egress.Secret, *egress.Authority, error) {
	if spec == nil {
		return nil, nil, nil
	}
	var out []*egress.Secret
	for _, l := range layers {
		for _, s := range l.Secrets {
			reached := false
			for _, h := range s.Hosts {
				if r, err := egress.ParseRule(h); err == nil && p.Reaches(r) {
					reached = true
				}
			}
			if !reached {
				continue
			}
			sec, err := egress.LoadSecret(s.Spec(), nil, nil)
			if err != nil {
				return nil, nil, fmt.Errorf("network secrets: %w", err)
			}
			out = append(out, sec)
			spec.Secrets = append(spec.Secrets, sec.Name)
		}
	}
	if len(out) == 0 {
		return nil, nil, nil
	}
	auth, err := t.egressCA.get()
	if err != nil {
		return nil, nil, err
	}
	spec.CA = string(auth.PEM())
	return out, auth, nil
}

// secretEnv is the program's environment with the secrets' placeholders
// and the CA bundle's variables, which replace any of the same name.
func secretEnv(env []string, secrets []*egress.Secret, layers []codecell.NetworkLayer) []string {
	set := map[string]string{}
	for _, v := range caBundleEnv {
		set[v] = caBundlePath
	}
	for _, s := range secrets {
		set[egress.EnvVar(s.Name)] = s.Placeholder
		for _, l := range layers {
			for _, d := range l.Secrets {
				if d.Name == s.Name && d.SandboxEnv != "" {
					set[d.SandboxEnv] = s.Placeholder
				}
			}
		}
	}
	out := make([]string, 0, len(env)+len(set))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := set[k]; !ok {
			out = append(out, kv)
		}
	}
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, k+"="+set[k])
	}
	return out
}
