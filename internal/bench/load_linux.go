//go:build linux

package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/api"
	"github.com/codecell-dev/codecell/client"
	"github.com/codecell-dev/codecell/internal/proc"
	"github.com/codecell-dev/codecell/internal/spawnwatch"
	"github.com/codecell-dev/codecell/server"
	"github.com/codecell-dev/codecell/session"
	"github.com/codecell-dev/codecell/tier/native"
)

// LoadReport is what a load run measured.
type LoadReport struct {
	Executions, Sessions int
	Wall                 time.Duration
	Latencies            []time.Duration // accepted requests, from send to Result
	Refused              int             // 429s, retried after Retry-After
	Lost                 []string        // executions without their right Result
	Direct               time.Duration   // the same executions through Engine.Run, at MaxRunning at once
	DirectLatencies      []time.Duration
	Sandboxes            int      // sandboxes the run started, the pool's included
	Leftovers            []string // processes, cgroups and directories left after the server stopped
}

// Load runs the HTTP service on loopback with its own native tier and
// session store, sends it many executions at once, and then checks that
// nothing is left: no process, cgroup or directory of the run. base gives
// the interpreters and the init binary.
func Load(ctx context.Context, base *codecell.Engine, o LoadOptions) (*LoadReport, error) {
	if o.Executions < 1 || o.Clients < 1 || o.MaxRunning < 1 || o.SessionsPer < 1 {
		return nil, errors.New("every count must be at least 1")
	}
	return runLoad(ctx, base, o)
}

// OK reports whether every execution had its Result and nothing was left.
func (r *LoadReport) OK() bool { return len(r.Lost) == 0 && len(r.Leftovers) == 0 }

// Print writes the report.
func (r *LoadReport) Print(out io.Writer, o LoadOptions) { r.print(out, o) }

func (r *LoadReport) print(out io.Writer, o LoadOptions) {
	thr := float64(r.Executions) / r.Wall.Seconds()
	dthr := float64(r.Executions) / r.Direct.Seconds()
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "case\texecutions\twall\tthroughput\tp50\tp99\t\n")
	fmt.Fprintf(w, "Engine.Run, %d at once (baseline)\t%d\t%s\t%.1f/s\t%s\t%s\t\n", o.MaxRunning, r.Executions,
		r.Direct.Round(time.Millisecond), dthr, ms(percentile(r.DirectLatencies, 50)), ms(percentile(r.DirectLatencies, 99)))
	fmt.Fprintf(w, "HTTP, %d clients, %d running at most\t%d\t%s\t%.1f/s\t%s\t%s\t\n", o.Clients, o.MaxRunning, r.Executions,
		r.Wall.Round(time.Millisecond), thr, ms(percentile(r.Latencies, 50)), ms(percentile(r.Latencies, 99)))
	w.Flush()
	fmt.Fprintf(out, "\nthroughput ratio HTTP/baseline %.2fx; p50 ratio %.2fx; p99 ratio %.2fx\n", thr/dthr,
		float64(percentile(r.Latencies, 50))/float64(percentile(r.DirectLatencies, 50)),
		float64(percentile(r.Latencies, 99))/float64(percentile(r.DirectLatencies, 99)))
	fmt.Fprintf(out, "sessions %d; 429 answers %d (retried after Retry-After); lost results %d\n", r.Sessions, r.Refused, len(r.Lost))
	fmt.Fprintf(out, "sandboxes started %d; processes, cgroups and directory entries left after the server stopped: %d\n",
		r.Sandboxes, len(r.Leftovers))
	for _, l := range r.Lost {
		fmt.Fprintf(out, "  lost: %s\n", l)
	}
	for _, l := range r.Leftovers {
		fmt.Fprintf(out, "  left: %s\n", l)
	}
}

