package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
)

func TestSecretCheck(t *testing.T) {
	good := SecretSpec{Name: "github", Env: "GH_TOKEN", Hosts: []string{"api.github.com", "*.githubusercontent.com"}, Header: "Authorization: Bearer {value}"}
	if err := good.Check(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		edit func(*SecretSpec)
		bad  string
	}{
		{func(s *SecretSpec) { s.Name = "my-token" }, "a name is a letter"},
		{func(s *SecretSpec) { s.Env = "" }, `"env"`},
		{func(s *SecretSpec) { s.File = "/x" }, "not both"},
		{func(s *SecretSpec) { s.Env, s.File = "", "token.txt" }, "absolute"},
		{func(s *SecretSpec) { s.Env = "A-B" }, "environment variable"},
		{func(s *SecretSpec) { s.Hosts = nil }, "list the hosts"},
		{func(s *SecretSpec) { s.Hosts = []string{"10.0.0.0/8"} }, "names only"},
		{func(s *SecretSpec) { s.Hosts = []string{"*.com"} }, "top-level"},
		{func(s *SecretSpec) { s.Header = "Authorization Bearer {value}" }, "Name: text"},
		{func(s *SecretSpec) { s.Header = "Authorization: Bearer" }, "no {value}"},
		{func(s *SecretSpec) { s.Header = "Host: {value}" }, "delivery"},
		{func(s *SecretSpec) { s.Header = "A B: {value}" }, "not a header's name"},
		{func(s *SecretSpec) { s.SandboxEnv = "SSL_CERT_FILE" }, "codecell sets"},
		{func(s *SecretSpec) { s.SandboxEnv = "CODECELL_X" }, "codecell sets"},
	} {
		s := good
		c.edit(&s)
		if err := s.Check(); err == nil || !strings.Contains(err.Error(), c.bad) {
			t.Errorf("%+v: %v, want an error about %q", s, err, c.bad)
		}
	}
	if err := CheckSecrets([]SecretSpec{good, good}); err == nil || !strings.Contains(err.Error(), "already sets") {
		t.Errorf("a duplicate: %v", err)
	}
	env := func(k string) (string, bool) {
		v, ok := map[string]string{"GH_TOKEN": "ghp_abc", "NL": "a\nb", "EMPTY": ""}[k]
		return v, ok
	}
	for _, c := range []struct {
		env, file string
		want, bad string
	}{
		{env: "GH_TOKEN", want: "ghp_abc"},
		{env: "MISSING", bad: "not set"},
		{env: "EMPTY", bad: "not set"},
		{env: "NL", bad: "line break"},
		{file: "/token", want: "from-file"},
		{file: "/nope", bad: "does not exist"},
	} {
		s := good
		s.Env, s.File = c.env, c.file
		got, err := s.Value(env, func(p string) ([]byte, error) {
			if p == "/token" {
				return []byte("from-file\n"), nil
			}
			return nil, &os.PathError{Op: "open", Path: p, Err: os.ErrNotExist}
		})
		if c.bad != "" {
			if err == nil || !strings.Contains(err.Error(), c.bad) {
				t.Errorf("%+v: %v, want an error about %q", c, err, c.bad)
			}
		} else if err != nil || got != c.want {
			t.Errorf("%+v: %q %v", c, got, err)
		}
	}
}

func mustSecret(t testing.TB, s SecretSpec, value string) *Secret {
	t.Helper()
	sec, err := LoadSecret(s, func(string) (string, bool) { return value, true }, nil)
	if err != nil {
		t.Fatal(err)
	}
	return sec
}

// testSecrets are a secret put in its own header for api.test, and one
// put in place of its placeholder for *.pkg.test.
func testSecrets(t testing.TB) []*Secret {
	return []*Secret{
		mustSecret(t, SecretSpec{Name: "api", Env: "X", Hosts: []string{"api.test"}, Header: "Authorization: Bearer {value}"}, "VALUE-API"),
		mustSecret(t, SecretSpec{Name: "pkg", Env: "X", Hosts: []string{"*.pkg.test:8080"}}, "VALUE-PKG"),
	}
}

