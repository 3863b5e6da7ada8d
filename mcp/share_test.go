package mcp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	csession "github.com/codecell-dev/codecell/session"
)

// principalHeader names the principal of a test's request, as codecell
// serve's authentication does from a token.
type principalHeader struct {
	name string
	base http.RoundTripper
}

func (p principalHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Test-Principal", p.name)
	return p.base.RoundTrip(r)
}

// One principal cannot open every MCP session over HTTP and leave the
// others none: past its share, its next is refused with 429, and another
// principal still opens its own.
func TestHTTPSessionsSharedByPrincipals(t *testing.T) {
	s := testServer(t)
	s.MaxHTTPSessions, s.MaxHTTPSessionsPerPrincipal = 4, 2
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	h := s.HTTPHandler(ctx)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := &csession.Principal{Name: r.Header.Get("X-Test-Principal")}
		h.ServeHTTP(w, r.WithContext(csession.WithPrincipal(r.Context(), p)))
	}))
	t.Cleanup(ts.Close)
	connect := func(name string) (*sdk.ClientSession, error) {
		transport := &sdk.StreamableClientTransport{Endpoint: ts.URL, HTTPClient: &http.Client{Transport: principalHeader{name, http.DefaultTransport}}}
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, transport, nil)
		if err == nil {
			t.Cleanup(func() { cs.Close() })
		}
		return cs, err
	}
	opened := 0
	for range 4 {
		cs, err := connect("alice")
		if err != nil {
			if !strings.Contains(err.Error(), "429") && !strings.Contains(err.Error(), "Too Many") {
				t.Errorf("alice's refusal does not say why: %v", err)
			}
			continue
		}
		opened++
		if _, err := cs.ListTools(ctx, nil); err != nil {
			t.Fatal(err)
		}
	}
	if opened != 2 {
		t.Fatalf("alice opened %d sessions, with a share of 2", opened)
	}
	for i := range 2 {
		if _, err := connect("bob"); err != nil {
			t.Fatalf("bob's session %d, alice holding her share: %v", i, err)
		}
	}
}
