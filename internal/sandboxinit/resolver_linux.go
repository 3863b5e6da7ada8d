//go:build linux

package sandboxinit

import (
	"encoding/binary"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// The sandbox's resolver, for a policy that allows wildcards: init answers
// DNS queries on 127.0.0.1:53 itself, and nothing is ever forwarded, so no
// query — and nothing a program hides in one — leaves the sandbox. A name
// the sandbox's hosts give, or one under an allowed wildcard, gets an
// address of the names' range (a new one the first time it is asked); any
// other name is NXDOMAIN. Only A records exist: AAAA and the rest come back
// empty. The host's proxy still checks every connection against the whole
// policy, so an answer here grants nothing by itself.

// sandboxNames maps the names' addresses to names, and back: the hosts'
// names from the start, and wildcard names as they are asked.
type sandboxNames struct {
	mu        sync.Mutex
	byAddr    map[addr4]string
	byName    map[string]addr4
	wildcards []string // allowed suffixes, each starting with "."
	next      addr4
	given     int
}

// maxAsked bounds the wildcard names one sandbox may ask for.
const maxAsked = 4096

func (n *sandboxNames) add(name string, a addr4) {
	n.byAddr[a] = name
	n.byName[name] = a
}

// name is the name an address stands for.
func (n *sandboxNames) name(a addr4) (string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	name, ok := n.byAddr[a]
	return name, ok
}

// resolve gives a name its address, if it has or may have one.
func (n *sandboxNames) resolve(name string) (addr4, bool) {
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	n.mu.Lock()
	defer n.mu.Unlock()
	if a, ok := n.byName[name]; ok {
		return a, true
	}
	for _, w := range n.wildcards {
		if strings.HasSuffix(name, w) && len(name) > len(w) {
			if n.given >= maxAsked || !inNetRange(n.next) {
				return addr4{}, false
			}
			a := n.next
			n.next = n.next.next()
			n.given++
			n.add(name, a)
			return a, true
		}
	}
	return addr4{}, false
}

// serveDNS answers queries on the UDP socket fd until it fails.
func serveDNS(fd int, names *sandboxNames) {
	buf := make([]byte, 512)
	for {
		n, from, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			if err == unix.EINTR {
				continue
			}
			return
		}
		if answer := dnsAnswer(buf[:n], names); answer != nil {
			_ = unix.Sendto(fd, answer, 0, from)
		}
	}
}

// DNS's numbers.
const (
	dnsTypeA     = 1
	dnsClassIN   = 1
	dnsNXDomain  = 3
	dnsFormErr   = 1
	dnsNotImp    = 4
	dnsHeaderLen = 12
)

// dnsAnswer answers one query message, or returns nil for what is not one.
func dnsAnswer(q []byte, names *sandboxNames) []byte {
	if len(q) < dnsHeaderLen || q[2]&0x80 != 0 { // too short, or a response
		return nil
	}
	reply := func(rcode byte, question []byte, answer []byte) []byte {
		out := make([]byte, dnsHeaderLen, dnsHeaderLen+len(question)+len(answer))
		copy(out[0:2], q[0:2])
		out[2] = 0x80 | q[2]&0x01 | 0x04 // a response, RD as asked, authoritative
		out[3] = rcode
		if question != nil {
			binary.BigEndian.PutUint16(out[4:], 1)
		}
		if answer != nil {
			binary.BigEndian.PutUint16(out[6:], 1)
		}
		return append(append(out, question...), answer...)
	}
	if q[2]&0x78 != 0 || binary.BigEndian.Uint16(q[4:]) != 1 { // not a standard query of one question
		return reply(dnsNotImp, nil, nil)
	}
	name, end, ok := dnsName(q, dnsHeaderLen)
	if !ok || end+4 > len(q) {
		return reply(dnsFormErr, nil, nil)
	}
	question := q[dnsHeaderLen : end+4]
	qtype, qclass := binary.BigEndian.Uint16(q[end:]), binary.BigEndian.Uint16(q[end+2:])
	a, known := names.resolve(name)
	if !known {
		return reply(dnsNXDomain, question, nil)
	}
	if qtype != dnsTypeA || qclass != dnsClassIN {
		return reply(0, question, nil) // the name exists; it has no such record
	}
	answer := []byte{0xc0, dnsHeaderLen, 0, dnsTypeA, 0, dnsClassIN, 0, 0, 0, 60, 0, 4}
	ip := a
	return reply(0, question, append(answer, ip[:]...))
}

// dnsName reads an uncompressed name at off, and returns it with the
// offset after it.
func dnsName(m []byte, off int) (string, int, bool) {
	var labels []string
	total := 0
	for {
		if off >= len(m) {
			return "", 0, false
		}
		l := int(m[off])
		off++
		if l == 0 {
			break
		}
		if l > 63 || off+l > len(m) {
			return "", 0, false // compression pointers have no place in a question
		}
		total += l + 1
		if total > 255 {
			return "", 0, false
		}
		labels = append(labels, string(m[off:off+l]))
		off += l
	}
	if len(labels) == 0 {
		return "", 0, false
	}
	return strings.Join(labels, "."), off, true
}
