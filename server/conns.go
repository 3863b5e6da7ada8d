package server

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// Listener accepts at most a number of connections open at once, so that no
// client runs the process out of file descriptors; past it, a new one waits
// in the kernel's backlog until one closes. A connection kept alive between
// requests holds its place too, for as long as the http.Server's
// IdleTimeout: so that clients that open connections, make one request on
// each and keep them cannot shut every other client out, a connection that
// waits idle is closed as soon as a new one needs its place, the one idle
// the longest first. Its client opens another when it has a request to make,
// as it does after an IdleTimeout. Set the http.Server's ConnState to the
// Listener's.
type Listener struct {
	net.Listener
	slots     chan struct{}
	closed    chan struct{}
	closeOnce sync.Once

	mu      sync.Mutex
	idle    map[*limitedConn]time.Time // connections between requests, since when
	waiting bool                       // Accept waits for a place
}

// LimitListener returns a Listener that holds at most n connections of ln
// open at once.
func LimitListener(ln net.Listener, n int) *Listener {
	return &Listener{Listener: ln, slots: make(chan struct{}, n), closed: make(chan struct{}), idle: map[*limitedConn]time.Time{}}
}

// Accept waits for a place, closing an idle connection to make one, then
// for a connection.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	default:
		l.mu.Lock()
		l.waiting = true
		oldest := l.oldestIdleLocked()
		l.mu.Unlock()
		if oldest != nil {
			oldest.Close()
		}
		select {
		case l.slots <- struct{}{}:
		case <-l.closed:
			return nil, net.ErrClosed
		}
		l.mu.Lock()
		l.waiting = false
		l.mu.Unlock()
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	lc := &limitedConn{Conn: c}
	lc.release = sync.OnceFunc(func() {
		l.mu.Lock()
		delete(l.idle, lc)
		l.mu.Unlock()
		<-l.slots
	})
	return lc, nil
}

// oldestIdleLocked is the connection idle the longest, or nil.
func (l *Listener) oldestIdleLocked() *limitedConn {
	var oldest *limitedConn
	var since time.Time
	for c, t := range l.idle {
		if oldest == nil || t.Before(since) {
			oldest, since = c, t
		}
	}
	return oldest
}

// ConnState follows the connections' states for the http.Server: which
// wait idle between requests.
func (l *Listener) ConnState(c net.Conn, state http.ConnState) {
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	switch state {
	case http.StateIdle:
		if l.waiting {
			// A new connection waits for a place: this one makes it.
			l.mu.Unlock()
			lc.Close()
			return
		}
		l.idle[lc] = time.Now()
	default:
		delete(l.idle, lc)
	}
	l.mu.Unlock()
}

// Close also ends an Accept waiting for a place.
func (l *Listener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

type limitedConn struct {
	net.Conn
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}
