//go:build linux

package native

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/egress"
	"github.com/codecell-dev/codecell/internal/sandboxinit"
)

// A network by policy. The sandbox's network namespace stays empty of
// routes to anywhere: its loopback holds, besides 127.0.0.0/8, the range
// 198.18.0.0/15, and /etc/hosts gives each name the policy allows an
// address of it (the only resolver a sandbox has: no DNS query leaves it,
// and a name not given does not resolve). init listens, on every address
// of that range, on the ports the policy allows; the program's connection
// to a name reaches init, which hands the socket to the host with the name
// the address stands for. The host's proxy (internal/egress) decides: the
// name and port against the policy, the TLS server name or the HTTP Host
// against the name, and the name's addresses, which it resolves itself,
// against the ranges the policy lists. Any other address has no route
// (ENETUNREACH); UDP reaches nothing; Landlock lets the program connect
// to the allowed ports only.

// netBase is the loopback's own address in the sandbox's range for names;
// the names get the addresses after it.
var netBase = netip.MustParseAddr(sandboxinit.NetBase)

// maxNetHosts bounds the names a sandbox is given.
const maxNetHosts = 1000

// netSpecFor works out a sandbox's network from a run's policy: the names
// the narrowest layer lists that the whole policy allows on some port, and
// the ports.
func netSpecFor(p *egress.Policy) (*netSpec, error) {
	if p.Empty() {
		return nil, nil
	}
	last := p.Layers[len(p.Layers)-1]
	ports := p.Ports()
	spec := &netSpec{}
	seen := map[string]bool{}
	next := netBase.Next()
	for _, r := range last.Allow {
		if r.Host == "" || seen[r.Host] {
			continue
		}
		seen[r.Host] = true
		if sub, ok := strings.CutPrefix(r.Host, "*."); ok {
			spec.Wildcards = append(spec.Wildcards, "."+sub)
			continue
		}
		allowed := false
		for _, port := range ports {
			allowed = allowed || p.Allows(r.Host, port).Allowed
		}
		if !allowed {
			continue
		}
		if len(spec.Hosts) == maxNetHosts {
			return nil, fmt.Errorf("the network policy names more than %d hosts", maxNetHosts)
		}
		spec.Hosts = append(spec.Hosts, hostAddr{Name: r.Host, Addr: next.String()})
		next = next.Next()
	}
	spec.Ports = ports
	sort.Ints(spec.Ports)
	if len(spec.Hosts) == 0 && len(spec.Wildcards) == 0 || len(spec.Ports) == 0 {
		return nil, nil
	}
	return spec, nil
}

// proxying is the host's side of a sandbox's network: the proxy, and the
// connections it serves for the run.
type proxying struct {
	proxy *egress.Proxy
	ctx   context.Context
	stop  context.CancelFunc
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []codecell.NetworkConnection
	open  int // connections being served
}

// serve hands one connection the program opened to the proxy, or refuses
// it when the program has maxOpenConns open already: each holds
// descriptors and buffers of the codecell process, which many sandboxes
// share.
func (px *proxying) serve(info *connInfo, fd int) {
	f := os.NewFile(uintptr(fd), "conn")
	refuse := func(why string) {
		px.list(egress.Connection{Host: strings.TrimSuffix(strings.ToLower(info.Name), "."), Port: info.Port, Reason: why})
		px.mu.Unlock()
		f.Close()
	}
	px.mu.Lock()
	if px.open >= maxOpenConns {
		refuse(fmt.Sprintf("the program has %d connections open at once, the most a sandbox may; close one before opening another", maxOpenConns))
		return
	}
	if all := maxOpenConnsAll(); openConns.Add(1) > all {
		openConns.Add(-1)
		refuse(fmt.Sprintf("codecell has %d connections open for all its sandboxes at once, the most it holds; close one, or try again when other runs have ended", all))
		return
	}
	px.open++
	px.mu.Unlock()
	done := func() {
		openConns.Add(-1)
		px.mu.Lock()
		px.open--
		px.mu.Unlock()
	}
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		done()
		return
	}
	px.wg.Add(1)
	go func() {
		defer px.wg.Done()
		got := px.proxy.Serve(px.ctx, c, info.Name, info.Port)
		done()
		px.mu.Lock()
		px.list(got)
		px.mu.Unlock()
	}()
}

// openConns counts the connections the programs of every sandbox of this
// process have open through the proxy.
var openConns atomic.Int64

// maxOpenConnsAll bounds openConns: each connection holds two of the
// process's descriptors (the program's end and the server's), and the
// process has RLIMIT_NOFILE of them for everything it does, so a quarter
// of them, and never fewer than one sandbox's maxOpenConns.
var maxOpenConnsAll = sync.OnceValue(func() int64 {
	var r unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &r); err != nil || r.Cur == unix.RLIM_INFINITY {
		return 1 << 16
	}
	return max(int64(r.Cur/4), maxOpenConns)
})

// list adds a connection to those a Result lists; px.mu is held.
func (px *proxying) list(c egress.Connection) {
	if len(px.conns) < maxListedConns {
		px.conns = append(px.conns, codecell.NetworkConnection(c))
	}
}

// maxListedConns bounds the connections a Result lists.
const maxListedConns = 1000

