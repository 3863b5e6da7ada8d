package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/codecell-dev/codecell"
)

// LiveOptions shape a run of codecell bench live.
type LiveOptions struct {
	// Runs is how many cells, and one-shot runs, each language measures.
	Runs int
	// Engine runs both; its tier must keep live sessions (native).
	Engine        *codecell.Engine
	Out, Progress io.Writer
}

// liveLanguage is one language's case: a cell that binds x, one that adds
// to it, and the one-shot program that does as much.
type liveLanguage struct {
	lang, first, cell, oneShot string
}

var liveLanguages = []liveLanguage{
	{"python", "x = 0", "x += 1", "x = 1"},
	{"javascript", "let x = 0", "x += 1", "let x = 1"},
}

// Live measures what a cell of a live session costs against a one-shot
// run of the same language, in the same run, through the library: the
// cell pays for its turn through the session's interpreter and the
// workspace's sync, not for an interpreter or a sandbox.
func Live(ctx context.Context, o LiveOptions) error {
	if o.Runs < 1 {
		return errors.New("runs must be at least 1")
	}
	eng := o.Engine
	tw := tabwriter.NewWriter(o.Out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "language\tone-shot run p50\tp90\tlive cell p50\tp90\tcell ÷ one-shot\t")
	for _, c := range liveLanguages {
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "live: %s\n", c.lang)
		}
		ws, err := os.MkdirTemp("", "codecell-bench-live-")
		if err != nil {
			return err
		}
		live := eng.NewLive()
		run := func(code string, x *codecell.Exec) error {
			res, err := eng.Run(ctx, x)
			if err != nil {
				return err
			}
			if res.Status != codecell.StatusSuccess {
				return fmt.Errorf("%s %q: %s", c.lang, code, describeFailure(res))
			}
			return nil
		}
		cell := func(code string) func(context.Context) error {
			return func(context.Context) error {
				return run(code, &codecell.Exec{Language: c.lang, Code: code, Workspace: ws, Live: live})
			}
		}
		oneShot := func(context.Context) error {
			return run(c.oneShot, &codecell.Exec{Language: c.lang, Code: c.oneShot})
		}
		err = cell(c.first)(ctx)
		var shots, cells []time.Duration
		if err == nil {
			// The one-shot runs' pool and fork servers are warmed first,
			// as a service's are.
			_, _, err = measure(ctx, oneShot, min(o.Runs, 10), 1)
		}
		if err == nil {
			shots, _, err = measure(ctx, oneShot, o.Runs, 1)
		}
		if err == nil {
			cells, _, err = measure(ctx, cell(c.cell), o.Runs, 1)
		}
		live.Close()
		os.RemoveAll(ws)
		if err != nil {
			return err
		}
		s50, c50 := percentile(shots, 50), percentile(cells, 50)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.2f×\t\n", c.lang, ms(s50), ms(percentile(shots, 90)), ms(c50), ms(percentile(cells, 90)),
			float64(c50)/float64(s50))
	}
	tw.Flush()
	fmt.Fprintf(o.Out, "\n%d of each, one after another, in one process on this machine. A cell runs in the session's interpreter, already started in its sandbox; a one-shot run in a sandbox of its own, forked or taken from the pool.\n", o.Runs)
	return nil
}
