//go:build linux

package native_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/egress"
	"github.com/codecell-dev/codecell/internal/testenv"
	"github.com/codecell-dev/codecell/tier/native"
)

// gitToken is the value of the secret the private repository asks for.
const gitToken = "ghp-8e2f41c9-not-in-the-sandbox"

// gitMarker is the content of the file the test's repository commits.
const gitMarker = "codecell-git-marker-5c1e0b7d"

// gitFixture is a git repository the test made, served on the host's
// loopback over HTTP and HTTPS (its certificates from a test authority the
// tier's proxy trusts) by git's smart protocol (git http-backend, under
// /smart/, and under /private/ for requests with the token) and its dumb
// one (the files, under /dumb/); a resolver that gives git.test and
// other.test that server's address; an engine on a native tier with that
// resolver, and one whose configuration gives git.test the token as a
// network secret.
type gitFixture struct {
	e, secret *codecell.Engine
	port, tls int
	hits      atomic.Int64
}

// gitRun runs git on the host, away from the host's configuration.
func gitRun(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME="+dir,
		"GIT_AUTHOR_NAME=codecell", "GIT_AUTHOR_EMAIL=test@codecell.invalid",
		"GIT_COMMITTER_NAME=codecell", "GIT_COMMITTER_EMAIL=test@codecell.invalid")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func newGitFixture(t *testing.T) *gitFixture {
	testenv.RequireNative(t, native.Default.Probe)
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed (scripts/test installs it)")
	}
	backend, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatal(err)
	}
	work, root := t.TempDir(), t.TempDir()
	gitRun(t, work, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(work, "MARKER"), []byte(gitMarker+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitRun(t, work, "add", "MARKER")
	gitRun(t, work, "commit", "-q", "-m", "marker")
	bare := filepath.Join(root, "repo.git")
	gitRun(t, root, "clone", "-q", "--bare", work, bare)
	gitRun(t, bare, "update-server-info")

	f := &gitFixture{}
	mux := http.NewServeMux()
	mux.Handle("/smart/", &cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(string(backend)), "git-http-backend"),
		Root: "/smart",
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"},
	})
	mux.Handle("/dumb/", http.StripPrefix("/dumb", http.FileServer(http.Dir(root))))
	private := &cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(string(backend)), "git-http-backend"),
		Root: "/private",
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"},
	}
	mux.HandleFunc("/private/", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+gitToken {
			w.Header().Set("WWW-Authenticate", `Basic realm="private"`)
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		private.ServeHTTP(w, r)
	})
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.hits.Add(1)
		mux.ServeHTTP(w, r)
	})
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	f.port = srv.Listener.Addr().(*net.TCPAddr).Port
	testCA, err := egress.NewAuthority()
	if err != nil {
		t.Fatal(err)
	}
	secure := httptest.NewUnstartedServer(handler)
	secure.TLS = &tls.Config{GetCertificate: func(h *tls.ClientHelloInfo) (*tls.Certificate, error) { return testCA.Certificate(h.ServerName) }}
	secure.StartTLS()
	t.Cleanup(secure.Close)
	f.tls = secure.Listener.Addr().(*net.TCPAddr).Port
	roots := x509.NewCertPool()
	roots.AddCert(testCA.Root())
	tier := &native.Tier{Pool: -1, RootCAs: roots, Resolve: func(_ context.Context, host string) ([]netip.Addr, error) {
		if host == "git.test" || host == "other.test" {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		}
		return nil, fmt.Errorf("no such host %s", host)
	}}
	t.Cleanup(func() { tier.Close() })
	f.e = &codecell.Engine{Tier: native.Name, Tiers: []codecell.Tier{tier}}
	t.Setenv("CODECELL_TEST_GIT_TOKEN", gitToken)
	f.secret = &codecell.Engine{Tier: native.Name, Tiers: []codecell.Tier{tier}, Policy: codecell.Policy{Network: &codecell.NetworkPolicy{
		Allow: []string{fmt.Sprintf("git.test:%d", f.port), fmt.Sprintf("git.test:%d", f.tls), "127.0.0.0/8"},
		Secrets: []codecell.Secret{{Name: "git", Env: "CODECELL_TEST_GIT_TOKEN",
			Hosts: []string{fmt.Sprintf("git.test:%d", f.port), fmt.Sprintf("git.test:%d", f.tls)}, Header: "Authorization: Bearer {value}"}},
	}}}
	return f
}

