package egress

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzSniff: any first bytes a program sends give a name or an error,
// never a panic, and never more read than maxHello.
func FuzzSniff(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: a.example\r\n\r\n",
		"CONNECT a:1 HTTP/1.1\r\n\r\n",
		"\x16\x03\x01\x00\x05\x01\x00\x00\x01\x00",
		"\x16\x03\x01\xff\xff",
		"\x16\x03\x01\x00\x30\x01\x00\x00\x2c\x03\x03" + strings.Repeat("r", 32) + "\x00\x00\x02\x13\x01\x01\x00\x00\x05\x00\x00\x00\x01\x00",
		strings.Repeat("A", 20000),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		name, kind, head, err := sniff(bytes.NewReader(in))
		if len(head) > maxHello {
			t.Fatalf("read %d bytes", len(head))
		}
		if err == nil && (kind != "tls" && kind != "http") {
			t.Fatalf("kind %q for %q", kind, name)
		}
	})
}

// FuzzParseRule: any entry parses or is refused; what parses matches
// itself.
func FuzzParseRule(f *testing.F) {
	for _, s := range []string{"api.github.com", "*.pypi.org", "example.com:8443", "10.0.0.0/8", "fd00::/8", "a.*.b", "::1", "x:99999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRule(s)
		if err != nil || r.Host == "" || strings.HasPrefix(r.Host, "*.") {
			return
		}
		port := r.Port
		if port == 0 {
			port = 443
		}
		p := &Policy{Layers: []Layer{{Name: "t", Allow: []Rule{r}}}}
		if !p.Allows(r.Host, port).Allowed {
			t.Fatalf("%q does not allow %s:%d", s, r.Host, port)
		}
	})
}
