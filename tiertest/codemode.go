//go:build linux

package tiertest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/codecell-dev/codecell"
)

// runBounded runs x, failing the test if the Run has not returned within
// bound: what a host waiting on a misbehaving tool would see as a hang.
func (s *suite) runBounded(t *testing.T, eng *codecell.Engine, x codecell.Exec, bound time.Duration) *codecell.Result {
	t.Helper()
	done := make(chan *codecell.Result, 1)
	go func() {
		x.Tier = s.tier.Name()
		res, err := s.engine(eng).Run(context.Background(), &x)
		if err != nil {
			t.Errorf("Run: %v", err)
		}
		done <- res
	}()
	select {
	case res := <-done:
		if res == nil {
			t.FailNow()
		}
		return res
	case <-time.After(bound):
		t.Fatalf("the Run did not return within %s", bound)
		return nil
	}
}

// toolsHung: a Go tool that never returns and ignores its context costs its
// call's timeout (TOOL_TIMEOUT, which the program handles), and a program
// that ends with such a call in flight ends its Run; an approver that never
// answers and ignores its context is bounded the same way.
func (s *suite) toolsHung(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	hung := codecell.Tool{Name: "hung", Call: func(context.Context, json.RawMessage) (json.RawMessage, error) {
		<-release
		return json.RawMessage(`"late"`), nil
	}}
	box := &codecell.Toolbox{}
	if err := box.Add(hung); err != nil {
		t.Fatal(err)
	}
	eng := &codecell.Engine{Tools: box}
	ping := codecell.Tool{Name: "ping", Call: func(context.Context, json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`"pong"`), nil
	}}
	res := s.runBounded(t, eng, codecell.Exec{Language: "python", Limits: codecell.Limits{ToolTimeout: 300 * time.Millisecond, Timeout: 20 * time.Second},
		Code: "try:\n    await call_tool('hung', {})\n    r = 'answered'\nexcept ToolError as e:\n    r = e.envelope['error_code']\nr\n"}, 15*time.Second)
	expect(t, res, codecell.StatusSuccess)
	expectValue(t, res, `"TOOL_TIMEOUT"`)
	if got := strings.Join(callNames(res), " "); got != "hung:TOOL_TIMEOUT" {
		t.Errorf("trace: %s", got)
	}
	// The program ends with the call in flight, long before its timeout.
	res = s.runBounded(t, eng, codecell.Exec{Language: "python", Limits: codecell.Limits{ToolTimeout: time.Minute, Timeout: 20 * time.Second},
		Tools: []codecell.Tool{ping}, Code: inFlightAtExit("hung")}, 15*time.Second)
	expect(t, res, codecell.StatusSuccess)
	if got := strings.Join(callNames(res), " "); got != "hung:TOOL_FAILED ping" {
		t.Errorf("trace: %s", got)
	}

	// A tool source that never lists its tools, and ignores its context.
	stuck := &codecell.Toolbox{}
	if err := stuck.AddSource(stuckSource{release}); err != nil {
		t.Fatal(err)
	}
	res = s.runBounded(t, &codecell.Engine{Tools: stuck}, codecell.Exec{Language: "python", Limits: codecell.Limits{Timeout: 20 * time.Second},
		Tools: []codecell.Tool{ping}, Code: inFlightAtExit("stuck.x")}, 15*time.Second)
	expect(t, res, codecell.StatusSuccess)
	if got := strings.Join(callNames(res), " "); got != "stuck.x:TOOL_FAILED ping" {
		t.Errorf("trace: %s", got)
	}

	ask := &codecell.Engine{Tools: box, Policy: codecell.Policy{Tools: codecell.ToolPolicy{Rules: []codecell.ToolRule{{Tool: "hung", Action: "ask"}}}}}
	deaf := func(context.Context, codecell.ApprovalRequest) (codecell.Approval, error) {
		<-release
		return codecell.Approval{Approved: true}, nil
	}
	res = s.runBounded(t, ask, codecell.Exec{Language: "python", Limits: codecell.Limits{Timeout: 3 * time.Second}, Approver: deaf,
		Code: "try:\n    await call_tool('hung', {})\n    r = 'answered'\nexcept ToolError as e:\n    r = e.envelope['error_code']\nr\n"}, 15*time.Second)
	expect(t, res, codecell.StatusSuccess)
	expectValue(t, res, `"TOOL_DENIED"`)
	if len(res.ToolCalls) != 1 || res.ToolCalls[0].Approval == nil || res.ToolCalls[0].Approval.Reason != "no answer in time" {
		t.Errorf("trace %+v", res.ToolCalls)
	}
}

