package codecell_test

import (
	"context"
	"testing"

	"github.com/codecell-dev/codecell"
)

// nullTier runs nothing: what is left is the Engine's own cost.
type nullTier struct{}

func (nullTier) Name() string    { return "null" }
func (nullTier) Isolating() bool { return false }
func (nullTier) Probe() error    { return nil }
func (nullTier) View(ws, runner string) codecell.View {
	return codecell.View{Workspace: ws, Runner: runner}
}
func (nullTier) Run(ctx context.Context, job *codecell.Job) (*codecell.Outcome, error) {
	return &codecell.Outcome{}, nil
}

func BenchmarkEngineOverhead(b *testing.B) {
	for _, lang := range []string{"python", "javascript", "sh"} {
		b.Run(lang, func(b *testing.B) {
			eng := &codecell.Engine{Tiers: []codecell.Tier{nullTier{}}}
			code := "print(1)\n"
			switch lang {
			case "javascript":
				code = "console.log(1)\n"
			case "sh":
				code = "echo 1\n"
			}
			for i := 0; i < b.N; i++ {
				res, err := eng.Run(context.Background(), &codecell.Exec{Tier: "null", Language: lang, Code: code})
				if err != nil || res.Status != codecell.StatusSuccess {
					b.Fatal(err, res.Status, res.Error)
				}
			}
		})
	}
}