func TestRewrite(t *testing.T) {
	s := testSecrets(t)
	api, pkg := s[0], s[1]
	read := func(raw string) *http.Request {
		req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
		if err != nil {
			t.Fatal(err)
		}
		return req
	}
	req := read("GET / HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer " + api.Placeholder + "\r\nX-Other: keep\r\n\r\n")
	if err := rewrite(req, s, "api.test", 443, nil); err != nil || req.Header.Get("Authorization") != "Bearer VALUE-API" || req.Header.Get("X-Other") != "keep" {
		t.Errorf("header: %v %v", err, req.Header)
	}
	req = read("GET / HTTP/1.1\r\nHost: files.pkg.test:8080\r\nX-Token: t=" + pkg.Placeholder + ";\r\n\r\n")
	if err := rewrite(req, s, "files.pkg.test", 8080, nil); err != nil || req.Header.Get("X-Token") != "t=VALUE-PKG;" || req.Header.Get("Authorization") != "" {
		t.Errorf("placeholder: %v %v", err, req.Header)
	}
	for _, c := range []struct {
		raw, host string
		port      int
		bad       string
	}{
		{"GET / HTTP/1.1\r\nHost: other.test\r\nX: " + api.Placeholder + "\r\n\r\n", "other.test", 443, "secret api was sent to other.test:443"},
		{"GET /?k=" + pkg.Placeholder + " HTTP/1.1\r\nHost: other.test\r\n\r\n", "other.test", 80, "the request line"},
		{"GET / HTTP/1.1\r\nHost: files.pkg.test\r\nX: " + pkg.Placeholder + "\r\n\r\n", "files.pkg.test", 443, "secret pkg"}, // not its port
		{"GET / HTTP/1.1\r\nHost: api.test\r\nX: " + pkg.Placeholder + "\r\n\r\n", "api.test", 443, "secret pkg"},
		{"GET / HTTP/1.1\r\nHost: evil.test\r\n\r\n", "api.test", 443, "names \"evil.test\""},
	} {
		err := rewrite(read(c.raw), s, c.host, c.port, nil)
		if err == nil || !strings.Contains(err.Error(), c.bad) {
			t.Errorf("%q: %v, want an error about %q", c.raw, err, c.bad)
		}
	}
}

// secretFixture is a proxy with secrets, over loopback servers (HTTPS with
// certificates of a test authority, and plain HTTP) that record the
// requests they get.
type secretFixture struct {
	proxy   *Proxy
	secrets []*Secret
	tlsPort int
	plain   int
	testCA  *Authority
	mu      sync.Mutex
	got     []string // "host authorization x-token"
}

func newSecretFixture(t *testing.T) *secretFixture {
	f := &secretFixture{secrets: testSecrets(t)}
	var err error
	if f.testCA, err = NewAuthority(); err != nil {
		t.Fatal(err)
	}
	record := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.got = append(f.got, r.Host+" "+r.Header.Get("Authorization")+" "+r.Header.Get("X-Token"))
		f.mu.Unlock()
		fmt.Fprintf(w, "ok %s", r.Host)
	})
	secure := httptest.NewUnstartedServer(record)
	secure.TLS = &tls.Config{GetCertificate: func(h *tls.ClientHelloInfo) (*tls.Certificate, error) { return f.testCA.Certificate(h.ServerName) }}
	secure.StartTLS()
	t.Cleanup(secure.Close)
	plain := httptest.NewServer(record)
	t.Cleanup(plain.Close)
	f.tlsPort, f.plain = secure.Listener.Addr().(*net.TCPAddr).Port, plain.Listener.Addr().(*net.TCPAddr).Port
	specs := []SecretSpec{
		{Name: "api", Env: "X", Hosts: []string{fmt.Sprintf("api.test:%d", f.tlsPort), fmt.Sprintf("api.test:%d", f.plain)}, Header: "Authorization: Bearer {value}"},
		{Name: "pkg", Env: "X", Hosts: []string{fmt.Sprintf("*.pkg.test:%d", f.tlsPort)}},
	}
	f.secrets = []*Secret{mustSecret(t, specs[0], "VALUE-API"), mustSecret(t, specs[1], "VALUE-PKG")}
	auth, err := NewAuthority()
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(f.testCA.Root())
	var allow []string
	for _, port := range []int{f.tlsPort, f.plain} {
		allow = append(allow, fmt.Sprintf("api.test:%d", port), fmt.Sprintf("other.test:%d", port), fmt.Sprintf("*.pkg.test:%d", port))
	}
	f.proxy = &Proxy{
		Policy: &Policy{Layers: []Layer{mustLayer(t, "config", append(allow, "127.0.0.0/8"), nil)}},
		Resolve: func(context.Context, string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		},
		Secrets:   f.secrets,
		Authority: auth,
		RootCAs:   roots,
	}
	return f
}

