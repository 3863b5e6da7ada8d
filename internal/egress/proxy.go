package egress

import (
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy takes the connections a sandboxed program opens, each with the
// name and port it was opened for, and joins those the policy allows to
// the server of that name.
type Proxy struct {
	Policy *Policy
	// Resolve looks a name up; nil means the host's resolver.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// Dial connects to an address; nil means a net.Dialer's.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// HelloTimeout bounds the wait for the connection's first bytes; 0
	// means 10 seconds.
	HelloTimeout time.Duration
	// Secrets are put in the requests to their hosts (secrets.go). A
	// placeholder sent where its secret does not go refuses the
	// connection. (Every plain HTTP connection is read request by
	// request, and each request must name the connection's host.)
	Secrets []*Secret
	// Authority signs the certificates the proxy shows a program for the
	// hosts of Secrets, whose TLS it ends to put the secrets in; needed
	// when Secrets has any.
	Authority *Authority
	// RootCAs verify the servers the proxy opens TLS to itself (the hosts
	// of Secrets); nil means the host's roots.
	RootCAs *x509.CertPool
}

// Connection is one connection a program opened, as a Result reports it.
type Connection struct {
	Host    string `json:"host"`
	Port    int    `json:"port"`
	Allowed bool   `json:"allowed"`
	// Rule is the policy entry that allowed or refused it; Reason, for a
	// refused one, says why.
	Rule     string `json:"rule,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Address  string `json:"address,omitempty"` // the server's address, once connected
	BytesOut int64  `json:"bytes_out"`
	BytesIn  int64  `json:"bytes_in"`
	// Secrets are the secrets the proxy put in its requests.
	Secrets []string `json:"secrets,omitempty"`
}

// Serve handles one connection c, which the program opened for name:port,
// until either side closes it or ctx ends, and returns what became of it.
// c is closed when Serve returns.
func (p *Proxy) Serve(ctx context.Context, c net.Conn, name string, port int) Connection {
	defer c.Close()
	conn := Connection{Host: strings.TrimSuffix(strings.ToLower(name), "."), Port: port}
	refuse := func(format string, args ...any) Connection {
		conn.Allowed, conn.Reason = false, fmt.Sprintf(format, args...)
		return conn
	}
	v := p.Policy.Allows(conn.Host, port)
	conn.Rule = v.Rule
	if !v.Allowed {
		if v.Rule != "" {
			return refuse("the %s policy denies %s:%d", v.Layer, conn.Host, port)
		}
		return refuse("no entry of the %s policy allows %s:%d", v.Layer, conn.Host, port)
	}
	wait := p.HelloTimeout
	if wait == 0 {
		wait = 10 * time.Second
	}
	_ = c.SetReadDeadline(time.Now().Add(wait))
	said, kind, head, err := sniff(c)
	_ = c.SetReadDeadline(time.Time{})
	if err != nil {
		return refuse("%v", err)
	}
	if said != conn.Host {
		what := "TLS server name"
		if kind == "http" {
			what = "HTTP Host"
		}
		return refuse("the connection was opened for %s, and its %s is %q", conn.Host, what, said)
	}
	// A placeholder in what the program sent first (a ClientHello's
	// extensions, an HTTP request's head) is refused before anything
	// reaches the server.
	seen, where, secrets := head, "the TLS ClientHello", p.Secrets
	if kind == "http" {
		seen, where = head[:bytes.Index(head, []byte("\r\n\r\n"))+4], "the HTTP request's head"
		secrets = inTheClear(p.Secrets)
	}
	if err := stray(secrets, seen, conn.Host, port, where); err != nil {
		return refuse("%v", err)
	}
	intercept := false
	for _, s := range p.Secrets {
		intercept = intercept || s.For(conn.Host, port)
	}
	if intercept && kind == "tls" && p.Authority == nil {
		return refuse("%s has secrets, and the proxy has no certificate authority to end its TLS with", conn.Host)
	}
	server, err := p.connect(ctx, conn.Host, port)
	if err != nil {
		return refuse("%v", err)
	}
	defer server.Close()
	conn.Allowed, conn.Address = true, server.RemoteAddr().String()
	program := net.Conn(&prefixConn{Conn: c, head: head})
	switch {
	case intercept && kind == "tls":
		return p.intercept(ctx, program, server, conn)
	case kind == "http":
		// Read request by request, secrets or not: each must name the
		// host the connection was opened for, so that a later request
		// cannot ask the same server for another site it answers for.
		return p.requests(ctx, program, server, conn, secrets)
	}
	if _, err := server.Write(head); err != nil {
		return conn
	}
	conn.BytesOut = int64(len(head))
	out, in := relay(ctx, c, server)
	conn.BytesOut += out
	conn.BytesIn = in
	return conn
}

// connect resolves name itself and connects to the first of its addresses
// the policy lets through: a name that resolves to a private or loopback
// address (rebinding, say) reaches it only where the policy lists it.
func (p *Proxy) connect(ctx context.Context, name string, port int) (net.Conn, error) {
	resolve := p.Resolve
	if resolve == nil {
		resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	addrs, err := resolve(rctx, name)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("%s does not resolve: %v", name, err)
	}
	var refused []string
	var lastErr error
	dial := p.Dial
	if dial == nil {
		dial = (&net.Dialer{Timeout: 10 * time.Second}).DialContext
	}
	for _, a := range addrs {
		a = a.Unmap()
		if !p.Policy.AllowsAddress(a) {
			refused = append(refused, a.String())
			continue
		}
		c, err := dial(ctx, "tcp", net.JoinHostPort(a.String(), strconv.Itoa(port)))
		if err == nil {
			return c, nil
		}
		lastErr = err
	}
	if lastErr != nil {
		return nil, lastErr
	}
	if len(refused) > 0 {
		return nil, fmt.Errorf("%s resolves to %s, which the policy does not let a connection reach (loopback, private, link-local or reserved); list the range to allow it", name, strings.Join(refused, ", "))
	}
	return nil, fmt.Errorf("%s resolves to no address", name)
}

// relay copies both ways until both sides are done, or ctx ends, and
// returns the bytes each way.
func relay(ctx context.Context, program, server net.Conn) (out, in int64) {
	var wg sync.WaitGroup
	var o, i atomic.Int64
	stop := context.AfterFunc(ctx, func() {
		program.Close()
		server.Close()
	})
	defer stop()
	copyHalf := func(dst, src net.Conn, n *atomic.Int64) {
		defer wg.Done()
		_, _ = io.Copy(countWriter{dst, n}, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			dst.Close()
		}
	}
	wg.Add(2)
	go copyHalf(server, program, &o)
	go copyHalf(program, server, &i)
	wg.Wait()
	return o.Load(), i.Load()
}

type countWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	return n, err
}
