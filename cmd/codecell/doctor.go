package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/config"
	"github.com/codecell-dev/codecell/lang"
	"github.com/codecell-dev/codecell/tier/docker"
	"github.com/codecell-dev/codecell/tier/native"
)

// doctorReport is what `codecell doctor --json` prints.
type doctorReport struct {
	Host         string              `json:"host"`
	Root         bool                `json:"root"`
	Native       native.Report       `json:"native"`
	Sandbox      string              `json:"sandbox_check"` // a real run in the native tier
	Interpreters []interpreterReport `json:"interpreters"`
	Tiers        []tierReport        `json:"tiers"`
	Auto         string              `json:"auto"` // the tier auto picks, or why none
	// ShellTools says whether shell tool calls made at once are served at
	// once: codecell-tool's callers take turns reading answers under
	// flock(1), which must be there in the sandbox.
	ShellTools string       `json:"shell_tools,omitempty"`
	Docker     dockerReport `json:"docker"`
}

// dockerReport is the container engine the docker tier found.
type dockerReport struct {
	Host   string `json:"host,omitempty"`  // the engine's address, when one was found
	Engine string `json:"engine"`          // "podman 4.3.1", or why there is none
	Image  string `json:"image,omitempty"` // the image configured for programs
	Found  bool   `json:"found"`           // whether the engine answered
}

func inspectDocker(ctx context.Context) dockerReport {
	t := docker.Default
	var r dockerReport
	r.Host, _ = t.EngineHost()
	r.Image = t.Image
	if r.Image == "" {
		r.Image = os.Getenv("CODECELL_DOCKER_IMAGE")
	}
	rt, err := t.Runtime(ctx)
	if err != nil {
		r.Engine = err.Error()
		return r
	}
	r.Engine, r.Found = rt, true
	return r
}

// configureDocker sets the registered docker tier from the configuration
// file's docker section.
func configureDocker(d *config.Docker) {
	if d == nil {
		return
	}
	t := docker.Default
	t.Host, t.Image, t.Images, t.User, t.Tmp, t.Pool = d.Host, d.Image, d.Images, d.User, int64(d.Tmp), d.Pool
}

type interpreterReport struct {
	Language string `json:"language"`
	Path     string `json:"path"`
	Version  string `json:"version,omitempty"`
	Found    bool   `json:"found"`
	// Sandbox says whether a program in this language ran in the sandbox.
	Sandbox string `json:"sandbox,omitempty"`
}

type tierReport struct {
	Name      string `json:"name"`
	Isolating bool   `json:"isolating"`
	Available string `json:"available"` // "yes" or why not
}

