package codecell

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
)

// panickingTier is a tier whose Run panics, as a bug in a tier would.
type panickingTier struct{}

func (panickingTier) Name() string    { return "panicking" }
func (panickingTier) Isolating() bool { return false }
func (panickingTier) Probe() error    { return nil }
func (panickingTier) View(workspace, runner string) View {
	return View{Workspace: workspace, Runner: runner}
}
func (panickingTier) Run(context.Context, *Job) (*Outcome, error) { panic("a fault in the tier") }

// A panic inside the pipeline costs the one Exec: it becomes a
// sandbox_error Result naming the fault, the stack is logged, and the
// Engine goes on.
func TestPanicCostsOneRun(t *testing.T) {
	var logs bytes.Buffer
	e := &Engine{Tiers: []Tier{panickingTier{}}, Logger: slog.New(slog.NewJSONHandler(&logs, nil))}
	for i := 0; i < 2; i++ {
		res, err := e.Run(context.Background(), &Exec{Tier: "panicking", Language: "python", Code: "print(1)"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != StatusSandboxError || res.Error == nil || !strings.Contains(res.Error.Message, "a fault in the tier") || res.Error.Retryable {
			t.Fatalf("run %d: %+v %+v", i, res, res.Error)
		}
	}
	if !strings.Contains(logs.String(), "panicked") || !strings.Contains(logs.String(), "panic_test.go") {
		t.Errorf("the log lacks the panic and its stack:\n%s", logs.String())
	}
}
