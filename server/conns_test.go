package server_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/codecell-dev/codecell/server"
)

// A client that fills every place of the Listener with connections kept
// alive, one request made on each, does not shut others out: the one idle
// the longest is closed for a new client, and a connection with a request
// under way is never closed.
func TestIdleConnectionsMakeRoom(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	const places = 8
	limited := server.LimitListener(ln, places)
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	// Each time the Listener has a connection as idle: the kept ones go
	// idle in the order they are made, so that the first is the oldest.
	idle := make(chan struct{}, 64)
	hs := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/slow" {
				started <- struct{}{}
				<-release
			}
			io.WriteString(w, "ok")
		}),
		IdleTimeout: time.Hour, ReadHeaderTimeout: time.Hour,
		ConnState: func(c net.Conn, state http.ConnState) {
			limited.ConnState(c, state)
			if state == http.StateIdle {
				select {
				case idle <- struct{}{}:
				default:
				}
			}
		},
	}
	go hs.Serve(limited)
	t.Cleanup(func() { hs.Close() })
	addr := ln.Addr().String()

	// One place holds a request under way.
	slow, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	fmt.Fprintf(slow, "GET /slow HTTP/1.1\r\nHost: localhost\r\n\r\n")
	<-started
	// The others, connections kept alive after one request each.
	var kept []*bufio.Reader
	var keptConns []net.Conn
	for range places - 1 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
		r := bufio.NewReader(c)
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		<-idle
		kept, keptConns = append(kept, r), append(keptConns, c)
	}
	// A new client is served; without the Listener making room it would
	// wait for an hour.
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{DisableKeepAlives: true}}
	for i := range 3 {
		resp, err := client.Get("http://" + addr + "/")
		if err != nil {
			t.Fatalf("new client %d, with every place taken: %v", i, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	// The oldest kept connections were closed for them, and the request
	// under way goes on.
	keptConns[0].SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := kept[0].ReadByte(); err != io.EOF {
		t.Errorf("the connection idle the longest: read %v, want EOF", err)
	}
	close(release)
	slow.SetReadDeadline(time.Now().Add(time.Minute))
	resp, err := http.ReadResponse(bufio.NewReader(slow), nil)
	if err != nil {
		t.Fatalf("the request under way: %v", err)
	}
	if b, _ := io.ReadAll(resp.Body); string(b) != "ok" {
		t.Fatalf("the request under way got %q", b)
	}
}
