package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
)

func TestParseRule(t *testing.T) {
	for _, c := range []struct {
		in, host string
		port     int
		prefix   string
		bad      string
	}{
		{in: "API.GitHub.com.", host: "api.github.com"},
		{in: "*.pypi.org", host: "*.pypi.org"},
		{in: "example.com:8443", host: "example.com", port: 8443},
		{in: "10.1.2.3/8", prefix: "10.0.0.0/8"},
		{in: "fd00::/8", prefix: "fd00::/8"},
		{in: "", bad: "empty"},
		{in: "10.0.0.1", bad: "an address, not a name"},
		{in: "[::1]:443", bad: "IPv6"},
		{in: "*.com", bad: "top-level"},
		{in: "a.*.com", bad: "wildcard may only start"},
		{in: "exa mple.com", bad: "not a DNS name"},
		{in: "example.com:0", bad: "port"},
		{in: "example.com:http", bad: "port"},
		{in: "bücher.de", bad: "xn--"},
		{in: strings.Repeat("a", 64) + ".com", bad: "1 to 63"},
		// Names clients read as addresses: decimal, octal and hexadecimal.
		{in: "2130706433", bad: "never a number"},
		{in: "*.0.0.1", bad: "never a number"},
		{in: "0177.0.0.1:8080", bad: "never a number"},
		{in: "0x7f000001", bad: "never a number"},
		{in: "db.0x1", bad: "never a number"},
		{in: "node1.example.com", host: "node1.example.com"},
		{in: "1password.com", host: "1password.com"},
		{in: "x.0xg", host: "x.0xg"},
	} {
		r, err := ParseRule(c.in)
		switch {
		case c.bad != "":
			if err == nil || !strings.Contains(err.Error(), c.bad) {
				t.Errorf("%q: %v, want an error about %q", c.in, err, c.bad)
			}
		case err != nil:
			t.Errorf("%q: %v", c.in, err)
		case r.Host != c.host || r.Port != c.port || (c.prefix != "" && r.Prefix.String() != c.prefix):
			t.Errorf("%q: %+v", c.in, r)
		}
	}
}

