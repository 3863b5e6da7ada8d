package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// handshakeTimeout bounds each TLS handshake of an intercepted connection.
const handshakeTimeout = 15 * time.Second

// intercept serves a TLS connection to a host of a secret: the proxy
// opens its own TLS to the server, verifying the server's certificate for
// the name, then ends the program's TLS with a certificate of its
// authority, and hands the requests on one by one (requests). HTTP/1.1
// only: both sides are offered nothing else.
func (p *Proxy) intercept(ctx context.Context, program, server net.Conn, conn Connection) Connection {
	hctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	defer cancel()
	// The server first: a program's handshake is not answered for a
	// server that cannot show the name's certificate.
	up := tls.Client(server, &tls.Config{ServerName: conn.Host, RootCAs: p.RootCAs, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12})
	if err := up.HandshakeContext(hctx); err != nil {
		conn.Allowed, conn.Reason = false, fmt.Sprintf("the TLS handshake with the server of %s, which the proxy makes to add a secret, failed: %v", conn.Host, err)
		return conn
	}
	defer up.Close()
	down := tls.Server(program, &tls.Config{
		NextProtos: []string{"http/1.1"},
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			return p.Authority.Certificate(conn.Host)
		},
	})
	if err := down.HandshakeContext(hctx); err != nil {
		conn.Allowed, conn.Reason = false, fmt.Sprintf("the program's TLS handshake with the proxy, which ends TLS for %s to add a secret, failed: %v", conn.Host, err)
		return conn
	}
	defer down.Close()
	return p.requests(ctx, down, up, conn, p.Secrets)
}

// requests hands the program's HTTP requests to the server one at a time
// (secrets: those that may go on the connection, see inTheClear),
// each read whole (net/http's parser) and written anew: the secrets that
// go to the connection's host are put in, a placeholder of one that does
// not refuses the connection, and every request must name the host. The
// server's answers go back as they come. After a protocol upgrade
// (WebSocket), the rest goes through as it is, only watched for
// placeholders that do not go there (forward).
func (p *Proxy) requests(ctx context.Context, program, server net.Conn, conn Connection, secrets []*Secret) Connection {
	var out, in atomic.Int64
	stop := context.AfterFunc(ctx, func() {
		program.Close()
		server.Close()
	})
	defer stop()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(countWriter{program, &in}, server)
		closeWrite(program)
	}()
	added := map[string]bool{}
	_, failure := forward(program, countWriter{server, &out}, secrets, conn.Host, conn.Port, added)
	for name := range added {
		conn.Secrets = append(conn.Secrets, name)
	}
	sort.Strings(conn.Secrets)
	if failure != nil && ctx.Err() != nil {
		failure = nil // the run ended
	}
	if failure != nil {
		conn.Allowed, conn.Reason = false, failure.Error()
		program.Close()
		server.Close()
	} else {
		closeWrite(server)
	}
	wg.Wait()
	conn.BytesOut, conn.BytesIn = out.Load(), in.Load()
	return conn
}

// forward reads the program's requests from br and writes each to w,
// rewritten (secrets.go), until br ends, a request is refused, or one
// upgrades the protocol (upgraded: the rest is not HTTP/1.1).
func forward(r io.Reader, w io.Writer, secrets []*Secret, host string, port int, added map[string]bool) (upgraded bool, err error) {
	// What goes out, bodies and what follows an upgrade included, is
	// watched for placeholders of secrets that do not go to host.
	watch := &strayWatch{w: w, secrets: secrets, host: host, port: port}
	w = watch
	// A request's head is bounded (net/http's parser bounds none); its
	// body is not.
	budget := &budgetReader{r: r}
	br := bufio.NewReaderSize(budget, 16<<10)
	for {
		budget.left = maxHead
		req, err := http.ReadRequest(br)
		budget.left = -1
		if err != nil {
			if errors.Is(err, errHeadTooLong) {
				return false, err
			}
			if budget.err != nil {
				// The connection ended (closed, reset), not a request.
				return false, nil
			}
			return false, fmt.Errorf("a request on the connection cannot be read as HTTP/1.1: %v", err)
		}
		if err := rewrite(req, secrets, host, port, added); err != nil {
			return false, err
		}
		if req.Header.Get("User-Agent") == "" {
			req.Header["User-Agent"] = []string{""} // not Go's own
		}
		upgrade := req.Header.Get("Upgrade") != ""
		err = req.Write(w)
		req.Body.Close()
		if watch.err != nil {
			return false, watch.err
		}
		if err != nil {
			// The server went away, or the program's body ended early.
			return false, nil
		}
		if upgrade {
			_, _ = br.WriteTo(w)
			return true, watch.err
		}
	}
}

// strayWatch writes to w what holds no placeholder of a secret that does
// not go to host:port, and refuses the rest: it keeps the end of what it
// wrote, so that a placeholder split across writes is seen.
type strayWatch struct {
	w       io.Writer
	secrets []*Secret
	host    string
	port    int
	tail    []byte
	err     error
}

func (s *strayWatch) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	if len(s.secrets) > 0 {
		buf := append(s.tail, p...)
		if err := stray(s.secrets, buf, s.host, s.port, "the data of an HTTP request"); err != nil {
			s.err = err
			return 0, err
		}
		keep := placeholderLen - 1
		if len(buf) < keep {
			keep = len(buf)
		}
		s.tail = append(s.tail[:0], buf[len(buf)-keep:]...)
	}
	return s.w.Write(p)
}

// placeholderLen bounds a placeholder's length.
const placeholderLen = len(PlaceholderPrefix) + 63 + 1 + 32

// maxHead bounds a request's head.
const maxHead = 1 << 20

// errHeadTooLong refuses a request whose head passes maxHead.
var errHeadTooLong = fmt.Errorf("a request's head passes %d bytes", maxHead)

// budgetReader reads at most left bytes, when left is not negative.
type budgetReader struct {
	r    io.Reader
	left int64
	err  error // what r returned last, when not nil
}

func (b *budgetReader) Read(p []byte) (int, error) {
	if b.left == 0 {
		return 0, errHeadTooLong
	}
	if b.left > 0 && int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	if err != nil {
		b.err = err
	}
	if b.left > 0 {
		b.left -= int64(n)
	}
	return n, err
}

// closeWrite ends c's writing half, or c.
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	} else {
		c.Close()
	}
}

// prefixConn is a connection whose first bytes, already read, are head.
type prefixConn struct {
	net.Conn
	head []byte
}

func (c *prefixConn) Read(b []byte) (int, error) {
	if len(c.head) > 0 {
		n := copy(b, c.head)
		c.head = c.head[n:]
		return n, nil
	}
	return c.Conn.Read(b)
}

func (c *prefixConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}
