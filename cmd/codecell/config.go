package main

import (
	"fmt"
	"log/slog"
	"sort"
	"strings"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/config"
	"github.com/codecell-dev/codecell/mcp/upstream"
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
	// A tier this build lacks, or a mount the sandbox could not show, is
	// the file's mistake, said now rather than at each run.
	if cfg.Tier != "" && cfg.Tier != "auto" {
		if _, ok := codecell.LookupTier(cfg.Tier); !ok {
			names := append([]string{"auto"}, codecell.TierNames()...)
			msg := fmt.Sprintf("tier %q is not a tier of this build", cfg.Tier)
			if near := codecell.Suggest(cfg.Tier, names); near != "" {
				msg += fmt.Sprintf("; did you mean %q?", near)
			}
			fmt.Fprintf(m.Stderr, "codecell: %s: %s (tiers: %s)\n", path, msg, strings.Join(names, ", "))
			return nil, nil, nil, exitUsage
		}
	}
	for _, dir := range cfg.Mounts {
		if err := checkMount(dir); err != nil {
			fmt.Fprintf(m.Stderr, "codecell: %s: mounts: %v\n", path, err)
			return nil, nil, nil, exitUsage
		}
	}
	configureDocker(cfg.Docker)
	eng, closeFn, err := engineOf(cfg, log)
	if err != nil {
		fmt.Fprintf(m.Stderr, "codecell: %s: %v\n", path, err)
		return nil, nil, nil, exitUsage
	}
	// What is allowed but probably not meant (a secret whose hosts no
	// program may reach) is said once, at start.
	for _, note := range cfg.Notes() {
		fmt.Fprintf(m.Stderr, "codecell: %s: note: %s\n", path, note)
	}
	// What Main was given (interpreters, an init binary) still applies
	// where the file says nothing.
	if eng.Interpreters == nil {
		eng.Interpreters = m.Engine.Interpreters
	}
	eng.InitPath, eng.Logger, eng.Tiers = m.Engine.InitPath, m.Engine.Logger, m.Engine.Tiers
	return eng, cfg.Mounts, closeFn, 0
}

// engineOf builds an Engine from the configuration: its tier, limits,
// interpreters and tool policy, and a Toolbox holding the upstream MCP
// servers, which connect on first use (or when the Toolbox is started).
// log, when not nil, hears of the servers' starts, failures and losses.
// closeFn ends the servers. Mounts are left to the caller, which
// configures its native tier.
func engineOf(c *config.Config, log *slog.Logger) (eng *codecell.Engine, closeFn func(), err error) {
	box := &codecell.Toolbox{}
	var ups []*upstream.Upstream
	names := make([]string, 0, len(c.Servers))
	for name := range c.Servers {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		u := upstream.NewUpstream(name, c.Servers[name], upstream.WithLogger(log))
		if err := box.AddSource(u); err != nil {
			for _, u := range ups {
				u.Close()
			}
			return nil, nil, err
		}
		ups = append(ups, u)
	}
	eng = &codecell.Engine{
		Tier:         c.Tier,
		Limits:       c.Limits.Codecell(),
		Interpreters: c.Interpreters,
		Tools:        box,
		Policy:       codecell.Policy{Tools: c.Tools, Guard: c.Guard, Network: c.Network},
		Packages:     c.PackageSources(),
	}
	return eng, func() {
		for _, u := range ups {
			u.Close()
		}
	}, nil
}
