package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codecell-dev/codecell"
)

// On a host that cannot create namespaces although its sysctls say it can
// (here: a user namespace whose limit is 0, behind a stand-in sysctl file
// that says 15000), auto refuses the run, blocked, naming the cause and
// codecell doctor, and doctor says the same; neither a retryable
// sandbox_error nor a "yes".
func TestHostThatCannotIsolate(t *testing.T) {
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("needs unshare (util-linux)")
	}
	if err := exec.Command(unshare, "-Urm", "true").Run(); err != nil {
		t.Skipf("cannot make a user namespace here to stage the host in: %v", err)
	}
	dir := t.TempDir()
	fake := filepath.Join(dir, "max_user_namespaces")
	if err := os.WriteFile(fake, []byte("15000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	prog := writeFile(t, "p.py", "print(1)\n")
	inHost := func(args ...string) (string, int) {
		// The limit and the stand-in hold only in the namespaces unshare
		// makes: the machine's own stay as they are.
		script := `echo 0 > /proc/sys/user/max_user_namespaces && mount --bind "$0" /proc/sys/user/max_user_namespaces && exec "$@"`
		return cliUnder(t, []string{unshare, "-Urm", "sh", "-c", script, fake}, args...)
	}
	out, code := inHost("run", "--json", prog)
	var res codecell.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("no Result (exit %d): %v\n%s", code, err, out)
	}
	if code != exitBlocked || res.Status != codecell.StatusBlocked || res.Error == nil || res.Error.Code != codecell.CodeNoIsolation ||
		res.Error.Retryable || !strings.Contains(res.Error.Message, "user namespaces") || !strings.Contains(strings.Join(res.Error.Hints, " "), "codecell doctor") {
		t.Fatalf("exit %d, status %s, error %+v", code, res.Status, res.Error)
	}
	out, _ = inHost("doctor")
	if !strings.Contains(out, "auto picks    none") || !strings.Contains(out, "user namespaces") {
		t.Fatalf("doctor does not agree:\n%s", out)
	}
}

// A workspace larger than the run's workspace limit is the caller's to
// change: blocked, not retryable, with what to do.
func TestWorkspaceOverItsLimit(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "big.bin"), bytes.Repeat([]byte("x"), 3<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := writeFile(t, "codecell.json", `{"limits": {"workspace": "1M"}}`)
	exit, stdout, stderr := cli(t, "", "run", "--json", "--tier", "native", "--config", cfg, "--workspace", ws, writeFile(t, "p.py", "print(1)\n"))
	var res codecell.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("exit %d: %v\n%s%s", exit, err, stdout, stderr)
	}
	if exit != exitBlocked || res.Status != codecell.StatusBlocked || res.Error == nil || res.Error.Code != codecell.CodeWorkspaceTooLarge || res.Error.Retryable {
		t.Fatalf("exit %d, status %s, error %+v", exit, res.Status, res.Error)
	}
}

// codecell as root of a user namespace that maps uid 0 alone (a rootless
// container): the sandbox's users cannot be mapped there, so auto refuses
// the run, blocked, saying why and what to do, and doctor agrees, instead
// of a yes and then a retryable sandbox_error at every run.
func TestRootOfANarrowUserNamespace(t *testing.T) {
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("needs unshare (util-linux)")
	}
	if err := exec.Command(unshare, "-Ur", "true").Run(); err != nil {
		t.Skipf("cannot make a user namespace here to stage the host in: %v", err)
	}
	prog := writeFile(t, "p.py", "print(1)\n")
	inHost := func(args ...string) (string, int) {
		return cliUnder(t, []string{unshare, "-Ur"}, args...)
	}
	out, code := inHost("run", "--json", prog)
	var res codecell.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("no Result (exit %d): %v\n%s", code, err, out)
	}
	if code != exitBlocked || res.Status != codecell.StatusBlocked || res.Error == nil || res.Error.Code != codecell.CodeNoIsolation || res.Error.Retryable ||
		!strings.Contains(res.Error.Message, "run codecell as an ordinary user there") || !strings.Contains(strings.Join(res.Error.Hints, " "), "codecell doctor") {
		t.Fatalf("exit %d, status %s, error %+v", code, res.Status, res.Error)
	}
	out, _ = inHost("doctor")
	if !strings.Contains(out, "auto picks    none") || !strings.Contains(out, "root of a user namespace") {
		t.Fatalf("doctor does not agree:\n%s", out)
	}
}

// A host whose /proc has a file masked by a mount (as a container engine
// masks /proc/kcore or /proc/timer_list) lets codecell make namespaces but
// not mount the sandbox's own /proc. The first run finds it: blocked, not
// retryable, naming the cause and codecell doctor; doctor's real run finds
// it too, and auto then picks none, instead of a yes beside runs that fail
// as retryable sandbox_errors.
func TestHostThatMasksProc(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("staging a host with a masked /proc needs root (a mount namespace of its own)")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("needs unshare (util-linux)")
	}
	masked := ""
	for _, f := range []string{"/proc/timer_list", "/proc/sched_debug", "/proc/keys", "/proc/kcore"} {
		if _, err := os.Stat(f); err == nil {
			masked = f
			break
		}
	}
	if masked == "" {
		t.Skip("no file of /proc to mask here")
	}
	prog := writeFile(t, "p.py", "print(1)\n")
	inHost := func(args ...string) (string, int) {
		// The mask holds in the mount namespace unshare makes only.
		return cliUnder(t, []string{unshare, "-m", "sh", "-c", `mount --bind /dev/null "$0" && exec "$@"`, masked}, args...)
	}
	out, code := inHost("run", "--json", prog)
	var res codecell.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("no Result (exit %d): %v\n%s", code, err, out)
	}
	if res.Status == codecell.StatusSuccess {
		t.Skipf("this kernel mounts a new /proc over a masked one: %s", out)
	}
	// The run finds it when its sandbox is built: the one-shot CLI builds
	// it as it starts, before auto picks, which then picks none.
	if code != exitBlocked || res.Status != codecell.StatusBlocked || res.Error == nil ||
		(res.Error.Code != codecell.CodeTierUnavailable && res.Error.Code != codecell.CodeNoIsolation) ||
		res.Error.Retryable || !strings.Contains(res.Error.Message, "mounting /proc") || !strings.Contains(strings.Join(res.Error.Hints, " "), "codecell doctor") {
		t.Fatalf("exit %d, status %s, error %+v", code, res.Status, res.Error)
	}
	out, _ = inHost("doctor")
	if !strings.Contains(out, "auto picks    none") || !strings.Contains(out, "mounting /proc") || strings.Contains(out, "shell tools") {
		t.Fatalf("doctor does not agree:\n%s", out)
	}
}

// cliUnder runs this test binary as the codecell CLI with args, as the
// last argument of wrapper (unshare and its flags, and a shell script
// that stages the host first, exec'ing "$@"), and returns what the CLI
// printed and its exit code.
func cliUnder(t *testing.T, wrapper []string, args ...string) (string, int) {
	t.Helper()
	argv := append(append(append([]string{}, wrapper[1:]...), os.Args[0]), args...)
	cmd := exec.Command(wrapper[0], argv...)
	cmd.Env = append(os.Environ(), "CODECELL_TEST_AS_CLI=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), code
}
