package server

import (
	"fmt"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/api"
)

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
	for _, f := range api.LimitFields {
		if v, m := f.Get(l), f.Get(top); v > 0 && m > 0 && v > m {
			return codecell.Errorf(codecell.KindValidation, CodeLimitTooHigh,
				"the %s asks for a %s limit of %s; this server allows at most %s", what, f.Name, f.Show(v), f.Show(m)).WithHints(
				fmt.Sprintf("ask for %s or less, or leave it out for the default", f.Show(m)))
		}
	}
	return nil
}

// narrow returns the limits of an execution in a session: the session's,
// with the fields the execution sets, which may only be lower.
func narrow(session, exec codecell.Limits) (codecell.Limits, *codecell.Envelope) {
	for _, f := range api.LimitFields {
		if v, b := f.Get(exec), f.Get(session); v > 0 && b > 0 && v > b {
			return codecell.Limits{}, codecell.Errorf(codecell.KindValidation, CodeLimitTooHigh,
				"the execution asks for a %s limit of %s, above its session's %s", f.Name, f.Show(v), f.Show(b)).WithHints(
				"an execution may only lower its session's limits: create a session with higher ones")
		}
	}
	return exec.Or(session), nil
}
