//go:build linux

package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/api"
	"github.com/codecell-dev/codecell/client"
	"github.com/codecell-dev/codecell/mcp"
	"github.com/codecell-dev/codecell/server"
	"github.com/codecell-dev/codecell/tier/native"
)

// A sideProgram is one program of the side-by-side run, in each of its
// forms: for the library and the services, bare, and as a file.
type sideProgram struct {
	group, lang, code, want string
	bare                    []string
	ext                     string
}

// A sideCase runs one program and says whether it printed what it should.
type sideCase struct {
	group string // the baseline's name within the table: "python", "node", "sh"
	name  string
	run   func(ctx context.Context) error
}

// SideBySide runs the same small program bare, through the library,
// through the REST service and through the MCP server (and through
// go-judge when given), sequentially and with several clients at once, and
// prints each against the bare interpreter measured in the same run: the
// p50 of sequential runs, and the throughput at each concurrency.
func SideBySide(ctx context.Context, o SideOptions) error {
	if o.Runs < 1 || len(o.Clients) == 0 {
		return errors.New("runs and clients must be at least 1")
	}
	eng := o.Engine
	restURL, mcpURL, stop, err := serve(ctx, eng)
	if err != nil {
		return err
	}
	defer stop()
	rest := client.New(restURL, "")
	mcs, err := sdk.NewClient(&sdk.Implementation{Name: "codecell-bench", Version: "1"}, nil).Connect(ctx, &sdk.StreamableClientTransport{Endpoint: mcpURL}, nil)
	if err != nil {
		return fmt.Errorf("connecting to the MCP server: %w", err)
	}
	defer mcs.Close()

	programs := []sideProgram{
		{"python", "python", "print(1)", "1\n", []string{o.Python, "-c", "print(1)"}, ".py"},
		{"sh", "sh", "echo 1", "1\n", []string{o.Sh, "-c", "echo 1"}, ".sh"},
		{"node", "javascript", "console.log(1)", "1\n", []string{o.Node, "-e", "console.log(1)"}, ".js"},
	}
	dir, err := os.MkdirTemp("", "codecell-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var cases []sideCase
	for _, p := range programs {
		p := p
		cases = append(cases,
			sideCase{p.group, "bare: " + strings.Join(quoteArgs(p.bare), " "), func(ctx context.Context) error {
				cmd := exec.CommandContext(ctx, p.bare[0], p.bare[1:]...)
				cmd.Env, cmd.Dir = bareEnv(dir), dir
				out, err := cmd.Output()
				if err == nil && string(out) != p.want {
					err = fmt.Errorf("printed %q", out)
				}
				return err
			}},
			sideCase{p.group, "codecell library (Engine.Run)", func(ctx context.Context) error {
				res, err := eng.Run(ctx, &codecell.Exec{Tier: "native", Language: p.lang, Code: p.code})
				return checkResult(res, err, p.want)
			}},
			sideCase{p.group, "codecell REST (POST /v1/executions)", func(ctx context.Context) error {
				res, err := rest.Execute(ctx, "", api.Execution{Language: p.lang, Code: p.code})
				return checkResult(res, err, p.want)
			}},
			sideCase{p.group, "codecell MCP (execute)", func(ctx context.Context) error {
				r, err := mcs.CallTool(ctx, &sdk.CallToolParams{Name: "execute", Arguments: map[string]any{"language": p.lang, "code": p.code}})
				if err != nil {
					return err
				}
				var res codecell.Result
				b, _ := json.Marshal(r.StructuredContent)
				if err := json.Unmarshal(b, &res); err != nil {
					return err
				}
				return checkResult(&res, nil, p.want)
			}},
		)
		if o.Exe != "" {
			file := filepath.Join(dir, "hello"+p.ext)
			if err := os.WriteFile(file, []byte(p.code+"\n"), 0o644); err != nil {
				return err
			}
			cases = append(cases, sideCase{p.group, "codecell run " + filepath.Base(file) + " (one-shot CLI, a new process)", func(ctx context.Context) error {
				out, err := exec.CommandContext(ctx, o.Exe, "run", "--tier", "native", file).Output()
				if err == nil && string(out) != p.want {
					err = fmt.Errorf("printed %q", out)
				}
				return err
			}})
		}
		if o.GoJudge != "" {
			cases = append(cases, sideCase{p.group, "go-judge (POST /run)", goJudgeCase(o.GoJudge, p.bare, p.want)})
		}
	}

	// One warm-up run each.
	for _, c := range cases {
		if err := c.run(ctx); err != nil {
			return fmt.Errorf("%s, %s: %w", c.group, c.name, err)
		}
	}
	// Paced runs come one at a time, each once the native pool is full
	// again: the latency of a service whose requests come no faster than
	// its pool refills.
	settled := func() {}
	var nt *native.Tier
	if t, _ := eng.ResolveTier("native"); t != nil {
		nt, _ = t.(*native.Tier)
		if nt != nil {
			settled = func() {
				for i := 0; i < 5000 && !nt.Settled(); i++ {
					time.Sleep(time.Millisecond)
				}
			}
		}
	}
	type result struct {
		p50, paced time.Duration
		thr        []float64 // per concurrency
	}
	results := make([]result, len(cases))
	for i, c := range cases {
		results[i].thr = make([]float64, len(o.Clients))
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "\r\x1b[K%s: %s, paced (%d of %d)", c.group, c.name, i+1, len(cases))
		}
		paced := make([]time.Duration, 0, o.Runs)
		for range o.Runs {
			settled()
			t := time.Now()
			if err := c.run(ctx); err != nil {
				return fmt.Errorf("%s, %s: %w", c.group, c.name, err)
			}
			paced = append(paced, time.Since(t))
		}

		results[i].paced = percentile(paced, 50)
		for k, n := range o.Clients {
			if o.Progress != nil {
				fmt.Fprintf(o.Progress, "\r\x1b[K%s: %s, %d at once (%d of %d)", c.group, c.name, n, i+1, len(cases))
			}
			lat, wall, err := measure(ctx, c.run, o.Runs, n)
			if err != nil {
				return fmt.Errorf("%s, %s: %w", c.group, c.name, err)
			}
			if k == 0 {
				results[i].p50 = percentile(lat, 50)
			}
			results[i].thr[k] = float64(o.Runs) / wall.Seconds()
		}
	}
	if o.Progress != nil {
		fmt.Fprint(o.Progress, "\r\x1b[K")
	}
	w := tabwriter.NewWriter(o.Out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "program\tcase\tp50, paced\t÷ bare\tp50, %d at once\t÷ bare", o.Clients[0])
	for _, n := range o.Clients {
		fmt.Fprintf(w, "\tthroughput, %d at once\t÷ bare", n)
	}
	fmt.Fprint(w, "\t\n")
	base := map[string]int{}
	for i, c := range cases {
		if _, ok := base[c.group]; !ok {
			base[c.group] = i
		}
		b := results[base[c.group]]
		r := results[i]
		fmt.Fprintf(w, "%s\t%s\t%s\t%.2fx\t%s\t%.2fx", c.group, c.name, ms(r.paced), float64(r.paced)/float64(b.paced), ms(r.p50), float64(r.p50)/float64(b.p50))
		for k := range o.Clients {
			fmt.Fprintf(w, "\t%.0f/s\t%.2fx", r.thr[k], r.thr[k]/b.thr[k])
		}
		fmt.Fprint(w, "\t\n")
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if nt != nil {
		st := nt.Stats()
		servers := 0
		for _, n := range st.Templates {
			servers += n
		}
		fmt.Fprintf(o.Out, "\ncodecell's native tier: %d runs forked from a template interpreter, %d in a sandbox forked from a fork server that started their own program (%d servers), %d in an interpreter started before them in a pooled sandbox, %d in a sandbox built for them that started their own.",
			st.ForkRuns, st.ExecRuns, servers, st.WarmRuns, st.ColdRuns)
	}
	if o.Exe != "" {
		if o.Progress != nil {
			fmt.Fprint(o.Progress, "idle footprint of codecell serve")
		}
		f, err := idleFootprint(ctx, o.Exe, programs)
		if o.Progress != nil {
			fmt.Fprint(o.Progress, "\r\x1b[K")
		}
		if err != nil {
			return fmt.Errorf("idle footprint: %w", err)
		}
		fmt.Fprintf(o.Out, "\nIdle codecell serve, after three runs of each program: %s RSS, %s PSS; with its pool and fork servers (%d processes), %s PSS.",
			mib(f.rss), mib(f.pss), f.treeProcesses, mib(f.treePSS))
	}
	fmt.Fprintf(o.Out, "\n%d runs per case and concurrency, in one process on this machine; each ratio is against the bare interpreter of the same program, measured in the same run, in the environment codecell gives a program (PATH, HOME and LANG only). Paced: one run at a time, each once codecell's pool of ready sandboxes is full again; the other columns send the next run as soon as the last returns.\n", o.Runs)
	return nil
}