// get sends requests over one connection the proxy serves as opened for
// name:port; the program trusts roots.
func (f *secretFixture) get(t *testing.T, name string, port int, scheme string, roots *x509.CertPool, headers ...map[string]string) ([]string, *tls.ConnectionState, Connection) {
	done := make(chan Connection, 16)
	var state *tls.ConnectionState
	var mu sync.Mutex
	dials := 0
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			a, b := net.Pipe()
			mu.Lock()
			dials++
			mu.Unlock()
			go func() { done <- f.proxy.Serve(context.Background(), b, name, port) }()
			return a, nil
		},
		TLSClientConfig:     &tls.Config{RootCAs: roots, ServerName: name},
		MaxIdleConnsPerHost: 1,
	}
	var bodies []string
	for _, h := range headers {
		req, _ := http.NewRequest("GET", fmt.Sprintf("%s://%s:%d/", scheme, name, port), nil)
		for k, v := range h {
			if k == "Host" {
				req.Host = v
			}
			req.Header.Set(k, v)
		}
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			bodies = append(bodies, "error: "+err.Error())
			break
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		bodies = append(bodies, string(b))
		mu.Lock()
		state = resp.TLS
		mu.Unlock()
	}
	tr.CloseIdleConnections()
	// The connection that was refused, if one was, else the first.
	mu.Lock()
	n := dials
	mu.Unlock()
	var c Connection
	for i := 0; i < n; i++ {
		got := <-done
		if i == 0 || !got.Allowed {
			c = got
		}
	}
	return bodies, state, c
}

func (f *secretFixture) received() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.got
	f.got = nil
	return out
}