// runLoad is the load run. Its server has a native tier of its own (with a
// pool), closed at the end, so that what is left can be told from what
// other codecell processes on the host run.
func runLoad(ctx context.Context, base *codecell.Engine, o LoadOptions) (*LoadReport, error) {
	dir, err := os.MkdirTemp("", "codecell-load-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	// Every sandbox the run's tier starts is recorded: its init, and its
	// cgroup's directories. They must all be gone once the tier is closed.
	var spawnMu sync.Mutex
	var spawned []spawnedSandbox
	tier := &native.Tier{}
	defer spawnwatch.Watch(tier, func(pid int, dirs []string) {
		p, _ := proc.Stat(pid)
		spawnMu.Lock()
		spawned = append(spawned, spawnedSandbox{pid, p.Start, dirs})
		spawnMu.Unlock()
	})()
	if err := tier.Probe(); err != nil {
		return nil, fmt.Errorf("the native tier: %w", err)
	}
	eng := &codecell.Engine{Tier: "native", Interpreters: base.Interpreters, InitPath: base.InitPath,
		Tools: &codecell.Toolbox{}, TempDir: filepath.Join(dir, "tmp"), Tiers: []codecell.Tier{tier}}
	if err := os.Mkdir(eng.TempDir, 0o700); err != nil {
		return nil, err
	}
	store, err := session.NewStore(filepath.Join(dir, "sessions"), time.Hour, o.Clients+1)
	if err != nil {
		return nil, err
	}
	const token = "load-token"
	srv := &server.Server{Engine: eng, Sessions: store, Tokens: []server.Token{{Token: token, Principal: session.Principal{Name: "bench"}}}, MaxRunning: o.MaxRunning}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	hs := &http.Server{Handler: srv.Handler()}
	go hs.Serve(ln)
	c := client.New("http://"+ln.Addr().String(), token)
	c.HTTP = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: o.Clients}}
	rep := &LoadReport{Executions: o.Executions}
	// The program: its value is computed from its input, and a file it
	// writes carries it too, so that a Result mixed up with another's is
	// seen.
	code := func(i int) string {
		return fmt.Sprintf("import os\nn = %d\nopen('out-%d.txt', 'w').write(str(n * 7))\n{'n': n, 'seven': n * 7, 'files': len(os.listdir('.'))}", i, i)
	}
	// files is how many files the workspace holds after the program: its
	// own, and those of the session's earlier executions.
	check := func(i, files int, res *codecell.Result) string {
		want := fmt.Sprintf(`{"n":%d,"seven":%d,"files":%d}`, i, i*7, files)
		if res.Status != codecell.StatusSuccess || string(res.Value) != want {
			return fmt.Sprintf("execution %d: %s %s %s", i, res.Status, res.Value, tailLines(res.Stderr))
		}
		return ""
	}

	// Warm-up, untimed: the page cache, the interpreter's files and the
	// pool are as a running service has them, for both cases alike.
	var wg sync.WaitGroup
	for w := 0; w < o.MaxRunning; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < 3; k++ {
				_, _ = eng.Run(ctx, &codecell.Exec{Language: "python", Code: code(0)})
			}
		}()
	}
	wg.Wait()

	// Baseline: the engine alone, as many at once as the server runs.
	jobs := make(chan int)
	var mu sync.Mutex
	start := time.Now()
	for w := 0; w < o.MaxRunning; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				t0 := time.Now()
				res, err := eng.Run(ctx, &codecell.Exec{Language: "python", Code: code(i)})
				d := time.Since(t0)
				mu.Lock()
				rep.DirectLatencies = append(rep.DirectLatencies, d)
				if err != nil {
					rep.Lost = append(rep.Lost, fmt.Sprintf("baseline %d: %v", i, err))
				} else if msg := check(i, 1, res); msg != "" {
					rep.Lost = append(rep.Lost, "baseline "+msg)
				}
				mu.Unlock()
			}
		}()
	}
	for i := 0; i < o.Executions; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	rep.Direct = time.Since(start)

	// Over HTTP: clients at once, half of them in sessions that each take
	// SessionsPer executions, retrying 429s after Retry-After.
	jobs = make(chan int)
	start = time.Now()
	for w := 0; w < o.Clients; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			var ses string
			used := 0
			for i := range jobs {
				if w%2 == 1 && (ses == "" || used == o.SessionsPer) {
					if ses != "" {
						_ = c.DeleteSession(ctx, ses)
					}
					s, err := c.CreateSession(ctx, api.SessionSpec{})
					if err != nil {
						mu.Lock()
						rep.Lost = append(rep.Lost, fmt.Sprintf("execution %d: creating a session: %v", i, err))
						mu.Unlock()
						continue
					}
					ses, used = s.ID, 0
					mu.Lock()
					rep.Sessions++
					mu.Unlock()
				}
				used++
				files := 1
				if ses != "" {
					files = used
				}
				for {
					t0 := time.Now()
					res, err := c.Execute(ctx, ses, api.Execution{Language: "python", Code: code(i)})
					d := time.Since(t0)
					var e *client.Error
					if errors.As(err, &e) && e.Status == http.StatusTooManyRequests {
						mu.Lock()
						rep.Refused++
						mu.Unlock()
						time.Sleep(min(e.RetryAfter, time.Second) / 4 * time.Duration(1+w%4))
						continue
					}
					mu.Lock()
					rep.Latencies = append(rep.Latencies, d)
					if err != nil {
						rep.Lost = append(rep.Lost, fmt.Sprintf("execution %d: %v", i, err))
					} else if msg := check(i, files, res); msg != "" {
						rep.Lost = append(rep.Lost, msg)
					}
					mu.Unlock()
					break
				}
			}
			if ses != "" {
				_ = c.DeleteSession(ctx, ses)
			}
		}(w)
	}
	for i := 0; i < o.Executions; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	rep.Wall = time.Since(start)

	// Stop everything, then look for what is left.
	shut, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_ = hs.Shutdown(shut)
	store.Close()
	tier.Close()
	spawnMu.Lock()
	defer spawnMu.Unlock()
	rep.Sandboxes = len(spawned)
	rep.Leftovers = leftovers(dir, spawned)
	return rep, nil
}

// spawnedSandbox is a sandbox the run started: its init and its cgroup.
type spawnedSandbox struct {
	pid        int
	start      uint64 // the init's start time, which tells it from a later process with its pid
	cgroupDirs []string
}

// leftovers lists what the run left: sandbox inits still alive, cgroup
// directories still there, and files in the run's directories. Processes
// and cgroups go away asynchronously after a kill: they get five seconds.
func leftovers(dir string, spawned []spawnedSandbox) []string {
	deadline := time.Now().Add(5 * time.Second)
	for {
		var out []string
		for _, sb := range spawned {
			if p, ok := proc.Stat(sb.pid); ok && !p.Dead() && p.Start == sb.start {
				out = append(out, "process "+strconv.Itoa(sb.pid)+" "+proc.Cmdline(sb.pid))
			}
			for _, d := range sb.cgroupDirs {
				if _, err := os.Stat(d); err == nil {
					out = append(out, "cgroup "+d)
				}
			}
		}
		for _, sub := range []string{"tmp", "sessions"} {
			entries, _ := os.ReadDir(filepath.Join(dir, sub))
			for _, e := range entries {
				out = append(out, "directory entry "+filepath.Join(dir, sub, e.Name()))
			}
		}
		if len(out) == 0 || time.Now().After(deadline) {
			return out
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func tailLines(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-3):], " | ")
}
