package upstream

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/api"
	"github.com/codecell-dev/codecell/internal/testenv"
)

// A server that does not finish starting within its start_timeout fails
// with a message that names the setting, and the listing of every tool
// still gives the others' tools, waiting for the slowest only.
func TestStartTimeout(t *testing.T) {
	t.Parallel()
	hung := upstream(t, "hung", ServerConfig{Args: []string{"hang-at-start"}, StartTimeout: 0})
	hung.startTimeout = 300 * time.Millisecond
	good := upstream(t, "good", ServerConfig{})
	box := &codecell.Toolbox{}
	for _, u := range []*Upstream{hung, good} {
		if err := box.AddSource(u); err != nil {
			t.Fatal(err)
		}
	}
	box.Start()
	st := testenv.WaitState(t, hung, codecell.SourceFailed)
	var env *codecell.Envelope
	if !errors.As(st.Err, &env) || !strings.Contains(env.Message, "start timeout of 300ms") || !strings.Contains(strings.Join(env.Hints, " "), `"start_timeout" in mcpServers.hung`) {
		t.Errorf("the hung server failed with %+v", st.Err)
	}

	tools, errs := box.List(deadline(t, 60*time.Second))
	names := map[string]bool{}
	for _, tool := range tools {
		names[tool.Name] = true
	}
	if !names["good.echo"] {
		t.Errorf("the good server's tools are missing: %v", names)
	}
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "hung") {
		t.Errorf("errors: %v", errs)
	}
	// The configuration's start_timeout is the Upstream's.
	if u := NewUpstream("x", ServerConfig{Command: "x", StartTimeout: api.Duration(7 * time.Second)}); u.startTimeout != 7*time.Second {
		t.Errorf("start_timeout 7s gave %v", u.startTimeout)
	}
}

// A listing without a deadline of its own (codecell tools) waits for a
// server's start as long as its start timeout allows, not only as long as
// a call may take: a server slower to start than a call is listed, and one
// that does not start is said to have missed its start timeout, with the
// setting to raise.
func TestListingWaitsForTheStart(t *testing.T) {
	t.Parallel()
	hung := upstream(t, "hung", ServerConfig{Args: []string{"hang-at-start"}})
	hung.startTimeout = 2 * time.Second
	hung.callTimeout = 100 * time.Millisecond
	_, err := hung.Tools(context.Background())
	env := wantEnvelope(t, err, codecell.KindUpstream, codecell.CodeUpstreamUnavailable, true, "start timeout of 2s")
	if !strings.Contains(strings.Join(env.Hints, " "), `"start_timeout" in mcpServers.hung`) {
		t.Errorf("hints %q", env.Hints)
	}
}

// A server may say its tools changed as often as it likes: the log gets a
// line a second of it, which counts the changes it leaves out.
func TestToolChangesLogALineASecond(t *testing.T) {
	var buf bytes.Buffer
	u := NewUpstream("flood", ServerConfig{Command: "true"}, WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	s := &session{up: u}
	for range 1000 {
		s.toolsChanged()
	}
	if n := strings.Count(buf.String(), "tools changed"); n != 1 {
		t.Fatalf("1000 changes within a second logged %d lines:\n%s", n, buf.String())
	}
	u.changes.mu.Lock()
	u.changes.last = u.changes.last.Add(-time.Second) // as if a second had passed
	u.changes.mu.Unlock()
	s.toolsChanged()
	if out := buf.String(); strings.Count(out, "tools changed") != 2 || !strings.Contains(out, "changes_not_logged_since_the_last_line=999") {
		t.Fatalf("the line after a second:\n%s", out)
	}
}
