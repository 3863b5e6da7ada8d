// Package egress is the host's side of a sandbox's network: the rules of
// a network policy (which names, ports and addresses a program may reach)
// and the proxy that every connection a program opens is handed to. The
// proxy decides by the name the connection was opened for — the name the
// sandbox's resolver answered — and holds the connection to it: the TLS
// ClientHello's server name, or the HTTP request's Host, must be that
// name; the proxy resolves the name itself and refuses loopback, private,
// link-local and metadata addresses unless the policy lists a range that
// holds them. Nothing the program sends decides where the proxy connects.
//
// Secrets (secrets.go) are values the program holds placeholders of: the
// proxy puts them in the requests to their hosts alone, ending TLS for
// those hosts with an authority of its own (authority.go, intercept.go),
// and refuses a connection that carries a placeholder anywhere else.
package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Rule is one entry of a policy's allow or deny list.
type Rule struct {
	// Host is a lowercased DNS name, or "*." and a name for every name
	// under it (not the name itself); empty for a Prefix rule.
	Host string
	// Port is the one port the rule covers; 0 means 80 and 443.
	Port int
	// Prefix, when valid, is an address range the rule covers, on every
	// port: what lets a name that resolves there through.
	Prefix netip.Prefix
	// Text is the rule as it was written.
	Text string
}

// DefaultPorts are the ports a name rule without a port covers.
var DefaultPorts = []int{80, 443}

// maxRules bounds a list: a policy is written by people, not generated.
const maxRules = 1000

// ParseRule reads one entry: "api.github.com", "*.pypi.org",
// "example.com:8443", or an address range such as "10.0.0.0/8" or
// "192.168.1.5/32" (a range is written out in full: a bare address is a
// name's place, and is refused).
func ParseRule(s string) (Rule, error) {
	r := Rule{Text: s}
	s = strings.TrimSpace(s)
	if s == "" {
		return r, errors.New("an empty entry")
	}
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return r, fmt.Errorf("%q is not an address range such as 10.0.0.0/8: %v", s, err)
		}
		r.Prefix = p.Masked()
		return r, nil
	}
	host := s
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		if strings.Count(s, ":") > 1 {
			return r, fmt.Errorf("%q: an IPv6 address is not a name; list a range such as 2001:db8::/32", s)
		}
		port, err := strconv.Atoi(s[i+1:])
		if err != nil || port < 1 || port > 65535 {
			return r, fmt.Errorf("%q: the port must be a number from 1 to 65535", s)
		}
		host, r.Port = s[:i], port
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if _, err := netip.ParseAddr(host); err == nil {
		return r, fmt.Errorf("%q is an address, not a name: list names, and a range (such as %s/32) only to let a name that resolves into it through", s, host)
	}
	name := strings.TrimPrefix(host, "*.")
	if err := checkName(name); err != nil {
		return r, fmt.Errorf("%q: %v", s, err)
	}
	if strings.Contains(name, "*") {
		return r, fmt.Errorf("%q: a wildcard may only start a name, as in *.example.com", s)
	}
	if name != host && !strings.Contains(name, ".") {
		return r, fmt.Errorf("%q: a wildcard covers the names under a domain, such as *.example.com, not a whole top-level domain", s)
	}
	if numeric(name[strings.LastIndexByte(name, '.')+1:]) {
		return r, fmt.Errorf("%q: a name's last part is never a number, and clients read such a name as an address (2130706433 and 0177.0.0.1 are 127.0.0.1): list the name, or a range such as 127.0.0.1/32 to let a name that resolves into it through", s)
	}
	r.Host = host
	return r, nil
}

