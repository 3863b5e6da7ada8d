package bench

import (
	"io"

	"github.com/codecell-dev/codecell"
)

// LoadOptions shape a load run of the HTTP service.
type LoadOptions struct {
	Executions  int // in all
	Clients     int // sending at once
	MaxRunning  int // the server's admission limit
	SessionsPer int // executions per session; the rest run without one
}

// SideOptions shape a side-by-side run.
type SideOptions struct {
	// Runs is how many programs each case runs at each concurrency.
	Runs int
	// Clients are the concurrencies measured; the first is usually 1
	// (sequential), whose p50 the table shows.
	Clients []int
	// Python, Node and Sh are the bare interpreters.
	Python, Node, Sh string
	// GoJudge, when set, is the URL of a go-judge server (its /run),
	// measured in the same run.
	GoJudge string
	// Exe, when set, is the codecell binary: its one-shot CLI (codecell
	// run FILE, a new process each time) joins the cases, and an idle
	// codecell serve's memory is measured.
	Exe string
	// Engine gives the interpreters and the init binary; the cases run on
	// its native tier, with its pool.
	Engine        *codecell.Engine
	Out, Progress io.Writer
}
