//go:build linux

package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/codecell-dev/codecell/internal/proc"
)

// footprint is what an idle codecell serve holds in memory: its own
// process, and with it the processes of its pool and fork servers.
type footprint struct {
	rss, pss      int64 // the serve process's, in bytes
	treePSS       int64 // the serve process and every process under it
	treeProcesses int
}

// idleFootprint starts exe serve on a free loopback port, has it run each
// program a few times through REST so that its pool and fork servers fill
// for them, waits until nothing under it changes, and measures it.
func idleFootprint(ctx context.Context, exe string, programs []sideProgram) (*footprint, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	// Its own configuration and state, empty: the defaults, no token.
	dir, err := os.MkdirTemp("", "codecell-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	config := filepath.Join(dir, "codecell.json")
	if err := os.WriteFile(config, []byte("{}\n"), 0o600); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "serve", "--addr", addr, "--config", config, "--state", filepath.Join(dir, "state"))
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	cmd.Env = append(os.Environ(), "CODECELL_TOKENS=")
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	}()
	base := "http://" + addr
	up := false
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if resp, err := http.Get(base + "/healthz"); err == nil {
			resp.Body.Close()
			up = resp.StatusCode == http.StatusOK
			break
		}
	}
	if !up {
		return nil, errors.New("codecell serve did not answer /healthz within 30 s")
	}
	for range 3 {
		for _, p := range programs {
			body, _ := json.Marshal(map[string]string{"language": p.lang, "code": p.code})
			resp, err := http.Post(base+"/v1/executions", "application/json", bytes.NewReader(body))
			if err != nil {
				return nil, err
			}
			var res struct {
				Stdout string `json:"stdout"`
			}
			err = json.NewDecoder(resp.Body).Decode(&res)
			resp.Body.Close()
			if err != nil || res.Stdout != p.want {
				return nil, fmt.Errorf("codecell serve ran %s and printed %q (%v)", p.lang, res.Stdout, err)
			}
		}
	}
	// Idle: the same processes, holding the same memory within 1%, for a
	// second on end (the pool refills and fork servers prepare their
	// spares in the background).
	var last footprint
	var lastPids []int
	stable := 0
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && stable < 4; time.Sleep(250 * time.Millisecond) {
		pids := processTree(cmd.Process.Pid)
		f := footprint{treeProcesses: len(pids)}
		for _, pid := range pids {
			rss, pss := smapsRollup(pid)
			f.treePSS += pss
			if pid == cmd.Process.Pid {
				f.rss, f.pss = rss, pss
			}
		}
		diff := f.treePSS - last.treePSS
		if slices.Equal(pids, lastPids) && diff*100 <= last.treePSS && -diff*100 <= last.treePSS {
			stable++
		} else {
			stable = 0
		}
		last, lastPids = f, pids
	}
	return &last, nil
}

// processTree lists pid and every process under it, sorted.
func processTree(pid int) []int {
	out := []int{pid}
	for _, p := range proc.Descendants(pid) {
		out = append(out, p.PID)
	}
	slices.Sort(out)
	return out
}

// smapsRollup returns a process's resident and proportional set sizes, in
// bytes; zeros when it cannot be read.
func smapsRollup(pid int) (rss, pss int64) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		name, rest, ok := strings.Cut(s.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			continue
		}
		switch name {
		case "Rss":
			rss = kb << 10
		case "Pss":
			pss = kb << 10
		}
	}
	return rss, pss
}

// mib formats bytes as MiB.
func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