// run runs a bash program allowed to reach git.test on the server's port.
func (f *gitFixture) run(t *testing.T, code string) *codecell.Result {
	t.Helper()
	res, err := f.e.Run(context.Background(), &codecell.Exec{Language: "bash", Code: code,
		Env: map[string]string{"PORT": fmt.Sprint(f.port)},
		Policy: codecell.Policy{Network: &codecell.NetworkPolicy{
			Allow: []string{fmt.Sprintf("git.test:%d", f.port), "127.0.0.0/8"}}}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// git clone, over the smart protocol and the dumb one, reaches an allowed
// host through the proxy, with the sandbox's environment as it is (no
// configuration of git's own): the marker's content arrives, and the
// Result lists the connections as allowed.
func TestNetworkGitClone(t *testing.T) {
	f := newGitFixture(t)
	for _, proto := range []string{"smart", "dumb"} {
		t.Run(proto, func(t *testing.T) {
			before := f.hits.Load()
			res := f.run(t, fmt.Sprintf("git clone -q http://git.test:$PORT/%s/repo.git repo && cat repo/MARKER", proto))
			if res.Status != codecell.StatusSuccess || strings.TrimSpace(res.Stdout) != gitMarker {
				t.Fatalf("%s %q %+v %q", res.Status, res.Stdout, res.Error, res.Stderr)
			}
			if f.hits.Load() == before {
				t.Fatal("the server got no request")
			}
			if len(res.Network) == 0 {
				t.Fatal("the Result lists no connection")
			}
			for _, c := range res.Network {
				if !c.Allowed || c.Host != "git.test" || c.Port != f.port || c.BytesIn == 0 {
					t.Errorf("network %+v", c)
				}
			}
		})
	}
}

// A clone of a host the policy does not allow fails, and reaches nothing:
// by a name the sandbox cannot resolve; by the server's address; and by
// that name pinned to git.test's address, whose Host the proxy refuses.
// The last two reach the proxy, and the Result lists the refusals.
func TestNetworkGitCloneRefused(t *testing.T) {
	f := newGitFixture(t)
	before := f.hits.Load()
	reasons := map[string]bool{}
	for _, c := range []struct{ clone, stderr string }{
		{"http://other.test:$PORT/smart/repo.git", "Could not resolve host: other.test"},
		{"http://127.0.0.1:$PORT/smart/repo.git", "unable to access"},
		{`-c "http.curloptResolve=other.test:$PORT:$(getent hosts git.test | cut -d' ' -f1)" http://other.test:$PORT/smart/repo.git`, "unable to access"},
	} {
		res := f.run(t, "git clone -q "+c.clone+" repo && cat repo/MARKER")
		if res.Status == codecell.StatusSuccess || strings.Contains(res.Stdout, gitMarker) || !strings.Contains(res.Stderr, c.stderr) {
			t.Errorf("%s: %s %q %q", c.clone, res.Status, res.Stdout, res.Stderr)
		}
		for _, c := range res.Network {
			if c.Allowed {
				t.Errorf("allowed: %+v", c)
			}
			reasons[c.Host+" "+strings.SplitN(c.Reason, ",", 2)[0]] = true
		}
	}
	for _, want := range []string{
		fmt.Sprintf("127.0.0.1 no entry of the exec policy allows 127.0.0.1:%d", f.port),
		"git.test the connection was opened for git.test",
	} {
		if !reasons[want] {
			t.Errorf("not listed as refused: %q in %v", want, reasons)
		}
	}
	if n := f.hits.Load() - before; n != 0 {
		t.Fatalf("the server was reached %d times", n)
	}
}

// A private repository, which asks for a token, is cloned over HTTPS and
// over plain HTTP with a network secret: the proxy adds the token to git's
// requests, git trusts the certificate the proxy shows for the secret's
// host, and the token never enters the sandbox.
func TestNetworkGitCloneSecret(t *testing.T) {
	f := newGitFixture(t)
	for _, url := range []string{"https://git.test:$TLS_PORT/private/repo.git", "http://git.test:$PORT/private/repo.git"} {
		res, err := f.secret.Run(context.Background(), &codecell.Exec{Language: "bash",
			Code: "git clone -q " + url + " repo && cat repo/MARKER && env && cat repo/.git/config",
			Env:  map[string]string{"PORT": fmt.Sprint(f.port), "TLS_PORT": fmt.Sprint(f.tls)}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != codecell.StatusSuccess || !strings.HasPrefix(res.Stdout, gitMarker+"\n") {
			t.Fatalf("%s: %s %q %+v %q", url, res.Status, res.Stdout, res.Error, res.Stderr)
		}
		// Nor the environment nor git's configuration holds the token.
		if strings.Contains(res.Stdout, gitToken) || strings.Contains(res.Stderr, gitToken) {
			t.Errorf("%s: the token came into the sandbox: %q", url, res.Stdout)
		}
		if len(res.Network) == 0 {
			t.Errorf("%s: the Result lists no connection", url)
		}
		for _, c := range res.Network {
			if !c.Allowed || c.Host != "git.test" || fmt.Sprint(c.Secrets) != "[git]" {
				t.Errorf("%s: network %+v", url, c)
			}
		}
	}
}
