package server

import (
	"fmt"
	"time"

	"github.com/codecell-dev/codecell"
)

// limitField is one limit, read as a number, with how to write it.
type limitField struct {
	name string
	get  func(codecell.Limits) float64
	show func(float64) string
}

func count(v float64) string { return fmt.Sprintf("%d", int64(v)) }
func dur(v float64) string   { return time.Duration(v).String() }
func bytesOf(v float64) string {
	switch n := int64(v); {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dG", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dM", n>>20)
	default:
		return fmt.Sprintf("%d bytes", n)
	}
}

// limitFields names the limits as the API's JSON does.
var limitFields = []limitField{
	{"timeout", func(l codecell.Limits) float64 { return float64(l.Timeout) }, dur},
	{"memory", func(l codecell.Limits) float64 { return float64(l.Memory) }, bytesOf},
	{"processes", func(l codecell.Limits) float64 { return float64(l.Processes) }, count},
	{"cpus", func(l codecell.Limits) float64 { return l.CPU }, func(v float64) string { return fmt.Sprint(v) }},
	{"stdout", func(l codecell.Limits) float64 { return float64(l.Stdout) }, count},
	{"stderr", func(l codecell.Limits) float64 { return float64(l.Stderr) }, count},
	{"code_size", func(l codecell.Limits) float64 { return float64(l.CodeSize) }, count},
	{"tool_calls", func(l codecell.Limits) float64 { return float64(l.ToolCalls) }, count},
	{"tool_timeout", func(l codecell.Limits) float64 { return float64(l.ToolTimeout) }, dur},
	{"tool_result", func(l codecell.Limits) float64 { return float64(l.ToolResult) }, bytesOf},
	{"value", func(l codecell.Limits) float64 { return float64(l.Value) }, bytesOf},
	{"workspace", func(l codecell.Limits) float64 { return float64(l.Workspace) }, bytesOf},
}

func limitsError(err error) *codecell.Envelope {
	if err == nil {
		return nil
	}
	return codecell.Errorf(codecell.KindValidation, codecell.CodeInvalidRequest, "%v", err).WithHints(
		"give limits as positive numbers, or leave them out for the defaults")
}

// maxLimits are the most a client may ask for.
func (s *Server) maxLimits() codecell.Limits { return s.MaxLimits.Or(DefaultMaxLimits) }

// checkMax refuses limits above the server's maximum.
func (s *Server) checkMax(l codecell.Limits, what string) *codecell.Envelope {
	top := s.maxLimits()
	for _, f := range limitFields {
		if v, m := f.get(l), f.get(top); v > 0 && m > 0 && v > m {
			return codecell.Errorf(codecell.KindValidation, CodeLimitTooHigh,
				"the %s asks for a %s limit of %s; this server allows at most %s", what, f.name, f.show(v), f.show(m)).WithHints(
				fmt.Sprintf("ask for %s or less, or leave it out for the default", f.show(m)))
		}
	}
	return nil
}

// narrow returns the limits of an execution in a session: the session's,
// with the fields the execution sets, which may only be lower.
func narrow(session, exec codecell.Limits) (codecell.Limits, *codecell.Envelope) {
	for _, f := range limitFields {
		if v, b := f.get(exec), f.get(session); v > 0 && b > 0 && v > b {
			return codecell.Limits{}, codecell.Errorf(codecell.KindValidation, CodeLimitTooHigh,
				"the execution asks for a %s limit of %s, above its session's %s", f.name, f.show(v), f.show(b)).WithHints(
				"an execution may only lower its session's limits: create a session with higher ones")
		}
	}
	return exec.Or(session), nil
}
