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
	Engine *codecell.Engine
	// ForkMB is the size of the state of the session forked, in MB (10^6
	// bytes): 100 when zero.
	ForkMB        int
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
	return liveFork(ctx, o)
}

// forkState is what the forked session holds: mb MB, as a numpy array (a
// DataFrame's column is one) where numpy is installed, else a bytearray.
func forkState(mb int) string {
	return fmt.Sprintf(`try:
    import numpy as np
    big = np.ones(%d // 8)
except ImportError:
    big = bytearray(%[1]d)
rows = [{"n": i} for i in range(1000)]
len(big)`, mb*1_000_000)
}

// liveFork measures forking a live Python session that holds 100 MB (by
// default: LiveOptions.ForkMB): the
// fork (Live.Fork), and the fork plus its first cell, which starts the
// fork's interpreter in a sandbox of its own and loads the state; against
// a one-shot run, in the same run.
func liveFork(ctx context.Context, o LiveOptions) error {
	eng := o.Engine
	runs := min(o.Runs, 20)
	if o.Progress != nil {
		fmt.Fprintln(o.Progress, "live: fork")
	}
	ws, err := os.MkdirTemp("", "codecell-bench-fork-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(ws)
	parent := eng.NewLive()
	defer parent.Close()
	run := func(x *codecell.Exec) error {
		res, err := eng.Run(ctx, x)
		if err != nil {
			return err
		}
		if res.Status != codecell.StatusSuccess {
			return fmt.Errorf("fork: %s", describeFailure(res))
		}
		return nil
	}
	mb := o.ForkMB
	if mb <= 0 {
		mb = 100
	}
	if err := run(&codecell.Exec{Language: "python", Code: forkState(mb), Workspace: ws, Live: parent}); err != nil {
		return err
	}
	var size int64
	fork := func(context.Context) error {
		child, reps, err := parent.Fork(ctx, 1<<30)
		if err != nil {
			return err
		}
		if len(reps) == 1 {
			size = reps[0].Bytes
		}
		child.Close()
		return nil
	}
	forkAndCell := func(context.Context) error {
		child, _, err := parent.Fork(ctx, 1<<30)
		if err != nil {
			return err
		}
		defer child.Close()
		cws, err := os.MkdirTemp("", "codecell-bench-fork-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(cws)
		return run(&codecell.Exec{Language: "python", Code: "assert len(big) and len(rows) == 1000", Workspace: cws, Live: child})
	}
	oneShot := func(context.Context) error {
		return run(&codecell.Exec{Language: "python", Code: "x = 1"})
	}
	shots, _, err := measure(ctx, oneShot, runs, 1)
	if err != nil {
		return err
	}
	forks, _, err := measure(ctx, fork, runs, 1)
	if err != nil {
		return err
	}
	firsts, _, err := measure(ctx, forkAndCell, runs, 1)
	if err != nil {
		return err
	}
	s50 := percentile(shots, 50)
	tw := tabwriter.NewWriter(o.Out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(o.Out, "\nForking a live Python session that holds %.0f MB (its state, pickled):\n", float64(size)/1e6)
	fmt.Fprintln(tw, "\tp50\tp90\t÷ one-shot run\t")
	fmt.Fprintf(tw, "one-shot run\t%s\t%s\t1.00×\t\n", ms(s50), ms(percentile(shots, 90)))
	fmt.Fprintf(tw, "fork\t%s\t%s\t%.2f×\t\n", ms(percentile(forks, 50)), ms(percentile(forks, 90)), float64(percentile(forks, 50))/float64(s50))
	fmt.Fprintf(tw, "fork + its first cell\t%s\t%s\t%.2f×\t\n", ms(percentile(firsts, 50)), ms(percentile(firsts, 90)), float64(percentile(firsts, 50))/float64(s50))
	tw.Flush()
	fmt.Fprintf(o.Out, "\n%d of each. A fork returns once the session's interpreter has forked a copy of itself (the state as it stands, pages shared until written) and that copy has pickled the state; the copy sends it on meanwhile. The fork's first cell starts its interpreter in a sandbox of its own, waits for the state and loads it (importing again the modules it names), then runs.\n", runs)
	return nil
}