func mustLayer(t *testing.T, name string, allow, deny []string) Layer {
	t.Helper()
	l, err := ParseLayer(name, allow, deny)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestPolicyLayersNarrow(t *testing.T) {
	p := &Policy{Layers: []Layer{
		mustLayer(t, "config", []string{"*.pypi.org", "api.github.com", "example.com:8443", "10.0.0.0/8"}, []string{"evil.pypi.org"}),
		mustLayer(t, "session", []string{"files.pypi.org", "evil.pypi.org", "api.github.com", "example.com:8443", "10.0.0.0/8"}, nil),
	}}
	for _, c := range []struct {
		host    string
		port    int
		allowed bool
	}{
		{"files.pypi.org", 443, true},
		{"FILES.pypi.org.", 80, true},
		{"files.pypi.org", 8080, false}, // not a listed port
		{"pypi.org", 443, false},        // the wildcard covers the names under it only
		{"other.pypi.org", 443, false},  // the session narrows
		{"evil.pypi.org", 443, false},   // the configuration denies
		{"api.github.com", 443, true},
		{"example.com", 8443, true},
		{"example.com", 443, false},
		{"github.com", 443, false},
		{"xfiles.pypi.org.attacker.net", 443, false},
	} {
		if v := p.Allows(c.host, c.port); v.Allowed != c.allowed {
			t.Errorf("%s:%d: %+v, want allowed=%v", c.host, c.port, v, c.allowed)
		}
	}
	for _, c := range []struct {
		addr    string
		allowed bool
	}{
		{"93.184.216.34", true},
		{"10.1.2.3", true},
		{"::ffff:10.1.2.3", true},
		{"127.0.0.1", false},
		{"169.254.169.254", false},
		{"192.168.1.1", false},
		{"fd00::1", false},
		{"::1", false},
		{"198.18.0.1", false},
		{"100.64.0.1", false},
		{"0.0.0.0", false},
		{"2606:4700::1111", true},
		// IPv6 forms that carry an IPv4 address (compatible, SIIT's
		// translated), and IPv6 outside 2000::/3 (site-local, SRv6).
		{"::127.0.0.1", false},
		{"::169.254.169.254", false},
		{"::ffff:0:127.0.0.1", false},
		{"::ffff:0:169.254.169.254", false},
		{"fec0::1", false},
		{"5f00::1", false},
		{"2001:2::1", false},
		{"3fff::1", false},
	} {
		if got := p.AllowsAddress(netip.MustParseAddr(c.addr)); got != c.allowed {
			t.Errorf("%s: %v, want %v", c.addr, got, c.allowed)
		}
	}
	if (&Policy{}).Allows("a.com", 443).Allowed || !(&Policy{}).Empty() {
		t.Error("an empty policy allows something")
	}
	if got := p.Ports(); fmt.Sprint(got) != "[80 443 8443]" {
		t.Errorf("ports %v", got)
	}
}

func TestSniff(t *testing.T) {
	hello := func(name string) []byte {
		a, b := net.Pipe()
		go func() {
			_ = tls.Client(a, &tls.Config{ServerName: name, InsecureSkipVerify: true}).Handshake()
		}()
		buf := make([]byte, maxHello)
		n, _ := io.ReadAtLeast(b, buf, 5)
		for n < 5+int(buf[3])<<8+int(buf[4]) {
			m, err := b.Read(buf[n:])
			if err != nil {
				break
			}
			n += m
		}
		a.Close()
		b.Close()
		return buf[:n]
	}
	for _, c := range []struct {
		in         []byte
		name, kind string
		bad        string
	}{
		{in: hello("API.example.com"), name: "api.example.com", kind: "tls"},
		{in: []byte("GET /x HTTP/1.1\r\nHost: api.example.com:8080\r\nUser-Agent: t\r\n\r\nbody"), name: "api.example.com", kind: "http"},
		{in: []byte("GET http://api.example.com/ HTTP/1.1\r\nHost: api.example.com\r\n\r\n"), name: "api.example.com", kind: "http"},
		{in: []byte("CONNECT evil.com:443 HTTP/1.1\r\nHost: evil.com:443\r\n\r\n"), bad: "CONNECT"},
		{in: []byte("GET / HTTP/1.0\r\n\r\n"), bad: "without a Host"},
		{in: []byte("SSH-2.0-OpenSSH_9.2\r\n"), bad: "names no server"},
		{in: []byte{0x16, 3, 1, 0, 4, 1, 0, 0, 0}, bad: "not a ClientHello"},
	} {
		name, kind, head, err := sniff(strings.NewReader(string(c.in)))
		if c.bad != "" {
			if err == nil || !strings.Contains(err.Error(), c.bad) {
				t.Errorf("%q: %q %v, want an error about %q", c.in[:min(len(c.in), 40)], name, err, c.bad)
			}
			continue
		}
		if err != nil || name != c.name || kind != c.kind || len(head) == 0 {
			t.Errorf("%q: %q %q %v", c.in[:min(len(c.in), 40)], name, kind, err)
		}
	}
}

// A proxy over loopback test servers, which a "test" name resolves to and
// the policy's 127.0.0.0/8 range lets it reach.
func TestProxy(t *testing.T) {
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "plain %s", r.Host)
	}))
	defer plain.Close()
	secure := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "secure %s", r.Host)
	}))
	defer secure.Close()
	portOf := func(u string) int {
		_, p, _ := net.SplitHostPort(strings.TrimPrefix(strings.TrimPrefix(u, "http://"), "https://"))
		n, _ := strconv.Atoi(p)
		return n
	}
	pp, sp := portOf(plain.URL), portOf(secure.URL)
	resolved := map[string][]netip.Addr{
		"api.test":      {netip.MustParseAddr("127.0.0.1")},
		"rebind.test":   {netip.MustParseAddr("127.0.0.1")},
		"internal.test": {netip.MustParseAddr("10.9.9.9")},
	}
	resolve := func(_ context.Context, host string) ([]netip.Addr, error) {
		if a, ok := resolved[host]; ok {
			return a, nil
		}
		return nil, fmt.Errorf("no such host")
	}
	allow := []string{fmt.Sprintf("api.test:%d", pp), fmt.Sprintf("api.test:%d", sp), fmt.Sprintf("rebind.test:%d", pp), fmt.Sprintf("other.test:%d", pp)}
	withLoopback := &Proxy{Policy: &Policy{Layers: []Layer{mustLayer(t, "config", append(allow, "127.0.0.0/8"), nil)}}, Resolve: resolve}
	noLoopback := &Proxy{Policy: &Policy{Layers: []Layer{mustLayer(t, "config", allow, nil)}}, Resolve: resolve}

	// get sends a request for url over a connection the proxy serves as
	// one opened for name:port.
	get := func(p *Proxy, name string, port int, url string, host string) (string, Connection) {
		done := make(chan Connection, 1)
		tr := &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				a, b := net.Pipe()
				go func() { done <- p.Serve(context.Background(), b, name, port) }()
				return a, nil
			},
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: true, ServerName: host},
			DisableKeepAlives: true,
		}
		req, _ := http.NewRequest("GET", url, nil)
		req.Host = host
		resp, err := (&http.Client{Transport: tr}).Do(req)
		body := ""
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
		}
		return body, <-done
	}
	body, c := get(withLoopback, "api.test", pp, fmt.Sprintf("http://api.test:%d/", pp), "api.test")
	if body != "plain api.test" || !c.Allowed || c.BytesOut == 0 || c.BytesIn == 0 || c.Rule == "" {
		t.Errorf("http: %q %+v", body, c)
	}
	body, c = get(withLoopback, "api.test", sp, fmt.Sprintf("https://api.test:%d/", sp), "api.test")
	if body != "secure api.test" || !c.Allowed {
		t.Errorf("https: %q %+v", body, c)
	}
	for _, bad := range []struct {
		p          *Proxy
		name, host string
		port       int
		why        string
	}{
		{withLoopback, "api.test", "other.test", pp, "HTTP Host"},
		{withLoopback, "blocked.test", "blocked.test", pp, "no entry"},
		{withLoopback, "other.test", "other.test", pp, "does not resolve"},
		{noLoopback, "rebind.test", "rebind.test", pp, "does not let a connection reach"},
	} {
		body, c := get(bad.p, bad.name, bad.port, fmt.Sprintf("http://%s:%d/", bad.host, bad.port), bad.host)
		if body != "" || c.Allowed || !strings.Contains(c.Reason, bad.why) {
			t.Errorf("%s as %s: %q %+v, want refused for %q", bad.name, bad.host, body, c, bad.why)
		}
	}
	// A TLS server name other than the name the connection was opened for.
	_, c = get(withLoopback, "api.test", sp, fmt.Sprintf("https://api.test:%d/", sp), "evil.test")
	if c.Allowed || !strings.Contains(c.Reason, "TLS server name") {
		t.Errorf("sni: %+v", c)
	}

	// Later requests on a kept connection: each must name the host the
	// connection was opened for, not only the first. The server answers
	// for any name, as a shared host or a CDN does.
	a, b := net.Pipe()
	done := make(chan Connection, 1)
	go func() { done <- withLoopback.Serve(context.Background(), b, "api.test", pp) }()
	br := bufio.NewReader(a)
	ask := func(host string) (string, error) {
		if _, err := fmt.Fprintf(a, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", host); err != nil {
			return "", err
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return string(body), err
	}
	for _, host := range []string{"api.test", fmt.Sprintf("API.test:%d", pp)} {
		if body, err := ask(host); body != "plain "+host {
			t.Errorf("request naming %s on a kept connection: %q, %v", host, body, err)
		}
	}
	if body, err := ask("other.test"); err == nil || body != "" {
		t.Errorf("a later request naming other.test reached the server: %q", body)
	}
	a.Close()
	if c := <-done; c.Allowed || !strings.Contains(c.Reason, `a request on it names "other.test"`) {
		t.Errorf("later request naming another host: %+v", c)
	}
}
