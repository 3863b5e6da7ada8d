//go:build linux

package native_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/codecell-dev/codecell"
)

// A live session whose policy allows a host: its interpreter's sandbox
// reaches that host through the proxy for the session's life, each cell's
// Result lists the connections it made, another host stays refused, and a
// cell cannot change the session's network.
func TestNetworkLiveSession(t *testing.T) {
	f := newNetFixture(t)
	session := &codecell.Policy{Network: &codecell.NetworkPolicy{Allow: []string{fmt.Sprintf("api.test:%d", f.port), "127.0.0.0/8"}}}
	live := f.e.NewLive()
	defer live.Close()
	ws := t.TempDir()
	cell := func(code string, own *codecell.NetworkPolicy) *codecell.Result {
		t.Helper()
		res, err := f.e.Run(context.Background(), &codecell.Exec{Language: "python", Code: code, Workspace: ws, Live: live,
			Env: map[string]string{"PORT": fmt.Sprint(f.port)}, SessionPolicy: session, Policy: codecell.Policy{Network: own}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	// A connection is listed by the cell during which it ended: the one
	// that made it, or, when it closes just after, a later one.
	listed := 0
	count := func(res *codecell.Result) {
		for _, c := range res.Network {
			if c.Host == "api.test" && c.Allowed && c.BytesIn > 0 {
				listed++
			}
		}
	}
	settle := func(want int) {
		t.Helper()
		for i := 0; listed < want && i < 50; i++ {
			count(cell("None", nil))
		}
		if listed != want {
			t.Fatalf("%d connections listed, want %d", listed, want)
		}
	}
	res := cell("import os, urllib.request\nget = lambda p: urllib.request.urlopen(f\"http://api.test:{os.environ['PORT']}/{p}\").read().decode()\nget('one')", nil)
	if res.Status != codecell.StatusSuccess || string(res.Value) != fmt.Sprintf(`"hello api.test:%d /one"`, f.port) {
		t.Fatalf("first cell: %s %s %+v %q", res.Status, res.Value, res.Error, res.Stderr)
	}
	if !strings.Contains(res.Isolation.Network, "api.test") {
		t.Fatalf("isolation %q", res.Isolation.Network)
	}
	count(res)
	settle(1)
	// The next cell, in the same interpreter, lists its own.
	res = cell("[get('two'), get('three')]", nil)
	if res.Status != codecell.StatusSuccess || res.SessionState != codecell.SessionKept {
		t.Fatalf("second cell: %s %s %+v", res.Status, res.Value, res.Error)
	}
	count(res)
	settle(3)
	before := f.hits.Load()
	res = cell("try:\n    urllib.request.urlopen(f\"http://other.test:{os.environ['PORT']}/x\", timeout=5)\n    got = 'reached'\nexcept Exception as e:\n    got = 'refused'\ngot", nil)
	if string(res.Value) != `"refused"` || f.hits.Load() != before {
		t.Fatalf("another host: %s, %d hits", res.Value, f.hits.Load()-before)
	}
	res = cell("1", &codecell.NetworkPolicy{Allow: []string{"api.test"}})
	if res.Status != codecell.StatusBlocked || res.Error == nil || res.Error.Code != codecell.CodePolicyUnsupported {
		t.Fatalf("a cell's own network policy: %s %+v", res.Status, res.Error)
	}
	if res = cell("get('four')", nil); res.Status != codecell.StatusSuccess {
		t.Fatalf("after the refusal: %s %+v", res.Status, res.Error)
	}
}

// Node in a live session's cells, through the session's network: fetch,
// whose connection pool keeps a connection open across cells (it is
// listed by the cell during which it closes), and node:http without one.
func TestNetworkLiveSessionNode(t *testing.T) {
	f := newNetFixture(t)
	session := &codecell.Policy{Network: &codecell.NetworkPolicy{Allow: []string{fmt.Sprintf("api.test:%d", f.port), "127.0.0.0/8"}}}
	live := f.e.NewLive()
	defer live.Close()
	ws := t.TempDir()
	cell := func(code string) *codecell.Result {
		t.Helper()
		res, err := f.e.Run(context.Background(), &codecell.Exec{Language: "javascript", Code: code, Workspace: ws, Live: live,
			Env: map[string]string{"PORT": fmt.Sprint(f.port)}, SessionPolicy: session})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != codecell.StatusSuccess {
			t.Fatalf("%q: %s %+v %q", code, res.Status, res.Error, res.Stderr)
		}
		return res
	}
	res := cell("const base = `http://api.test:${process.env.PORT}`;\n(await fetch(base + '/a')).text()")
	if want := fmt.Sprintf(`"hello api.test:%d /a"`, f.port); string(res.Value) != want {
		t.Fatalf("fetch: %s", res.Value)
	}
	res = cell(`const http = require('node:http');
const get = (p) => new Promise((ok, fail) => http.get(base + p, { agent: false }, (r) => {
  let body = '';
  r.on('data', (c) => (body += c));
  r.on('end', () => ok(body));
}).on('error', fail));
await get('/b')`)
	if want := fmt.Sprintf(`"hello api.test:%d /b"`, f.port); string(res.Value) != want {
		t.Fatalf("node:http: %s", res.Value)
	}
	// Listed by this cell, or by a later one when it closed just after.
	listed := 0
	for i := 0; i < 50; i++ {
		for _, c := range res.Network {
			if c.Host == "api.test" && c.Allowed && c.BytesIn > 0 {
				listed++
			}
		}
		if listed > 0 {
			return
		}
		res = cell("null")
	}
	t.Fatalf("the connection node:http made is not listed")
}
