package main

import (
	"fmt"
	"log/slog"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/config"
)

// engine returns the Engine for a command: a copy of Main's own, or one
// built from the configuration file, with the file's extra mounts for the
// native tier and a function that ends its upstream servers. log hears of
// the upstream servers' starts and failures; nil discards that.
func (m *Main) engine(path string, log *slog.Logger) (*codecell.Engine, []string, func(), int) {
	if path == "" {
		eng := *m.Engine
		if eng.Tools == nil {
			eng.Tools = &codecell.Toolbox{}
		}
		return &eng, nil, func() {}, 0
	}
	cfg, err := config.Load(path)
	if err != nil {
		fmt.Fprintf(m.Stderr, "codecell: %v\n", err)
		return nil, nil, nil, exitUsage
	}
	eng, closeFn, err := cfg.Engine(log)
	if err != nil {
		fmt.Fprintf(m.Stderr, "codecell: %s: %v\n", path, err)
		return nil, nil, nil, exitUsage
	}
	// What Main was given (interpreters, an init binary) still applies
	// where the file says nothing.
	if eng.Interpreters == nil {
		eng.Interpreters = m.Engine.Interpreters
	}
	eng.InitPath, eng.Logger, eng.Tiers = m.Engine.InitPath, m.Engine.Logger, m.Engine.Tiers
	return eng, cfg.Mounts, closeFn, 0
}
