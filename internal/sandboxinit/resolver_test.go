//go:build linux

package sandboxinit

import (
	"encoding/binary"
	"net/netip"
	"strconv"
	"strings"
	"testing"
)

func testNames() *sandboxNames {
	n := &sandboxNames{byAddr: map[addr4]string{}, byName: map[string]addr4{}, wildcards: []string{".pkg.test"}, next: wildcardBase}
	n.add("api.test", addr4{198, 18, 0, 2})
	return n
}

// query is a DNS query of one question.
func query(name string, qtype uint16) []byte {
	q := []byte{0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0}
	for _, l := range splitLabels(name) {
		q = append(q, byte(len(l)))
		q = append(q, l...)
	}
	q = append(q, 0, byte(qtype>>8), byte(qtype), 0, 1)
	return q
}

func splitLabels(name string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(name); i++ {
		if i == len(name) || name[i] == '.' {
			out = append(out, name[start:i])
			start = i + 1
		}
	}
	return out
}

func TestResolverAnswers(t *testing.T) {
	n := testNames()
	for _, c := range []struct {
		name    string
		qtype   uint16
		rcode   byte
		answers uint16
		addr    string
	}{
		{"api.test", 1, 0, 1, "198.18.0.2"},
		{"API.test", 1, 0, 1, "198.18.0.2"},
		{"api.test", 28, 0, 0, ""},
		{"files.pkg.test", 1, 0, 1, "198.18.16.0"},
		{"files.pkg.test", 1, 0, 1, "198.18.16.0"},
		{"other.pkg.test", 1, 0, 1, "198.18.16.1"},
		{"pkg.test", 1, 3, 0, ""},
		{"secret.attacker.example", 1, 3, 0, ""},
	} {
		a := dnsAnswer(query(c.name, c.qtype), n)
		if len(a) < 12 || a[3]&0x0f != c.rcode || binary.BigEndian.Uint16(a[6:]) != c.answers || a[0] != 0x12 || a[1] != 0x34 || a[2]&0x80 == 0 {
			t.Errorf("%s/%d: % x", c.name, c.qtype, a)
			continue
		}
		if c.addr != "" {
			got := netip.AddrFrom4([4]byte(a[len(a)-4:]))
			if got.String() != c.addr {
				t.Errorf("%s: %s, want %s", c.name, got, c.addr)
			}
		}
	}
	if dnsAnswer([]byte{1, 2, 0x80}, n) != nil || dnsAnswer(append(query("api.test", 1)[:2], 0x80), n) != nil {
		t.Error("answered what is not a query")
	}
}

// FuzzResolver: any packet a program sends the sandbox's resolver gets an
// answer of at most a question and one record, or none, never a panic; an
// answer is a response to its query, and an address it gives is one of the
// sandbox's range, for a name the sandbox may reach.
func FuzzResolver(f *testing.F) {
	for _, s := range [][]byte{
		query("api.test", 1), query("files.pkg.test", 28), query("x.example", 1),
		{0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 0x0c, 0, 1, 0, 1},
		{0, 0, 1, 0, 0, 2, 0, 0, 0, 0, 0, 0},
		{0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 63},
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q []byte) {
		a := dnsAnswer(q, testNames())
		if len(a) > 12+len(q)+16 {
			t.Fatalf("an answer of %d bytes to a query of %d", len(a), len(q))
		}
		if a == nil {
			return
		}
		if len(a) < 12 || a[0] != q[0] || a[1] != q[1] || a[2]&0x80 == 0 || binary.BigEndian.Uint16(a[6:]) > 1 {
			t.Fatalf("answer % x to % x", a, q)
		}
		if binary.BigEndian.Uint16(a[6:]) == 1 {
			name, _, ok := dnsName(a, 12)
			name = strings.TrimSuffix(strings.ToLower(name), ".")
			ip := addr4(a[len(a)-4:])
			if !ok || !inNetRange(ip) || name != "api.test" && !strings.HasSuffix(name, ".pkg.test") {
				t.Fatalf("%q answered with %s: % x", name, ip, a)
			}
		}
	})
}

// The resolver's addresses are those net/netip would give: the range, the
// first wildcard address, the loopback's own, one after another.
func TestAddr4(t *testing.T) {
	prefix := netip.MustParsePrefix("198.18.0.0/15")
	if netRange.String()+"/"+strconv.Itoa(netRangeBits) != prefix.String() {
		t.Errorf("range %s/%d, want %s", netRange, netRangeBits, prefix)
	}
	if netBase.String() != NetBase || !inNetRange(netBase) {
		t.Errorf("base %s, want %s in the range", netBase, NetBase)
	}
	if !inNetRange(wildcardBase) {
		t.Errorf("wildcard base %s outside the range", wildcardBase)
	}
	for _, s := range []string{"0.0.0.0", "198.17.255.255", "198.18.0.0", "198.18.0.1", "198.19.255.255", "198.20.0.0", "255.255.255.255", "127.0.0.1"} {
		a, ok := parseAddr4(s)
		want := netip.MustParseAddr(s)
		if !ok || a != addr4(want.As4()) || a.String() != s {
			t.Errorf("%s: %v %v", s, a, ok)
		}
		if inNetRange(a) != prefix.Contains(want) {
			t.Errorf("%s: in range %v, want %v", s, inNetRange(a), prefix.Contains(want))
		}
		if next := want.Next(); next.IsValid() && a.next() != addr4(next.As4()) {
			t.Errorf("after %s: %s, want %s", s, a.next(), next)
		}
	}
}

// FuzzParseAddr4: init reads the addresses of its /etc/hosts as net/netip
// reads IPv4 addresses, accepting and refusing the same strings.
func FuzzParseAddr4(f *testing.F) {
	for _, s := range []string{"198.18.0.2", "::1", "127.0.0.1", "01.2.3.4", "1.2.3", "1.2.3.4.5", "256.1.1.1", "1.2.3.4%eth0", "", "1..2.3", "::ffff:1.2.3.4", "0.0.0.0", "+1.2.3.4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, ok := parseAddr4(s)
		want, err := netip.ParseAddr(s)
		wantOK := err == nil && want.Is4()
		if ok != wantOK || ok && a != addr4(want.As4()) {
			t.Fatalf("%q: %v %v, net/netip: %v %v", s, a, ok, want, err)
		}
	})
}