// The proxy puts a secret in the requests to its hosts, over HTTPS (its
// own certificate, which only the sandbox's bundle trusts; the server's
// verified against the test authority) and plain HTTP, in every request of
// a connection; a host without secrets is passed through, the program
// seeing the server's own certificate; a placeholder sent to another host
// refuses the connection, and nothing reaches that server.
func TestProxySecrets(t *testing.T) {
	f := newSecretFixture(t)
	api, pkg := f.secrets[0], f.secrets[1]
	sandboxRoots := x509.NewCertPool()
	sandboxRoots.AddCert(f.proxy.Authority.Root())

	bodies, state, c := f.get(t, "api.test", f.tlsPort, "https", sandboxRoots, nil, map[string]string{"X-Token": "again"})
	if len(bodies) != 2 || bodies[0] != "ok api.test:"+fmt.Sprint(f.tlsPort) || !c.Allowed || c.BytesIn == 0 {
		t.Fatalf("https: %q %+v", bodies, c)
	}
	if got := f.received(); fmt.Sprint(got) != fmt.Sprintf("[api.test:%d Bearer VALUE-API  api.test:%d Bearer VALUE-API again]", f.tlsPort, f.tlsPort) {
		t.Errorf("the server got %q", got)
	}
	if state == nil || state.PeerCertificates[0].Issuer.CommonName != f.proxy.Authority.Root().Subject.CommonName {
		t.Errorf("the program saw %+v", state)
	}

	bodies, _, c = f.get(t, "files.pkg.test", f.tlsPort, "https", sandboxRoots, map[string]string{"X-Token": "k=" + pkg.Placeholder})
	if got := f.received(); len(bodies) != 1 || !c.Allowed || fmt.Sprint(got) != fmt.Sprintf("[files.pkg.test:%d  k=VALUE-PKG]", f.tlsPort) {
		t.Errorf("placeholder: %q %+v %q", bodies, c, got)
	}

	bodies, _, c = f.get(t, "api.test", f.plain, "http", nil, map[string]string{"X-Token": "1"}, map[string]string{"X-Token": "2"})
	if got := f.received(); len(bodies) != 2 || !c.Allowed || fmt.Sprint(got) != fmt.Sprintf("[api.test:%d Bearer VALUE-API 1 api.test:%d Bearer VALUE-API 2]", f.plain, f.plain) {
		t.Errorf("plain http: %q %+v %q", bodies, c, got)
	}

	// Not intercepted: the program sees the server's certificate.
	testRoots := x509.NewCertPool()
	testRoots.AddCert(f.testCA.Root())
	bodies, state, c = f.get(t, "other.test", f.tlsPort, "https", testRoots, nil)
	if got := f.received(); len(bodies) != 1 || !c.Allowed || len(got) != 1 || got[0] != fmt.Sprintf("other.test:%d  ", f.tlsPort) {
		t.Errorf("pass-through: %q %+v %q", bodies, c, got)
	}
	if state == nil || state.PeerCertificates[0].Issuer.CommonName != f.testCA.Root().Subject.CommonName {
		t.Errorf("the program saw %+v", state)
	}

	// Placeholders where they do not go.
	for _, bad := range []struct {
		name, scheme string
		port         int
		roots        *x509.CertPool
		headers      []map[string]string
		why          string
	}{
		{"other.test", "http", f.plain, nil, []map[string]string{{"Authorization": "Bearer " + api.Placeholder}}, "secret api was sent to other.test"},
		{"other.test", "http", f.plain, nil, []map[string]string{{"X-Token": "1"}, {"X-Token": pkg.Placeholder}}, "secret pkg was sent to other.test"},
		{"api.test", "https", f.tlsPort, sandboxRoots, []map[string]string{{"X-Token": pkg.Placeholder}}, "secret pkg was sent to api.test"},
		{"api.test", "http", f.plain, nil, []map[string]string{{"X-Token": "1"}, {"Host": "evil.test"}}, "\"evil.test\""}, // on the same connection or a new one
	} {
		bodies, _, c := f.get(t, bad.name, bad.port, bad.scheme, bad.roots, bad.headers...)
		got := f.received()
		if c.Allowed || !strings.Contains(c.Reason, bad.why) {
			t.Errorf("%s %v: %+v, want refused for %q", bad.name, bad.headers, c, bad.why)
		}
		if len(got) != len(bad.headers)-1 {
			t.Errorf("%s %v: the server got %q (bodies %q)", bad.name, bad.headers, got, bodies)
		}
		for _, g := range got {
			if strings.Contains(g, "VALUE") && !strings.HasPrefix(g, "api.test") {
				t.Errorf("a value reached %q", g)
			}
		}
	}
	// A placeholder in a ClientHello to a host passed through.
	a, b := net.Pipe()
	done := make(chan Connection, 1)
	go func() { done <- f.proxy.Serve(context.Background(), b, "other.test", f.tlsPort) }()
	go func() {
		_ = tls.Client(a, &tls.Config{ServerName: "other.test", NextProtos: []string{api.Placeholder}, InsecureSkipVerify: true}).Handshake()
	}()
	if c := <-done; c.Allowed || !strings.Contains(c.Reason, "secret api was sent to other.test") || !strings.Contains(c.Reason, "ClientHello") {
		t.Errorf("ClientHello: %+v", c)
	}
	a.Close()
	if got := f.received(); len(got) != 0 {
		t.Errorf("the server got %q", got)
	}
}

// A server whose certificate the proxy cannot verify for the name gets
// no request, and the program no handshake.
func TestProxySecretsUnverifiedServer(t *testing.T) {
	f := newSecretFixture(t)
	f.proxy.RootCAs = x509.NewCertPool() // trusts nothing
	roots := x509.NewCertPool()
	roots.AddCert(f.proxy.Authority.Root())
	bodies, _, c := f.get(t, "api.test", f.tlsPort, "https", roots, nil)
	if c.Allowed || !strings.Contains(c.Reason, "TLS handshake with the server") || !strings.HasPrefix(bodies[0], "error") {
		t.Errorf("%q %+v", bodies, c)
	}
	if got := f.received(); len(got) != 0 {
		t.Errorf("the server got %q", got)
	}
}

func TestAuthority(t *testing.T) {
	a, err := NewAuthority()
	if err != nil {
		t.Fatal(err)
	}
	c1, err := a.Certificate("api.test")
	if err != nil {
		t.Fatal(err)
	}
	c2, _ := a.Certificate("api.test")
	if c1 != c2 {
		t.Error("the certificate is not kept")
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(a.PEM())
	if _, err := c1.Leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "api.test"}); err != nil {
		t.Error(err)
	}
	if _, err := c1.Leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "other.test"}); err == nil {
		t.Error("valid for another name")
	}
	if !a.Fresh(c1.Leaf.NotBefore) || a.Fresh(a.Root().NotAfter) {
		t.Error("Fresh")
	}
	if _, ok := c1.PrivateKey.(crypto.Signer); !ok {
		t.Error("no key")
	}
}

