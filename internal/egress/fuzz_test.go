package egress

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
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

// FuzzForward: whatever requests a program sends on a connection to a
// host, what reaches the server parses as HTTP/1.1 requests for that
// host; a secret's value reaches only its own hosts, its placeholder
// never does, and a header secret is in every request that goes.
func FuzzForward(f *testing.F) {
	secrets := testSecrets(f)
	api, pkg := secrets[0], secrets[1]
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer " + api.Placeholder + "\r\n\r\n",
		"POST /x HTTP/1.1\r\nHost: api.test\r\nContent-Length: 5\r\n\r\nhelloGET / HTTP/1.1\r\nHost: api.test\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: files.pkg.test:8080\r\nTransfer-Encoding: chunked\r\nX: " + pkg.Placeholder + "\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: api.test\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: api.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n" + pkg.Placeholder,
		"GET / HTTP/1.1\r\nHost: other.test\r\nX: " + api.Placeholder + "\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: api.test\r\n X: folded\r\n\r\n",
		"GET http://api.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: other.test\r\nContent-Length: 80\r\n\r\n" + pkg.Placeholder,
	} {
		f.Add([]byte(s), "api.test", 443)
		f.Add([]byte(s), "files.pkg.test", 8080)
		f.Add([]byte(s), "other.test", 80)
	}
	f.Fuzz(func(t *testing.T, in []byte, host string, port int) {
		host = strings.ToLower(host)
		if checkName(host) != nil || strings.Contains(host, "*") {
			return // a connection is opened for a name
		}
		var out bytes.Buffer
		upgraded, _ := forward(bytes.NewReader(in), &out, secrets, host, port, nil)
		got := out.Bytes()
		for _, s := range secrets {
			if !s.For(host, port) && bytes.Contains(got, []byte(s.Placeholder)) {
				t.Fatalf("the placeholder of %s went to %s:%d: %q", s.Name, host, port, got)
			}
		}
		if upgraded {
			// What follows an upgrade goes as it is.
			if i := bytes.Index(got, []byte("\r\n\r\n")); i >= 0 {
				got = got[:i+4]
			}
		}
		for _, s := range secrets {
			if bytes.Contains(got, []byte(s.value)) && !s.For(host, port) {
				t.Fatalf("the value of %s went to %s:%d: %q", s.Name, host, port, got)
			}
		}
		if upgraded {
			return
		}
		br := bufio.NewReader(bytes.NewReader(got))
		for {
			req, err := http.ReadRequest(br)
			if err == io.EOF {
				return
			}
			if err != nil {
				t.Fatalf("what went out does not parse: %v: %q", err, got)
			}
			if h, _, _ := strings.Cut(req.Host, ":"); strings.TrimSuffix(strings.ToLower(h), ".") != host {
				t.Fatalf("a request for %q went to %s", req.Host, host)
			}
			for _, s := range secrets {
				if !s.For(host, port) {
					continue
				}
				for name, v := range req.Header {
					if strings.Contains(strings.Join(v, ""), s.Placeholder) {
						t.Fatalf("the placeholder of %s went in %s", s.Name, name)
					}
				}
				if s.Header != "" && req.Header.Get(s.Header) != s.headerValue() {
					t.Fatalf("%s: %q", s.Header, req.Header.Get(s.Header))
				}
			}
			if _, err := io.Copy(io.Discard, req.Body); err != nil {
				return // the program's body ended early, or held a stray placeholder: forward stopped there
			}
		}
	})
}
