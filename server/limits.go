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
