//go:build unix

package upstream

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/testenv"
)

// rawUpstream is an Upstream of the test server speaking JSON-RPC by hand
// and misbehaving as mode says (testdata/server/raw.go), with short time
// limits: no test waits out the defaults.
func rawUpstream(t *testing.T, mode string) *Upstream {
	t.Helper()
	u := upstream(t, "raw", ServerConfig{Args: []string{"raw", mode}})
	u.startTimeout = 10 * time.Second
	u.callTimeout = 10 * time.Second
	u.discoverTimeout = 200 * time.Millisecond
	return u
}

// A server that ignores the requests it does not know, rather than
// answering them with an error, gets no answer to server/discover, which
// the SDK sends first. The discovery is bounded: the start falls back to
// initialize at once instead of spending the whole start timeout on
// server/discover (and then failing, as initialize was sent with the
// start's expired context).
func TestServerIgnoringDiscoverStarts(t *testing.T) {
	t.Parallel()
	u := rawUpstream(t, "legacy")
	began := time.Now()
	tools, err := u.Tools(deadline(t, 30*time.Second))
	took := time.Since(began)
	t.Logf("listing took %s", took)
	if err != nil {
		t.Fatalf("Tools after %s: %v", took, err)
	}
	if len(tools) != 1 || tools[0].Name != "echo" {
		t.Fatalf("tools: %+v", tools)
	}
	if got := mustCall(t, u, "echo", `{}`); string(got) != `"echoed"` {
		t.Errorf("echo: %s", got)
	}
}

// A server that never answers initialize fails its start at the start
// timeout, and a call waiting for it gets an envelope by its own deadline.
func TestServerNeverAnsweringInitialize(t *testing.T) {
	t.Parallel()
	u := rawUpstream(t, "silent")
	u.startTimeout = 500 * time.Millisecond
	began := time.Now()
	_, err := call(deadline(t, 30*time.Second), u, "echo", `{}`)
	t.Logf("call failed after %s", time.Since(began))
	wantEnvelope(t, err, codecell.KindUpstream, codecell.CodeUpstreamUnavailable, true, "did not finish starting within its start timeout of 500ms")
}

// A server that answers initialize but never tools/list is ready after
// its start timeout at most (usable by the tools' names); a listing gets a
// timeout envelope by its deadline, and a call of a tool works.
func TestServerNeverAnsweringToolsList(t *testing.T) {
	t.Parallel()
	u := rawUpstream(t, "no-list")
	u.startTimeout = 500 * time.Millisecond
	u.callTimeout = 300 * time.Millisecond
	began := time.Now()
	_, err := u.Tools(context.Background())
	t.Logf("listing failed after %s", time.Since(began))
	wantEnvelope(t, err, codecell.KindTimeout, codecell.CodeToolTimeout, true, "tools/list")
	if got := mustCall(t, u, "echo", `{}`); string(got) != `"echoed"` {
		t.Errorf("echo: %s", got)
	}
}

// A server that answers a call with an id that was never sent leaves the
// call to its deadline; the stray answer harms nothing else.
func TestServerAnsweringWithAWrongID(t *testing.T) {
	t.Parallel()
	u := rawUpstream(t, "wrong-id")
	toolsByName(t, u)
	began := time.Now()
	_, err := call(deadline(t, 300*time.Millisecond), u, "echo", `{}`)
	t.Logf("call failed after %s", time.Since(began))
	wantEnvelope(t, err, codecell.KindTimeout, codecell.CodeToolTimeout, true, "raw.echo did not answer in time")
	toolsByName(t, u) // the session still works
}

// A server that answers a call twice: the first answer counts, the second
// is dropped, and the session goes on.
func TestServerAnsweringTwice(t *testing.T) {
	t.Parallel()
	u := rawUpstream(t, "twice")
	for range 3 {
		if got := mustCall(t, u, "echo", `{}`); string(got) != `"echoed"` {
			t.Errorf("echo: %s", got)
		}
	}
}

// A server that asks codecell for sampling, roots and elicitation during a
// call gets an error for each at once (codecell declares none of these
// capabilities: there is no user to ask), and the call completes.
func TestServerAskingTheClient(t *testing.T) {
	t.Parallel()
	u := rawUpstream(t, "ask")
	began := time.Now()
	got := mustCall(t, u, "echo", `{}`)
	t.Logf("call answered after %s: %s", time.Since(began), got)
}

// A server that floods codecell with notifications: calls still answer,
// and codecell's memory stays bounded.
func TestServerFloodingNotifications(t *testing.T) {
	t.Parallel()
	u := rawUpstream(t, "flood")
	began := time.Now()
	for range 20 {
		if got := mustCall(t, u, "echo", `{}`); string(got) != `"echoed"` {
			t.Errorf("echo: %s", got)
		}
	}
	t.Logf("20 calls amid the flood took %s", time.Since(began))
}

// A server that closes its stdout mid-call but keeps running (and ignores
// SIGTERM): the call fails at once with an envelope saying the connection
// broke, the server is killed, and the next call starts it again.
func TestServerClosingStdout(t *testing.T) {
	t.Parallel()
	u := rawUpstream(t, "close-stdout")
	began := time.Now()
	_, err := call(deadline(t, 30*time.Second), u, "echo", `{}`)
	t.Logf("call failed after %s", time.Since(began))
	wantEnvelope(t, err, codecell.KindUpstream, codecell.CodeUpstreamUnavailable, true, "")
	t.Log(err)
}

// A server that stops reading its stdin: a call whose params do not fit in
// the pipe cannot be written, and still ends at its deadline; the ping that
// follows cannot be written either, so the server is dropped as hung.
func TestServerNotReadingItsInput(t *testing.T) {
	t.Parallel()
	u := rawUpstream(t, "no-read")
	toolsByName(t, u)
	big := `{"text": "` + strings.Repeat("x", 1<<20) + `"}`
	began := time.Now()
	_, err := call(deadline(t, 300*time.Millisecond), u, "echo", big)
	took := time.Since(began)
	t.Logf("call failed after %s", took)
	wantEnvelope(t, err, codecell.KindTimeout, codecell.CodeToolTimeout, true, "raw.echo")
	if took > 3*time.Second {
		t.Errorf("the call ended %s after it began, beyond its deadline of 300ms", took)
	}
	st := testenv.WaitState(t, u, codecell.SourceFailed)
	t.Logf("then: %v", st.Err)
}

// A server that writes a line without end: the SDK gives up on it at
// 16 MiB, so the call fails at once with an envelope that says the
// connection broke, and the server is started again on the next call.
func TestServerWritingAnEndlessLine(t *testing.T) {
	t.Parallel()
	u := rawUpstream(t, "endless-line")
	toolsByName(t, u)
	began := time.Now()
	_, err := call(deadline(t, 30*time.Second), u, "echo", `{}`)
	t.Logf("call failed after %s: %v", time.Since(began), err)
	wantEnvelope(t, err, codecell.KindUpstream, codecell.CodeUpstreamUnavailable, true, "raw.echo")
	toolsByName(t, u) // a new session
}
