// Package guardcorpus holds programs, allowed and refused, with the layer
// that is expected to stop each: the guardrails before it runs (static),
// Python's import hook while it runs (runtime), or the sandbox (sandbox).
// The tests run every one through codecell check and through the whole
// pipeline, and compare the verdicts.
//
// Each program's first line is a comment holding its case as JSON:
//
//	# guard: {"policy": {"block": ["network"]}, "expect": "static", "rule": "network.import", "at": [2, 1]}
//
// expect is one of:
//   - static: refused before running, with the first finding's rule at the
//     line and column (counted in the file, header included);
//   - runtime: runs, and the import hook ends it with
//     SANDBOX_MODULE_BLOCKED (Python);
//   - sandbox: passes the guardrails, runs, and the sandbox stops what it
//     tries; the program says so in its value or stdout;
//   - allowed: passes the guardrails and runs to success.
//
// For the last three, value (JSON) or stdout (a substring) is what a
// correct run shows. Programs get PORT, a loopback port a test listens on:
// no connection to it may arrive from a sandbox.
package guardcorpus

import (
	"embed"
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/codecell-dev/codecell/guard"
	"github.com/codecell-dev/codecell/lang"
)

//go:embed corpus
var files embed.FS

// Case is one program of the corpus.
type Case struct {
	Name     string          `json:"-"`
	Language string          `json:"-"`
	Code     string          `json:"-"`
	Policy   guard.Policy    `json:"policy"`
	Expect   string          `json:"expect"`
	Rule     string          `json:"rule"`
	At       [2]int          `json:"at"`
	Value    json.RawMessage `json:"value"`
	Stdout   string          `json:"stdout"`
	// Files are created in the workspace by a correct run.
	Files []string `json:"files"`
	// Layer names what stops it, for the documentation's table.
	Stops string `json:"stops"`
}

// Cases reads the corpus.
func Cases() ([]Case, error) {
	entries, err := files.ReadDir("corpus")
	if err != nil {
		return nil, err
	}
	var cases []Case
	for _, e := range entries {
		data, err := files.ReadFile(path.Join("corpus", e.Name()))
		if err != nil {
			return nil, err
		}
		c, err := parse(e.Name(), string(data))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name(), err)
		}
		cases = append(cases, c)
	}
	sort.Slice(cases, func(i, j int) bool { return cases[i].Name < cases[j].Name })
	return cases, nil
}

func parse(name, code string) (Case, error) {
	first, _, _ := strings.Cut(code, "\n")
	_, header, ok := strings.Cut(first, "guard:")
	if !ok {
		return Case{}, fmt.Errorf("the first line holds no guard: header")
	}
	var c Case
	dec := json.NewDecoder(strings.NewReader(header))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Case{}, err
	}
	l := lang.ForFile(name, code)
	if l == nil {
		return Case{}, fmt.Errorf("no language for %s", name)
	}
	c.Name, c.Language, c.Code = name, l.Name, code
	switch c.Expect {
	case "static":
		if c.Rule == "" || c.At[0] == 0 {
			return Case{}, fmt.Errorf("a static case names its rule and position")
		}
	case "runtime", "sandbox", "allowed":
		if c.Value == nil && c.Stdout == "" && c.Expect != "runtime" {
			return Case{}, fmt.Errorf("a %s case says what a correct run shows (value or stdout)", c.Expect)
		}
	default:
		return Case{}, fmt.Errorf("expect %q: one of static, runtime, sandbox, allowed", c.Expect)
	}
	if err := c.Policy.Check(); err != nil {
		return Case{}, err
	}
	return c, nil
}

// Table writes the corpus as a Markdown table: each program, its language,
// the policy it runs under, and what stops it.
func Table(cases []Case) string {
	var b strings.Builder
	b.WriteString("| program | language | policy | stopped by |\n| --- | --- | --- | --- |\n")
	for _, c := range cases {
		var policy []string
		if len(c.Policy.Block) > 0 {
			if len(c.Policy.Block) == len(guard.Categories) {
				policy = append(policy, "block all")
			} else {
				policy = append(policy, "block "+strings.Join(c.Policy.Block, ", "))
			}
		}
		if c.Policy.AllowedImports != nil {
			policy = append(policy, "allowed_imports "+strings.Join(c.Policy.AllowedImports, ", "))
		}
		if len(c.Policy.BlockedImports) > 0 {
			policy = append(policy, "blocked_imports "+strings.Join(c.Policy.BlockedImports, ", "))
		}
		if c.Policy.AllowedCommands != nil {
			policy = append(policy, "allowed_commands "+strings.Join(c.Policy.AllowedCommands, ", "))
		}
		var by string
		switch c.Expect {
		case "static":
			by = fmt.Sprintf("guardrails: `%s` at %d:%d", c.Rule, c.At[0], c.At[1])
		case "runtime":
			by = "import hook: `SANDBOX_MODULE_BLOCKED`"
			if c.Stops != "" {
				by = c.Stops
			}
		case "sandbox":
			by = "sandbox: " + c.Stops
		case "allowed":
			by = "nothing: it runs"
		}
		fmt.Fprintf(&b, "| [`%s`](../internal/guardcorpus/corpus/%s) | %s | %s | %s |\n", c.Name, c.Name, c.Language, strings.Join(policy, "; "), by)
	}
	return b.String()
}
