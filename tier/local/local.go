//go:build linux

// Package local is the tier that does not isolate: the program runs as a
// plain subprocess of codecell, as the same user, with the host's files and
// network. It is for trusted code and for hosts with nothing better, only by
// explicit choice (tier "local"); every Result it gives carries a warning.
//
// What it does guarantee: the program runs in its workspace with a minimal
// environment, its memory is bounded by an rlimit, and when it ends or times
// out nothing it started survives — a supervisor, re-executed from the
// codecell binary, is the child subreaper of the program's whole process
// tree and kills all of it.
package local

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/codecell-dev/codecell"
)

// Name is the tier's registered name.
const Name = "local"

func init() {
	codecell.RegisterTier(Tier{})
	codecell.RegisterInitStage(Name, supervise)
}

// Tier runs programs as plain subprocesses.
type Tier struct{}

func (Tier) Name() string    { return Name }
func (Tier) Isolating() bool { return false }
func (Tier) Probe() error    { return nil }
func (Tier) NeedsInit() bool { return true }

// View: the program sees the host's paths.
func (Tier) View(workspace, runner string) codecell.View {
	return codecell.View{Workspace: workspace, Runner: runner}
}

// spec is what the host tells the supervisor.
type spec struct {
	Argv    []string `json:"argv"`
	Env     []string `json:"env"`
	Dir     string   `json:"dir"`
	Files   int      `json:"files"` // descriptors 0..Files-1 pass to the program
	Memory  int64    `json:"memory"`
	MaxFile int64    `json:"max_file"`
}

// report is what the supervisor tells the host when the program has ended
// and nothing it started is left.
type report struct {
	ExitCode int    `json:"exit_code"`
	Signal   int    `json:"signal"`
	Error    string `json:"error,omitempty"`
}

// Run starts the supervisor, hands it the program, and waits.
func (Tier) Run(ctx context.Context, job *codecell.Job) (*codecell.Outcome, error) {
	if job.InitPath == "" {
		return nil, errors.New("the local tier re-executes codecell as its supervisor: call codecell.Init() first thing in main, or set Engine.InitPath to an installed codecell binary")
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	host := os.NewFile(uintptr(fds[0]), "control")
	shim := os.NewFile(uintptr(fds[1]), "control")
	defer host.Close()

	controlFD := 3 + len(job.ExtraFiles)
	cmd := exec.Command(job.InitPath, Name, strconv.Itoa(controlFD))
	cmd.Args[0] = codecell.InitArg0
	cmd.Dir = job.Workspace
	cmd.Env = []string{}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = job.Stdin, job.Stdout, job.Stderr
	cmd.ExtraFiles = append(append([]*os.File{}, job.ExtraFiles...), shim)
	// A session of its own, so that a kill of the group is a last resort
	// that reaches the supervisor and what did not leave the group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.WaitDelay = 2 * time.Second
	err = cmd.Start()
	shim.Close()
	if err != nil {
		return nil, fmt.Errorf("starting the supervisor: %w", err)
	}
	s := spec{
		Argv:    job.Argv,
		Env:     job.Env,
		Dir:     job.Workspace,
		Files:   controlFD,
		Memory:  job.Limits.Memory,
		MaxFile: job.Limits.Workspace,
	}
	if err := json.NewEncoder(host).Encode(s); err != nil {
		killGroup(cmd)
		_ = cmd.Wait()
		return nil, fmt.Errorf("instructing the supervisor: %w", err)
	}

	reports := make(chan report, 1)
	go func() {
		var r report
		line, err := bufio.NewReader(host).ReadBytes('\n')
		if err == nil {
			err = json.Unmarshal(line, &r)
		}
		if err != nil {
			r.Error = "the supervisor ended without a report"
			r.ExitCode = -2
		}
		reports <- r
	}()

	out := &codecell.Outcome{Isolation: isolation(job)}
	var r report
	select {
	case r = <-reports:
	case <-ctx.Done():
		out.Stopped = true
		_, _ = host.Write([]byte("kill\n"))
		select {
		case r = <-reports:
		case <-time.After(5 * time.Second):
			killGroup(cmd)
			r = report{ExitCode: -1, Signal: int(syscall.SIGKILL)}
		}
	}
	werr := cmd.Wait()
	if r.Error != "" {
		if !out.Stopped {
			return nil, fmt.Errorf("supervisor: %s (%v)", r.Error, werr)
		}
	}
	out.ExitCode, out.Signal = r.ExitCode, r.Signal
	out.Warnings = []string{fmt.Sprintf("tier local does not isolate: the program ran as %s with the host's files, processes and network", whoami())}
	if job.Limits.CPU > 0 {
		out.Warnings = append(out.Warnings, "tier local does not enforce the CPU limit")
	}
	return out, nil
}

func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

func isolation(job *codecell.Job) codecell.Isolation {
	return codecell.Isolation{
		Level:   "none",
		User:    whoami() + ", the same as codecell",
		Network: "host (not confined)",
		Limits: codecell.LimitsApplied{
			Timeout:   "wall clock; the whole process tree is killed",
			Memory:    "rlimit RLIMIT_DATA " + strconv.FormatInt(job.Limits.Memory>>20, 10) + " MiB",
			Processes: "not enforced",
			CPU:       cpuNote(job.Limits.CPU),
			Workspace: "rlimit RLIMIT_FSIZE (per file, not in total)",
			Output:    "capped by codecell",
		},
	}
}

func cpuNote(cores float64) string {
	if cores == 0 {
		return "no limit asked for"
	}
	return "not enforced"
}

// whoami names the user by uid: looking the name up would link cgo into
// every binary that imports this tier, and the native sandbox's init needs a
// binary without it to confine all of its threads at once.
func whoami() string {
	return "uid " + strconv.Itoa(os.Getuid())
}