// maxOpenConns bounds the connections a sandbox's program has open
// through the proxy at once.
const maxOpenConns = 256

// finish ends the connections still open, once the program is gone, and
// returns them all.
func (px *proxying) finish() []codecell.NetworkConnection {
	px.stop()
	px.wg.Wait()
	px.mu.Lock()
	defer px.mu.Unlock()
	return append([]codecell.NetworkConnection{}, px.conns...)
}

// take returns the connections that ended since the last take, and
// forgets them.
func (px *proxying) take() []codecell.NetworkConnection {
	px.mu.Lock()
	defer px.mu.Unlock()
	out := px.conns
	px.conns = nil
	if out == nil {
		out = []codecell.NetworkConnection{}
	}
	return out
}

// networkIsolation says what a run's network was.
func networkIsolation(n *netSpec) string {
	var names []string
	for _, h := range n.Hosts {
		names = append(names, h.Name)
	}
	ports := make([]string, len(n.Ports))
	for i, p := range n.Ports {
		ports[i] = strconv.Itoa(p)
	}
	for _, w := range n.Wildcards {
		names = append(names, "*"+w)
	}
	resolver := "names resolve from the sandbox's /etc/hosts alone (no DNS)"
	if len(n.Wildcards) > 0 {
		resolver = "names resolve in the sandbox alone (its /etc/hosts, and its own resolver for the wildcards, which forwards nothing)"
	}
	secrets := ""
	if len(n.Secrets) > 0 {
		secrets = fmt.Sprintf("; secrets %s added by the proxy to the requests to their hosts, whose TLS it ends with a certificate authority this sandbox alone trusts (the program holds placeholders)", strings.Join(n.Secrets, ", "))
	}
	return fmt.Sprintf("only %s on ports %s, through codecell's proxy on the host, which checks the TLS server name or HTTP Host and refuses private addresses unless a range is listed; %s; no other address is routed%s",
		strings.Join(names, ", "), strings.Join(ports, ", "), resolver, secrets)
}

// Network secrets. The values stay on the host, with the run's proxy; the
// program's environment holds placeholders, and, so that its clients
// trust the certificates the proxy shows for the secrets' hosts, a CA
// bundle: the host's roots and the authority's certificate. Only a
// sandbox given a secret has either.

// caBundleEnv are the variables that point clients at the bundle:
// OpenSSL (Python's ssl, curl), requests, curl, pip, and git (whose
// libcurl, GnuTLS's on Debian, reads none of the others). Node.js keeps
// its roots and adds the authority's certificate alone (caPath).
var caBundleEnv = []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "PIP_CERT", "GIT_SSL_CAINFO"}

// egressAuthority is the tier's certificate authority for secrets' hosts,
// made on first use and replaced past half its life.
type egressAuthority struct {
	mu sync.Mutex
	a  *egress.Authority
}

func (e *egressAuthority) get() (*egress.Authority, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.a == nil || !e.a.Fresh(time.Now()) {
		a, err := egress.NewAuthority()
		if err != nil {
			return nil, fmt.Errorf("network secrets: a certificate authority: %w", err)
		}
		e.a = a
	}
	return e.a, nil
}

// secretsFor reads the values of the secrets whose hosts the policy
// reaches, with a new placeholder each, and gives spec the authority's
// certificate and the secrets' names. A secret none of whose hosts the
// program can reach is left out: its sandbox has no placeholder for it.
func (t *Tier) secretsFor(p *egress.Policy, layers []codecell.NetworkLayer, spec *netSpec) ([]*egress.Secret, *egress.Authority, error) {
	if spec == nil {
		return nil, nil, nil
	}
	var out []*egress.Secret
	for _, l := range layers {
		for _, s := range l.Secrets {
			reached := false
			for _, h := range s.Hosts {
				if r, err := egress.ParseRule(h); err == nil && p.Reaches(r) {
					reached = true
				}
			}
			if !reached {
				continue
			}
			sec, err := egress.LoadSecret(s.Spec(), nil, nil)
			if err != nil {
				return nil, nil, fmt.Errorf("network secrets: %w", err)
			}
			out = append(out, sec)
			spec.Secrets = append(spec.Secrets, sec.Name)
		}
	}
	if len(out) == 0 {
		return nil, nil, nil
	}
	auth, err := t.egressCA.get()
	if err != nil {
		return nil, nil, err
	}
	spec.CA = string(auth.PEM())
	return out, auth, nil
}

// secretEnv is the program's environment with the secrets' placeholders
// and the CA bundle's variables, which replace any of the same name.
func secretEnv(env []string, secrets []*egress.Secret, layers []codecell.NetworkLayer) []string {
	set := map[string]string{}
	for _, v := range caBundleEnv {
		set[v] = caBundlePath
	}
	set["NODE_EXTRA_CA_CERTS"] = caPath
	for _, s := range secrets {
		set[egress.EnvVar(s.Name)] = s.Placeholder
		for _, l := range layers {
			for _, d := range l.Secrets {
				if d.Name == s.Name && d.SandboxEnv != "" {
					set[d.SandboxEnv] = s.Placeholder
				}
			}
		}
	}
	out := make([]string, 0, len(env)+len(set))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := set[k]; !ok {
			out = append(out, kv)
		}
	}
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, k+"="+set[k])
	}
	return out
}