// A placeholder in a request's body, split across writes or after a
// protocol upgrade, is seen: the connection is refused, and what held it
// is not written.
func TestForwardWatchesBodies(t *testing.T) {
	s := testSecrets(t)
	ph := s[0].Placeholder
	for _, raw := range []string{
		"POST / HTTP/1.1\r\nHost: other.test\r\nContent-Length: " + fmt.Sprint(len(ph)+2) + "\r\n\r\n[" + ph + "]",
		"POST / HTTP/1.1\r\nHost: other.test\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n" + ph[:5] + "\r\n" + fmt.Sprintf("%x", len(ph)-5) + "\r\n" + ph[5:] + "\r\n0\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: other.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\nframes " + ph,
	} {
		var out bytes.Buffer
		_, err := forward(strings.NewReader(raw), &out, s, "other.test", 80, nil)
		if err == nil || !strings.Contains(err.Error(), "secret api was sent to other.test:80") {
			t.Errorf("%q: %v", raw, err)
		}
		if strings.Contains(out.String(), ph) {
			t.Errorf("%q: written: %q", raw, out.String())
		}
	}
	// To the secret's own host, a placeholder in a body goes as it is.
	var out bytes.Buffer
	raw := "POST / HTTP/1.1\r\nHost: api.test\r\nContent-Length: " + fmt.Sprint(len(ph)) + "\r\n\r\n" + ph
	added := map[string]bool{}
	if _, err := forward(strings.NewReader(raw), &out, s, "api.test", 443, added); err != nil || !added["api"] || len(added) != 1 || !strings.HasSuffix(out.String(), ph) || !strings.Contains(out.String(), "Bearer VALUE-API") {
		t.Errorf("%v %q", err, out.String())
	}
}

// A secret whose hosts entry names no port goes over HTTPS alone: a
// program that speaks plain HTTP to the host on port 80 (or 443) gets no
// secret put in its requests, and one that sends the placeholder there is
// refused, so that the value never crosses the network in the clear
// unless an entry names the port. The proxy dials the fixture's servers
// for ports 443 and 80.
func TestSecretNotInTheClear(t *testing.T) {
	f := newSecretFixture(t)
	api := mustSecret(t, SecretSpec{Name: "api", Env: "X", Hosts: []string{"api.test"}, Header: "Authorization: Bearer {value}"}, "VALUE-API")
	tok := mustSecret(t, SecretSpec{Name: "tok", Env: "X", Hosts: []string{"api.test"}}, "VALUE-TOK")
	f.proxy.Secrets = []*Secret{api, tok}
	f.proxy.Policy = &Policy{Layers: []Layer{mustLayer(t, "config", []string{"api.test", "127.0.0.0/8"}, nil)}}
	f.proxy.Dial = func(ctx context.Context, network, address string) (net.Conn, error) {
		port := f.plain
		if strings.HasSuffix(address, ":443") {
			port = f.tlsPort
		}
		return (&net.Dialer{}).DialContext(ctx, network, fmt.Sprintf("127.0.0.1:%d", port))
	}
	sandboxRoots := x509.NewCertPool()
	sandboxRoots.AddCert(f.proxy.Authority.Root())

	bodies, _, c := f.get(t, "api.test", 443, "https", sandboxRoots, map[string]string{"X-Token": tok.Placeholder})
	if got := f.received(); len(bodies) != 1 || !c.Allowed || fmt.Sprint(got) != "[api.test:443 Bearer VALUE-API VALUE-TOK]" {
		t.Fatalf("https: %q %+v %q", bodies, c, got)
	}
	for _, port := range []int{80, 443} {
		bodies, _, c = f.get(t, "api.test", port, "http", nil, map[string]string{"X-Token": "1"})
		// (On 443, the HTTPS server refuses what it gets, and records
		// nothing: the connection's secrets tell.)
		if got := f.received(); len(bodies) != 1 || !c.Allowed || len(c.Secrets) != 0 || strings.Contains(fmt.Sprint(got), "VALUE") {
			t.Errorf("plain http on %d: %q %+v %q", port, bodies, c, got)
		}
		bodies, _, c = f.get(t, "api.test", port, "http", nil, map[string]string{"X-Token": tok.Placeholder})
		if got := f.received(); c.Allowed || !strings.Contains(c.Reason, "over plain HTTP, and the secret goes there over HTTPS only") || len(got) != 0 {
			t.Errorf("placeholder over plain http on %d: %q %+v %q", port, bodies, c, got)
		}
	}
}
