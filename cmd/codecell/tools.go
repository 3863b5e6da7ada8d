package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/tooldoc"
)

// toolJSON is one tool in `codecell tools --json`.
type toolJSON struct {
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema,omitempty"`
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
	Signature    string          `json:"signature"`
}

// tools prints the tools programs may call, as a model reads them: one
// signature a line, TypeScript declarations, Python stubs, or JSON.
func (m *Main) tools(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("codecell tools", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	ts := fs.Bool("ts", false, "print TypeScript declarations")
	py := fs.Bool("py", false, "print Python stubs")
	asJSON := fs.Bool("json", false, "print the tools as JSON, with their schemas")
	cfgPath := fs.String("config", "", "the configuration `FILE`, with the upstream MCP servers")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(m.Stderr, "codecell tools: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	eng, _, closeFn, code := m.engine(*cfgPath, nil)
	if code != 0 {
		return code
	}
	defer closeFn()
	// The servers start at once; whoever keeps the listing waiting is
	// named while it does.
	eng.Tools.Start()
	listed := make(chan struct{})
	go m.nameTheSlow(eng.Tools, listed)
	list, errs := eng.Tools.List(ctx)
	close(listed)
	var allowed []codecell.Tool
	for _, t := range list {
		if eng.Policy.Tools.Permits(t.Name) {
			allowed = append(allowed, t)
		}
	}
	for _, err := range errs {
		fmt.Fprintf(m.Stderr, "codecell: %v\n", err)
		var env *codecell.Envelope
		if errors.As(err, &env) {
			for _, h := range env.Hints {
				fmt.Fprintf(m.Stderr, "  hint: %s\n", h)
			}
		}
	}
	switch {
	case *ts:
		fmt.Fprint(m.Stdout, tooldoc.TypeScript(allowed))
	case *py:
		fmt.Fprint(m.Stdout, tooldoc.Python(allowed))
	case *asJSON:
		out := make([]toolJSON, 0, len(allowed))
		for _, t := range allowed {
			out = append(out, toolJSON{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema,
				OutputSchema: t.OutputSchema, Signature: tooldoc.Signature(t)})
		}
		m.printJSON(out)
	default:
		if len(allowed) == 0 && len(errs) == 0 {
			fmt.Fprintln(m.Stderr, "codecell: no tools: declare upstream MCP servers under \"mcpServers\" in a configuration file (--config)")
		}
		for _, t := range allowed {
			fmt.Fprintln(m.Stdout, tooldoc.Signature(t))
			if d := firstLine(t.Description); d != "" {
				fmt.Fprintf(m.Stdout, "    %s\n", d)
			}
		}
	}
	if len(errs) > 0 {
		return 1
	}
	return 0
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

// nameTheSlow says on stderr, two seconds into the listing and every ten
// after, which servers are still starting, until done is closed.
func (m *Main) nameTheSlow(box *codecell.Toolbox, done <-chan struct{}) {
	wait := 2 * time.Second
	for {
		select {
		case <-done:
			return
		case <-time.After(wait):
		}
		wait = 10 * time.Second
		var starting []string
		for _, st := range box.Starting() {
			starting = append(starting, st.String())
		}
		if len(starting) > 0 {
			fmt.Fprintf(m.Stderr, "codecell: waiting for MCP servers to start: %s\n", strings.Join(starting, "; "))
		}
	}
}