// numeric reports whether a label is a number as inet_aton reads one:
// decimal, octal with a 0, or hexadecimal with 0x.
func numeric(label string) bool {
	digits := label
	if rest, ok := strings.CutPrefix(label, "0x"); ok {
		digits = rest
		for _, c := range digits {
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
		return true
	}
	if digits == "" {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// checkName checks a DNS name: letters, digits, '-' and '_' in labels of
// 1 to 63 characters, at most 253 in all.
func checkName(name string) error {
	if name == "" || len(name) > 253 {
		return errors.New("a name has 1 to 253 characters")
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 {
			return errors.New("each part of a name has 1 to 63 characters")
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '*') {
				return fmt.Errorf("%q is not a DNS name (write internationalised names in their xn-- form)", name)
			}
		}
	}
	return nil
}

// Layer is one layer's network policy: what it allows, less what it
// denies.
type Layer struct {
	Name  string // where it came from: "config", "session", "exec"
	Allow []Rule
	Deny  []Rule
}

// ParseLayer reads a layer's lists.
func ParseLayer(name string, allow, deny []string) (Layer, error) {
	l := Layer{Name: name}
	if len(allow)+len(deny) > maxRules {
		return l, fmt.Errorf("the %s network policy lists %d entries; at most %d", name, len(allow)+len(deny), maxRules)
	}
	for _, list := range []struct {
		in  []string
		out *[]Rule
	}{{allow, &l.Allow}, {deny, &l.Deny}} {
		for _, s := range list.in {
			r, err := ParseRule(s)
			if err != nil {
				return l, fmt.Errorf("the %s network policy: %v", name, err)
			}
			*list.out = append(*list.out, r)
		}
	}
	return l, nil
}

// Policy is the layers of a run's network policy, widest first: a name is
// allowed when every layer allows it and none denies it, so each layer
// only narrows the ones before it.
type Policy struct {
	Layers []Layer
}

// Empty reports whether the policy allows nothing: no layer, or a layer
// that allows no name.
func (p *Policy) Empty() bool {
	if p == nil || len(p.Layers) == 0 {
		return true
	}
	for _, l := range p.Layers {
		if !l.allowsNames() {
			return true
		}
	}
	return false
}

func (l Layer) allowsNames() bool {
	for _, r := range l.Allow {
		if r.Host != "" {
			return true
		}
	}
	return false
}

// Verdict is what the policy says of a name and port.
type Verdict struct {
	Allowed bool
	// Rule is the entry that decided: the deny entry that refused, or the
	// narrowest layer's allow entry; empty when no entry allows.
	Rule string
	// Layer is the layer that decided a refusal.
	Layer string
}

// Allows says whether a program may connect to host:port.
func (p *Policy) Allows(host string, port int) Verdict {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if p == nil || len(p.Layers) == 0 {
		return Verdict{Layer: "defaults"}
	}
	var v Verdict
	for _, l := range p.Layers {
		for _, r := range l.Deny {
			if r.matchesName(host, port) {
				return Verdict{Rule: r.Text, Layer: l.Name}
			}
		}
		allowed := false
		for _, r := range l.Allow {
			if r.matchesName(host, port) {
				allowed, v.Rule = true, r.Text
				break
			}
		}
		if !allowed {
			return Verdict{Layer: l.Name}
		}
	}
	v.Allowed = true
	return v
}

// AllowsAddress says whether an address a name resolved to may be
// connected to: any public address; a special one (loopback, private,
// link-local, metadata, …) only when every layer lists a range that holds
// it and none denies one.
func (p *Policy) AllowsAddress(a netip.Addr) bool {
	a = a.Unmap()
	if p == nil || len(p.Layers) == 0 {
		return false
	}
	special := Special(a)
	for _, l := range p.Layers {
		for _, r := range l.Deny {
			if r.Prefix.IsValid() && r.Prefix.Contains(a) {
				return false
			}
		}
		if !special {
			continue
		}
		listed := false
		for _, r := range l.Allow {
			if r.Prefix.IsValid() && r.Prefix.Contains(a) {
				listed = true
				break
			}
		}
		if !listed {
			return false
		}
	}
	return true
}

func (r Rule) matchesName(host string, port int) bool {
	if r.Host == "" {
		return false
	}
	if r.Port != 0 {
		if port != r.Port {
			return false
		}
	} else if port != 80 && port != 443 {
		return false
	}
	if sub, ok := strings.CutPrefix(r.Host, "*."); ok {
		return strings.HasSuffix(host, "."+sub)
	}
	return host == r.Host
}

// Ports lists the ports some name may be reached on: those a sandbox
// listens on for its program's connections.
func (p *Policy) Ports() []int {
	seen := map[int]bool{}
	var out []int
	if p == nil || len(p.Layers) == 0 {
		return nil
	}
	for _, r := range p.Layers[len(p.Layers)-1].Allow {
		ports := []int{r.Port}
		if r.Port == 0 {
			ports = DefaultPorts
		}
		for _, port := range ports {
			if r.Host != "" && !seen[port] {
				seen[port] = true
				out = append(out, port)
			}
		}
	}
	return out
}

// specialPrefixes are ranges no connection reaches unless a policy lists
// them: besides what netip's predicates name, shared address space, the
// benchmarking range (where sandboxes' resolvers answer), documentation,
// reserved and NAT64 ranges. Special also counts every IPv6 address
// outside 2000::/3, the only one IANA gives out for global unicast: the
// IPv4-compatible (::a.b.c.d) and SIIT's translated (::ffff:0:a.b.c.d)
// forms, which a tunnel or translator may take to the IPv4 address they
// carry, among them.
var specialPrefixes = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"),
	netip.MustParsePrefix("64:ff9b:1::/48"),
	netip.MustParsePrefix("100::/64"),
	netip.MustParsePrefix("2001:2::/48"),
	netip.MustParsePrefix("2001:10::/28"),
	netip.MustParsePrefix("2001:20::/28"),
	netip.MustParsePrefix("2001:db8::/32"),
	netip.MustParsePrefix("2002::/16"),
	netip.MustParsePrefix("3fff::/20"),
	netip.MustParsePrefix("fc00::/7"),
}

// globalUnicast6 is IPv6's global unicast space.
var globalUnicast6 = netip.MustParsePrefix("2000::/3")

// Special reports whether an address is not a public unicast one:
// loopback, private, link-local (the cloud metadata address among them),
// multicast, unspecified, or one of specialPrefixes.
func Special(a netip.Addr) bool {
	a = a.Unmap()
	if !a.IsValid() || a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsInterfaceLocalMulticast() || a.IsMulticast() || a.IsUnspecified() || !a.IsGlobalUnicast() ||
		a.Is6() && !globalUnicast6.Contains(a) {
		return true
	}
	for _, p := range specialPrefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