// bareEnv is the environment of a bare run: the one codecell gives a
// program (its PATH, HOME and LANG), not this process's. A variable such as
// NODE_EXTRA_CA_CERTS, which has node read and parse a bundle of
// certificates as it starts, would otherwise weigh on bare alone.
func bareEnv(home string) []string {
	return []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + home, "LANG=C.UTF-8"}
}

func checkResult(res *codecell.Result, err error, want string) error {
	if err != nil {
		return err
	}
	if res.Status != codecell.StatusSuccess || res.Stdout != want {
		return fmt.Errorf("%s", describeFailure(res))
	}
	return nil
}

// serve starts the REST service and the MCP server over HTTP on loopback,
// both on eng, as codecell serve does.
func serve(ctx context.Context, eng *codecell.Engine) (restURL, mcpURL string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", "", nil, err
	}
	rest := &server.Server{Engine: eng, MaxRunning: 64, Version: "bench"}
	// As codecell serve does: MCP calls take the REST API's slots.
	m := &mcp.Server{Engine: eng, Version: "bench", Admit: rest.Admit}
	mux := http.NewServeMux()
	mux.Handle("/mcp", m.HTTPHandler(ctx))
	mux.Handle("/", rest.Handler())
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	base := "http://" + ln.Addr().String()
	return base, base + "/mcp", func() { srv.Close() }, nil
}

// goJudgeCase runs argv through go-judge's /run, as its README shows.
func goJudgeCase(url string, argv []string, want string) func(context.Context) error {
	body, _ := json.Marshal(map[string]any{"cmd": []map[string]any{{
		"args":        argv,
		"env":         []string{"PATH=/usr/bin:/bin"},
		"files":       []map[string]any{{"content": ""}, {"name": "stdout", "max": 10240}, {"name": "stderr", "max": 10240}},
		"cpuLimit":    10_000_000_000,
		"memoryLimit": 512 << 20,
		"procLimit":   50,
	}}})
	endpoint := strings.TrimRight(url, "/") + "/run"
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, "POST", endpoint, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var out []struct {
			Status string            `json:"status"`
			Files  map[string]string `json:"files"`
			Error  string            `json:"error"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			return fmt.Errorf("go-judge answered %s: %w", resp.Status, err)
		}
		if len(out) != 1 || out[0].Status != "Accepted" || out[0].Files["stdout"] != want {
			return fmt.Errorf("go-judge: %+v", out)
		}
		return nil
	}
}

func quoteArgs(argv []string) []string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if strings.ContainsAny(a, " ()'") {
			a = "'" + a + "'"
		}
		out[i] = a
	}
	return out
}
