package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/guard"
	"github.com/codecell-dev/codecell/lang"
	"github.com/codecell-dev/codecell/tier/native"
)

// guardFlags are the flags that set an Exec's guardrail policy, for run and
// check.
type guardFlags struct {
	set    bool
	policy guard.Policy
}

func (g *guardFlags) register(fs *flag.FlagSet) {
	list := func(into *[]string) func(string) error {
		return func(v string) error {
			g.set = true
			for _, s := range strings.Split(v, ",") {
				if s = strings.TrimSpace(s); s != "" {
					*into = append(*into, s)
				}
			}
			if *into == nil {
				*into = []string{}
			}
			return nil
		}
	}
	fs.Func("block", "refuse these guardrail `CATEGORIES`, comma-separated: "+strings.Join(guard.Categories, ", ")+"; repeatable", list(&g.policy.Block))
	fs.Func("allow-imports", "Python may import only these `MODULES` (and their submodules), comma-separated; repeatable", list(&g.policy.AllowedImports))
	fs.Func("block-imports", "Python may not import these `MODULES`, comma-separated; repeatable", list(&g.policy.BlockedImports))
	fs.Func("allow-command", "shell programs may run only commands matching `PATTERN`, such as \"ls\" or \"git status*\"; repeatable", func(v string) error {
		g.set = true
		g.policy.AllowedCommands = append(g.policy.AllowedCommands, v)
		return nil
	})
}

// guard returns the policy the flags set, or nil when they set none.
func (g *guardFlags) guard() (*guard.Policy, error) {
	if !g.set {
		return nil, nil
	}
	p := g.policy
	return &p, p.Check()
}

// checkCommand runs the guardrails only: nothing runs (tier static).
func (m *Main) checkCommand(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("codecell check", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	var gf guardFlags
	gf.register(fs)
	langName := fs.String("lang", "", "language: python, javascript, typescript, bash, sh (default: from the file's shebang or extension)")
	configPath := fs.String("config", "", "the configuration `FILE`, whose guard section is the policy")
	asJSON := fs.Bool("json", false, "print the Result as one JSON object")
	fs.Usage = func() {
		fmt.Fprint(m.Stderr, `Usage: codecell check [flags] FILE|-

Checks FILE (or standard input, for -) against the guardrails without running
it, and prints what they refuse: rule, line and column, and what to do instead.
The policy is the configuration file's guard section, narrowed by the flags.
Python is parsed by the interpreter's own ast, in the sandbox; JavaScript,
TypeScript and shell on the host. Exits 0 when the program passes, 1 when it
would be blocked (or does not parse), 2 on bad usage, 125 when codecell fails.

Flags:
`)
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(m.Stderr, "codecell check: name one FILE to check, or - for standard input")
		return exitUsage
	}
	policy, err := gf.guard()
	if err != nil {
		fmt.Fprintf(m.Stderr, "codecell check: %v\n", err)
		return exitUsage
	}
	engP, mounts, closeFn, code := m.engine(*configPath, nil)
	if code != 0 {
		return code
	}
	defer closeFn()
	eng := *engP
	eng.Tiers = append([]codecell.Tier{&native.Tier{Pool: -1, ExtraMounts: mounts}}, eng.Tiers...)
	file := fs.Arg(0)
	src, err := m.readSource(file)
	if err != nil {
		fmt.Fprintf(m.Stderr, "codecell check: %v\n", err)
		return exitUsage
	}
	x := codecell.Exec{Tier: codecell.StaticTier, Code: string(src), Language: *langName, Limits: codecell.Limits{CodeSize: runCodeSize}}
	x.Policy.Guard = policy
	name := "<stdin>"
	if file != "-" {
		x.Filename = filepath.Base(file)
		name = file
	}
	if x.Language == "" {
		l := lang.ForFile(x.Filename, x.Code)
		if l == nil {
			fmt.Fprintf(m.Stderr, "codecell check: cannot tell the language of %s; pass --lang (one of %s)\n", name, strings.Join(lang.Names(), ", "))
			return exitUsage
		}
		x.Language = l.Name
	}
	res, err := eng.Run(ctx, &x)
	if err != nil {
		return m.interrupted(err)
	}
	if *asJSON {
		m.printJSON(res)
	}
	switch {
	case res.Status == codecell.StatusSuccess:
		if !*asJSON {
			fmt.Fprintf(m.Stdout, "%s: passes the guardrails (%s)\n", name, describePolicy(res.Policy))
		}
		return 0
	case len(res.Findings) > 0:
		if !*asJSON {
			for _, f := range res.Findings {
				fmt.Fprintf(m.Stdout, "%s:%d:%d: %s (%s)\n", name, f.Line, f.Column, f.Message, f.Rule)
				if f.Hint != "" {
					fmt.Fprintf(m.Stdout, "  hint: %s\n", f.Hint)
				}
			}
			noun := "findings"
			if len(res.Findings) == 1 {
				noun = "finding"
			}
			fmt.Fprintf(m.Stderr, "codecell check: %s would be blocked: %d %s\n", name, len(res.Findings), noun)
		}
		return 1
	case res.Error != nil && res.Error.Code == codecell.CodeSyntaxError:
		if !*asJSON {
			fmt.Fprintf(m.Stdout, "%s\n", res.Error.Message)
		}
		return 1
	case res.Status == codecell.StatusBlocked:
		if !*asJSON {
			m.explain(res)
		}
		if res.Error != nil && res.Error.Kind == codecell.KindValidation {
			return exitUsage
		}
		return 1
	}
	if !*asJSON {
		m.explain(res)
		fmt.Fprint(m.Stderr, res.Stderr)
	}
	return exitInternal
}

// describePolicy says in a few words what the guardrails refused.
func describePolicy(p *codecell.AppliedPolicy) string {
	if p == nil || p.Guard.Empty() {
		return "the policy refuses nothing"
	}
	var parts []string
	if len(p.Guard.Block) > 0 {
		parts = append(parts, "blocked: "+strings.Join(p.Guard.Block, ", "))
	}
	if p.Guard.AllowedImports != nil {
		parts = append(parts, fmt.Sprintf("%d allowed imports", len(p.Guard.AllowedImports)))
	}
	if len(p.Guard.BlockedImports) > 0 {
		parts = append(parts, fmt.Sprintf("%d blocked imports", len(p.Guard.BlockedImports)))
	}
	if p.Guard.AllowedCommands != nil {
		parts = append(parts, fmt.Sprintf("%d allowed command patterns", len(p.Guard.AllowedCommands)))
	}
	return strings.Join(parts, "; ")
}