// toolsTraceTruthful: a run allowed more calls than a Result lists says how
// many of those left out were served and how many refused, and lists every
// call it made up to the bound, each with its outcome.
func (s *suite) toolsTraceTruthful(t *testing.T) {
	tt := newTestTools(t)
	res := s.runTools(t, tt, codecell.Exec{Language: "python", Limits: codecell.Limits{ToolCalls: 250},
		Code: "ok = 0\nfor i in range(260):\n    try:\n        call_tool_sync('add', {'a': i, 'b': 0})\n        ok += 1\n    except ToolError as e:\n        pass\nok\n"})
	expect(t, res, codecell.StatusSuccess)
	expectValue(t, res, `250`)
	if len(res.ToolCalls) != 200 {
		t.Fatalf("%d calls listed, want the first 200", len(res.ToolCalls))
	}
	for i, c := range res.ToolCalls {
		if !c.OK || c.Name != "add" {
			t.Fatalf("call %d: %+v", i, c)
		}
	}
	want := "60 more tool calls are not listed: 50 within the tool call limit, 10 refused past it"
	if !strings.Contains(strings.Join(res.Warnings, "\n"), want) {
		t.Errorf("warnings %q, want %q", res.Warnings, want)
	}
}

// toolsHugeNames: a program that calls tools by names of megabytes costs
// the host no more than a call by a short name: the names are refused
// before any lookup, and the Result lists them cut short.
func (s *suite) toolsHugeNames(t *testing.T) {
	tt := newTestTools(t)
	for i := range 40 {
		if err := tt.box.Add(codecell.Tool{Name: fmt.Sprintf("tool_number_%d_with_a_longish_name", i), Call: func(context.Context, json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(`1`), nil
		}}); err != nil {
			t.Fatal(err)
		}
	}
	res := s.runBounded(t, &codecell.Engine{Tools: tt.box}, codecell.Exec{Language: "python", Limits: codecell.Limits{ToolCalls: 9, Timeout: 20 * time.Second},
		Code: `import asyncio
name = "tool_number_1_with_a_longish_name" * 120000
async def one(n):
    try:
        await call_tool(n, {})
        return "called"
    except ToolError as e:
        return [e.envelope["error_code"], len(e.envelope["message"]) < 1000]
r = await asyncio.gather(*(one(name + str(i)) for i in range(8)))
r.append(await call_tool("add", {"a": 1, "b": 1}))
r
`}, 15*time.Second)
	expect(t, res, codecell.StatusSuccess)
	expectValue(t, res, "["+strings.Repeat(`["TOOL_NOT_FOUND", true], `, 8)+"2]")
	b, _ := json.Marshal(res)
	if len(b) > 64<<10 {
		t.Errorf("the Result is %d bytes", len(b))
	}
	for _, c := range res.ToolCalls {
		if len(c.Name) > 300 {
			t.Errorf("the trace lists a name of %d bytes", len(c.Name))
		}
	}
}

// stuckSource never lists its tools until released, whatever its context.
type stuckSource struct{ release chan struct{} }

func (stuckSource) Name() string { return "stuck" }

func (s stuckSource) Tools(context.Context) ([]codecell.Tool, error) {
	<-s.release
	return nil, nil
}

// inFlightAtExit is a program that ends with a call of name in flight: the
// call is written before ping's, on the same channel, so the host has it
// once ping is answered.
func inFlightAtExit(name string) string {
	return fmt.Sprintf("import asyncio, os\nleft = asyncio.ensure_future(call_tool(%q, {}))\nawait asyncio.sleep(0)\nawait call_tool('ping')\nos._exit(0)\n", name)
}