// doctor prints what this host offers and which tier auto picks, checking
// the sandbox with real runs rather than trusting what the kernel says.
func (m *Main) doctor(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("codecell doctor", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	r := doctorReport{Root: os.Geteuid() == 0, Native: native.Default.Inspect()}
	var uts unix.Utsname
	if unix.Uname(&uts) == nil {
		r.Host = fmt.Sprintf("%s %s %s", unix.ByteSliceToString(uts.Sysname[:]), unix.ByteSliceToString(uts.Release[:]), runtime.GOARCH)
	}
	if r.Native.Namespaces == "" {
		r.Sandbox = m.check(ctx, "sh", "true\n")
		if strings.HasPrefix(r.Sandbox, "ok") {
			r.ShellTools = "served at once (flock is in the sandbox)"
			if strings.HasPrefix(m.check(ctx, "sh", "command -v flock\n"), "failed") {
				r.ShellTools = "one at a time: flock(1) is not in the sandbox; install util-linux"
			}
		}
		// A real run can find what the probe could not (a build of the
		// sandbox the host refuses): the tiers and auto below say it too.
		r.Native = native.Default.Inspect()
	}
	for _, name := range codecell.TierNames() {
		t, _ := codecell.LookupTier(name)
		tr := tierReport{Name: name, Isolating: t.Isolating(), Available: "yes"}
		if err := t.Probe(); err != nil {
			tr.Available = err.Error()
		}
		r.Tiers = append(r.Tiers, tr)
	}
	r.Docker = inspectDocker(ctx)
	auto, refusal := m.Engine.ResolveTier("auto")
	if refusal != nil {
		r.Auto = "none: " + refusal.Message
	} else {
		r.Auto = auto.Name()
	}
	for _, name := range lang.Names() {
		l := lang.Lookup(name)
		path := l.Interpreter
		if p := m.Engine.Interpreters[name]; p != "" {
			path = p
		}
		ir := interpreterReport{Language: name, Path: path}
		if info, err := os.Stat(path); err == nil && !info.IsDir() {
			ir.Found = true
			ir.Version = interpreterVersion(ctx, name, path)
			if r.Native.Namespaces == "" {
				ir.Sandbox = m.check(ctx, name, map[string]string{
					"python": "1 + 1\n", "javascript": "1 + 1\n", "typescript": "const x: number = 1\nx + 1\n",
					"bash": "echo ok\n", "sh": "echo ok\n",
				}[name])
			}
		}
		r.Interpreters = append(r.Interpreters, ir)
	}
	if *asJSON {
		m.printJSON(r)
		return 0
	}
	m.printDoctor(&r)
	return 0
}

// check runs a tiny program in the native tier and says how it went.
func (m *Main) check(ctx context.Context, language, code string) string {
	start := time.Now()
	res, err := m.Engine.Run(ctx, &codecell.Exec{Tier: native.Name, Language: language, Code: code,
		Limits: codecell.Limits{Timeout: 20 * time.Second}})
	switch {
	case err != nil:
		return "failed: " + err.Error()
	case res.Status != codecell.StatusSuccess:
		msg := string(res.Status)
		if res.Error != nil {
			msg += ": " + res.Error.Message
		}
		return "failed: " + msg
	}
	return fmt.Sprintf("ok (%d ms)", time.Since(start).Milliseconds())
}

func interpreterVersion(ctx context.Context, language, path string) string {
	if language == "sh" {
		return "" // dash has no --version
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").CombinedOutput()
	if err != nil {
		return ""
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return line
}

func (m *Main) printDoctor(r *doctorReport) {
	var b bytes.Buffer
	yes := func(problem string) string {
		if problem == "" {
			return "yes"
		}
		return "no: " + problem
	}
	fmt.Fprintf(&b, "host          %s, running as %s\n", r.Host, map[bool]string{true: "root", false: fmt.Sprintf("uid %d (rootless: sandboxes run as your uid)", os.Geteuid())}[r.Root])
	fmt.Fprintf(&b, "namespaces    %s (user, mount, pid, network, ipc, uts, cgroup)\n", yes(r.Native.Namespaces))
	if r.Sandbox != "" {
		fmt.Fprintf(&b, "sandbox       a real run in the native tier: %s\n", r.Sandbox)
	}
	seccomp := yes(r.Native.Seccomp)
	if r.Native.Seccomp == "" {
		seccomp += fmt.Sprintf(" (deny list of %d system calls)", r.Native.SeccompDenied)
	}
	fmt.Fprintf(&b, "seccomp       %s\n", seccomp)
	if r.Native.Landlock > 0 {
		fmt.Fprintf(&b, "landlock      yes, ABI %d\n", r.Native.Landlock)
	} else {
		fmt.Fprintf(&b, "landlock      no (the sandbox works without it)\n")
	}
	if r.Native.Cgroup > 0 {
		fmt.Fprintf(&b, "cgroups       v%d used for limits (controllers: %s)\n", r.Native.Cgroup, strings.Join(r.Native.CgroupControllers, ", "))
	} else {
		fmt.Fprintf(&b, "cgroups       none usable: limits fall back to rlimits\n")
	}
	if r.Native.CgroupReason != "" {
		fmt.Fprintf(&b, "              %s\n", r.Native.CgroupReason)
	}
	hybrid := false
	for _, mnt := range r.Native.CgroupMounts {
		fmt.Fprintf(&b, "              mounted: %s\n", mnt)
		hybrid = hybrid || strings.HasPrefix(mnt, "v1 memory")
	}
	if hybrid && r.Native.Cgroup == 1 {
		fmt.Fprintf(&b, "              (a hybrid host: the controllers are on v1, so v1 is used)\n")
	}
	fmt.Fprintf(&b, "interpreters\n")
	for _, ir := range r.Interpreters {
		status := "not found: install it, or configure its path"
		if ir.Found {
			parts := []string{}
			if ir.Version != "" {
				parts = append(parts, ir.Version)
			}
			if ir.Sandbox != "" {
				parts = append(parts, "in the sandbox: "+ir.Sandbox)
			}
			status = strings.Join(parts, "; ")
		}
		fmt.Fprintf(&b, "  %-11s %-18s %s\n", ir.Language, ir.Path, status)
	}
	fmt.Fprintf(&b, "tiers\n")
	for _, t := range r.Tiers {
		kind := "isolating"
		if !t.Isolating {
			kind = "no isolation: used only when asked for by name"
		}
		fmt.Fprintf(&b, "  %-11s %s (%s)\n", t.Name, t.Available, kind)
	}
	if r.Docker.Found {
		img := r.Docker.Image
		if img == "" {
			img = "none configured: set docker.image in the configuration"
		}
		fmt.Fprintf(&b, "docker        %s at %s (image: %s)\n", r.Docker.Engine, r.Docker.Host, img)
	} else {
		fmt.Fprintf(&b, "docker        no engine: %s\n", r.Docker.Engine)
	}
	fmt.Fprintf(&b, "auto picks    %s\n", r.Auto)
	if r.ShellTools != "" {
		fmt.Fprintf(&b, "shell tools   %s\n", r.ShellTools)
	}
	m.Stdout.Write(b.Bytes())
}
