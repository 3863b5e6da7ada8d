//go:build linux

package docker_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/tier/docker"
	"github.com/codecell-dev/codecell/tiertest"
)

// The tests run against a real engine: DOCKER_HOST or a default socket
// when one answers, else Podman's service, which TestMain starts on a
// socket of its own (and stops), when podman is installed. The image is
// scripts/docker-image's, built once and kept by the engine. Without an
// engine the tests skip, unless CODECELL_REQUIRE_DOCKER=1.

var (
	engineHost string // "" when there is none
	imageName  string
	noEngine   string // why there is none
)

func TestMain(m *testing.M) {
	// The test binary is re-executed as the container's first process.
	codecell.Init()
	flag.Parse()
	stop := func() {}
	if f := flag.Lookup("test.fuzz"); f == nil || f.Value.String() == "" {
		// Fuzzing needs no engine: its workers would each start one.
		stop = setUp()
	} else {
		noEngine = "fuzzing: no engine started"
	}
	code := m.Run()
	stop()
	os.Exit(code)
}

func setUp() (stop func()) {
	stop = func() {}
	t := &docker.Tier{}
	if h, ok := t.EngineHost(); ok {
		t.Host = h
		if t.Probe() == nil {
			engineHost = h
		}
	}
	if engineHost == "" {
		podman, err := exec.LookPath("podman")
		if err != nil {
			noEngine = "no container engine answers and podman is not installed (apt-get install podman runc)"
			return stop
		}
		dir, err := os.MkdirTemp("", "codecell-podman-")
		if err != nil {
			noEngine = err.Error()
			return stop
		}
		sock := filepath.Join(dir, "podman.sock")
		cmd := exec.Command(podman, "system", "service", "--time=0", "unix://"+sock)
		// conmon writes a file named "oom" in its working directory when
		// a container's program is killed for memory: the service's own
		// temporary directory, not this package's.
		cmd.Dir = dir
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		// The service ends with this process, even one killed before it
		// could stop it.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
		if err := cmd.Start(); err != nil {
			noEngine = "starting podman's service: " + err.Error()
			os.RemoveAll(dir)
			return stop
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		stop = func() {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-exited
			}
			os.RemoveAll(dir)
		}
		// The service answers once it listens: each try is a connection
		// refused at once, or the answer.
		deadline := time.Now().Add(30 * time.Second)
		for {
			c, err := net.Dial("unix", sock)
			if err == nil {
				c.Close()
				break
			}
			select {
			case <-exited:
				noEngine = "podman's service ended: " + stderr.String()
				return stop
			case <-time.After(20 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				noEngine = "podman's service did not listen within 30s: " + stderr.String()
				return stop
			}
		}
		engineHost = "unix://" + sock
		os.Setenv("DOCKER_HOST", engineHost)
	}
	script, err := filepath.Abs("../../scripts/docker-image")
	if err != nil {
		noEngine = err.Error()
		return stop
	}
	out, err := exec.Command(script).Output()
	if err != nil {
		msg := err.Error()
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		noEngine = "building the test image: " + msg
		engineHost = ""
		return stop
	}
	imageName = strings.TrimSpace(string(out))
	return stop
}

// requireEngine skips the test when no engine is there, or fails it when
// CODECELL_REQUIRE_DOCKER=1.
func requireEngine(t *testing.T) {
	t.Helper()
	if engineHost != "" {
		return
	}
	if os.Getenv("CODECELL_REQUIRE_DOCKER") == "1" {
		t.Fatalf("CODECELL_REQUIRE_DOCKER=1, but: %s", noEngine)
	}
	t.Skip(noEngine)
}

func newTier(t *testing.T) *docker.Tier {
	requireEngine(t)
	tier := &docker.Tier{Host: engineHost, Image: imageName}
	t.Cleanup(func() { tier.Close() })
	return tier
}

func run(t *testing.T, tier *docker.Tier, x codecell.Exec) *codecell.Result {
	t.Helper()
	x.Tier = docker.Name
	eng := &codecell.Engine{Tiers: []codecell.Tier{tier}}
	res, err := eng.Run(context.Background(), &x)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}

func TestHello(t *testing.T) {
	tier := newTier(t)
	res := run(t, tier, codecell.Exec{Language: "python", Code: "import os\nprint('hi', os.getuid())\nopen('out.txt','w').write('x')\n6*7\n"})
	if res.Status != codecell.StatusSuccess || res.Stdout != "hi 65534\n" || string(res.Value) != "42" {
		t.Fatalf("got %s, stdout %q, value %s, stderr %q, error %+v", res.Status, res.Stdout, res.Value, res.Stderr, res.Error)
	}
	if len(res.Files) != 1 || res.Files[0].Path != "out.txt" {
		t.Errorf("files = %+v, warnings %q", res.Files, res.Warnings)
	}
	if !strings.HasPrefix(res.Isolation.Engine, "podman ") && !strings.HasPrefix(res.Isolation.Engine, "docker ") {
		t.Errorf("isolation.engine = %q", res.Isolation.Engine)
	}
	fmt.Println(res.Isolation.Engine)
}

// TestConformance holds the tier to the suite every tier passes.
func TestConformance(t *testing.T) {
	tier := newTier(t)
	tiertest.Run(t, tier, tiertest.Capabilities{Isolating: true, Processes: true, CPU: true})
}

// TestRefusesNetworkPolicy: the tier cannot let a program reach some hosts
// and not others, and says so rather than running without the policy.
func TestRefusesNetworkPolicy(t *testing.T) {
	tier := newTier(t)
	res := run(t, tier, codecell.Exec{Language: "python", Code: "1\n",
		Policy: codecell.Policy{Network: &codecell.NetworkPolicy{Allow: []string{"example.com"}}}})
	if res.Status != codecell.StatusBlocked || res.Error == nil || res.Error.Code != codecell.CodePolicyUnsupported ||
		!strings.Contains(res.Error.Message, "tier docker") {
		t.Fatalf("got %s, error %+v", res.Status, res.Error)
	}
}

// TestRefusesLiveSessions: a live session's interpreter is not kept in a
// container; the refusal names the tier.
func TestRefusesLiveSessions(t *testing.T) {
	tier := newTier(t)
	eng := &codecell.Engine{Tiers: []codecell.Tier{tier}}
	live := eng.NewLive()
	defer live.Close()
	res, err := eng.Run(context.Background(), &codecell.Exec{Tier: docker.Name, Language: "python", Code: "x = 1\n", Live: live})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != codecell.StatusBlocked || res.Error == nil || res.Error.Code != codecell.CodeTierUnavailable ||
		!strings.Contains(res.Error.Message, "tier docker cannot keep an interpreter") {
		t.Fatalf("got %s, error %+v", res.Status, res.Error)
	}
}

// TestRefusesWithoutImage: with no image configured, the run is refused
// with what to set.
func TestRefusesWithoutImage(t *testing.T) {
	requireEngine(t)
	t.Setenv("CODECELL_DOCKER_IMAGE", "")
	tier := &docker.Tier{Host: engineHost}
	defer tier.Close()
	res := run(t, tier, codecell.Exec{Language: "python", Code: "1\n"})
	if res.Status != codecell.StatusBlocked || res.Error == nil || !strings.Contains(res.Error.Message, "no image for python") {
		t.Fatalf("got %s, error %+v", res.Status, res.Error)
	}
}

// TestRefusesRoot: the tier does not run programs as root.
func TestRefusesRoot(t *testing.T) {
	requireEngine(t)
	tier := &docker.Tier{Host: engineHost, Image: imageName, User: "0:0"}
	defer tier.Close()
	res := run(t, tier, codecell.Exec{Language: "python", Code: "1\n"})
	if res.Status == codecell.StatusSuccess || res.Error == nil || !strings.Contains(res.Error.Message, "root") {
		t.Fatalf("got %s, error %+v", res.Status, res.Error)
	}
}

// TestPool: after a first run, the next one with the same settings runs
// in a container started before it, which ran nothing else; closing the
// tier removes the ready ones.
func TestPool(t *testing.T) {
	requireEngine(t)
	tier := &docker.Tier{Host: engineHost, Image: imageName, Pool: 1}
	code := "import os\nprint(sorted(os.listdir('.')), os.environ.get('MARK'))\nopen('mine', 'w').write('x')\n"
	var engines []string
	for i, mark := range []string{"first", "second", "third"} {
		ws := t.TempDir()
		if err := os.WriteFile(filepath.Join(ws, "in-"+mark), []byte(mark), 0o644); err != nil {
			t.Fatal(err)
		}
		res := run(t, tier, codecell.Exec{Language: "python", Code: code, Workspace: ws, Env: map[string]string{"MARK": mark}})
		want := fmt.Sprintf("['in-%s'] %s\n", mark, mark)
		if res.Status != codecell.StatusSuccess || res.Stdout != want {
			t.Fatalf("run %d: got %s, stdout %q, want %q; stderr %q", i, res.Status, res.Stdout, want, res.Stderr)
		}
		if b, err := os.ReadFile(filepath.Join(ws, "mine")); err != nil || string(b) != "x" {
			t.Errorf("run %d: the file did not come back: %q, %v", i, b, err)
		}
		engines = append(engines, res.Isolation.Engine)
		// The next run finds the container the pool readied.
		waitReady(t, tier)
	}
	if strings.Contains(engines[0], "ready pool") || !strings.Contains(engines[1], "ready pool") || !strings.Contains(engines[2], "ready pool") {
		t.Errorf("isolation.engine: %q", engines)
	}
	tier.Close()
	lister := &docker.Tier{Host: engineHost}
	defer lister.Close()
	if ids, err := lister.Containers(context.Background()); err != nil || len(ids) != 0 {
		t.Errorf("after Close: containers %v, %v", ids, err)
	}
}

// waitReady waits until the tier has a container ready.
func waitReady(t *testing.T, tier *docker.Tier) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for tier.PoolReady() < 1 {
		if time.Now().After(deadline) {
			t.Fatal("no container became ready within 60s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	ids, err := tier.Containers(context.Background())
	if err != nil || len(ids) != 1 {
		t.Fatalf("containers %v, %v; want the ready one alone", ids, err)
	}
}

// TestTimeoutKeepsWorkspace: a program stopped at its timeout leaves what
// it wrote before: the launcher ends it and the workspace is read back
// while the container runs.
func TestTimeoutKeepsWorkspace(t *testing.T) {
	tier := newTier(t)
	ws := t.TempDir()
	res := run(t, tier, codecell.Exec{Language: "sh", Code: "echo done > out.txt\necho up\nsleep 60\n", Workspace: ws,
		Limits: codecell.Limits{Timeout: 2 * time.Second}})
	if res.Status != codecell.StatusTimeout || res.Stdout != "up\n" {
		t.Fatalf("got %s, stdout %q", res.Status, res.Stdout)
	}
	if len(res.Files) != 1 || res.Files[0].Path != "out.txt" {
		t.Errorf("files %+v, warnings %q", res.Files, res.Warnings)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "out.txt")); err != nil || string(b) != "done\n" {
		t.Errorf("out.txt = %q, %v", b, err)
	}
}
