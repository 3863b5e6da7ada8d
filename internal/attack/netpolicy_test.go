//go:build linux

package attack_test

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/tier/native"
)

// attackNetworkPolicy runs the network probes again with a network policy
// that allows names: the sandbox then has a proxied way out, and must give
// no other. The policy allows a name, on each of the host listeners' TCP
// ports, that resolves to the host's loopback (as a rebinding name would),
// without the range listed, and a wildcard under which every name does the
// same. Every listener, reached by address or by those names, must hear
// nothing; the Result lists each refused connection.
func attackNetworkPolicy(t *testing.T) {
	t.Parallel()
	l := startListeners(t, true)
	var allow []string
	for _, tgt := range l.targets {
		if strings.HasPrefix(tgt.Kind, "tcp") {
			allow = append(allow, fmt.Sprintf("listener.test:%d", tgt.Port), fmt.Sprintf("*.rebind.test:%d", tgt.Port))
		}
	}
	tier := &native.Tier{Pool: -1, Resolve: func(_ context.Context, host string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")}, nil
	}}
	t.Cleanup(func() { tier.Close() })
	eng := &codecell.Engine{Tiers: []codecell.Tier{tier}}
	payload := marker("payload")
	env := map[string]string{"TARGETS": mustJSON(l.targets), "PAYLOAD": payload, "SELF": "1"}
	src := netProgram + `
for tgt in json.loads(os.environ['TARGETS']):
    if tgt['kind'].startswith('tcp'):
        for name in ['listener.test', 'x.rebind.test']:
            def by_name():
                s = socket.create_connection((name, tgt['port']), timeout=5)
                s.sendall(b'GET / HTTP/1.1\r\nHost: ' + name.encode() + b'\r\n\r\n' + payload)
                return s.recv(100)
            R['name/%s/%s' % (name, tgt['name'])] = attempt(by_name)
`
	r, res := probesWith(t, eng, codecell.Exec{Env: env, Policy: codecell.Policy{Network: &codecell.NetworkPolicy{Allow: allow}}}, src)
	heard := l.heard(500 * time.Millisecond)
	for _, tgt := range l.targets {
		if got, ok := heard[tgt.Name]; ok {
			t.Errorf("the host's %s listener on %s:%d heard from the sandbox: %s", tgt.Kind, tgt.Host, tgt.Port, got)
		}
	}
	refused := 0
	for _, c := range res.Network {
		if c.Allowed {
			t.Errorf("a connection was allowed: %+v", c)
		}
		if strings.Contains(c.Reason, "does not let a connection reach") {
			refused++
		}
	}
	if refused == 0 {
		t.Errorf("no connection by name was refused for its address: %+v (probes %v)", res.Network, r)
	}
	if !strings.Contains(res.Isolation.Network, "listener.test") {
		t.Errorf("isolation.network %q", res.Isolation.Network)
	}
}
