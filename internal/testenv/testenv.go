// Package testenv finds or makes what codecell's tests need outside Go: the
// published MCP server they test against, and the small MCP server written
// for them.
package testenv

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/codecell-dev/codecell/internal/npm"
)

// EverythingVersion is the version of @modelcontextprotocol/server-everything
// the tests use.
const EverythingVersion = "2026.8.31"

// Everything returns the path of the dist/index.js of the published
// @modelcontextprotocol/server-everything (run it with `node PATH stdio`):
// $CODECELL_TEST_EVERYTHING, which the test command sets, or a copy npm
// installs into a cache under the temporary directory. Without node or npm
// the test skips, unless CODECELL_REQUIRE_UPSTREAM=1, where it fails.
func Everything(t testing.TB) string {
	t.Helper()
	skip := Missing(t, "CODECELL_REQUIRE_UPSTREAM")
	if _, err := exec.LookPath("node"); err != nil {
		skip("node is not installed: %v", err)
	}
	if p := os.Getenv("CODECELL_TEST_EVERYTHING"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("CODECELL_TEST_EVERYTHING=%s: %v", p, err)
		}
		return p
	}
	prefix := NPM(t, "@modelcontextprotocol/server-everything", EverythingVersion, skip)
	return filepath.Join(prefix, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
}

// Missing returns what a test calls when something it needs from outside
// Go is missing: it skips, or fails when the environment variable env is 1
// (as in CI, where a skip would hide that the test did not run).
func Missing(t testing.TB, env string) func(format string, args ...any) {
	return func(format string, args ...any) {
		t.Helper()
		if os.Getenv(env) == "1" {
			t.Fatalf(format, args...)
		}
		t.Skipf(format+" (set "+env+"=1 to make this a failure)", args...)
	}
}

// NPM returns the prefix (a directory with node_modules) where npm
// installed pkg@version, into a cache under the temporary directory, once
// per machine; the version installed is checked. Without npm, or when the
// install fails, it calls skip.
func NPM(t testing.TB, pkg, version string, skip func(format string, args ...any)) string {
	t.Helper()
	name := strings.NewReplacer("@", "", "/", "-").Replace(pkg)
	prefix := filepath.Join(os.TempDir(), "codecell-test-"+name+"-"+version)
	if NPMVersion(prefix, pkg) == version {
		return prefix
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		skip("npm is not installed: %v", err)
	}
	// Installed beside its place and renamed into it: test packages run at
	// once, and one must not see another's half-done install.
	tmp, err := os.MkdirTemp(os.TempDir(), "codecell-test-"+name+"-install-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "install", "--no-audit", "--no-fund", "--prefix", tmp, pkg+"@"+version)
	if out, err := cmd.CombinedOutput(); err != nil {
		skip("npm install %s@%s: %v\n%s", pkg, version, err, out)
	}
	if v := NPMVersion(tmp, pkg); v != version {
		t.Fatalf("npm installed %s %q, not %s", pkg, v, version)
	}
	switch _, err := os.Stat(prefix); {
	case NPMVersion(prefix, pkg) == version:
		return prefix // another package's tests put theirs there meanwhile
	case err == nil:
		os.RemoveAll(prefix) // a broken copy, or another version, left before
	}
	if err := os.Rename(tmp, prefix); err != nil && NPMVersion(prefix, pkg) != version {
		t.Fatalf("installing %s: %v", pkg, err)
	}
	return prefix
}

// NPMVersion is the version of pkg installed under prefix, "" when none is.
func NPMVersion(prefix, pkg string) string { return npm.Version(prefix, pkg) }

var (
	serverOnce sync.Once
	serverPath string
	serverErr  error
)

// MCPServer builds, once per test binary, the MCP server in
// mcp/upstream/testdata/server (tools echo, add, fail, slow, crash, big, env, …) and
// returns its path.
func MCPServer(t testing.TB) string {
	t.Helper()
	serverOnce.Do(func() {
		_, here, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(here), "..", "..")
		dir, err := os.MkdirTemp("", "codecell-mcp-test-server-")
		if err != nil {
			serverErr = err
			return
		}
		goTool, err := exec.LookPath("go")
		if err != nil {
			goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
		}
		serverPath = filepath.Join(dir, "server")
		build := exec.Command(goTool, "build", "-o", serverPath, "./mcp/upstream/testdata/server")
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			serverErr = &buildError{err: err, out: string(out)}
		}
	})
	if serverErr != nil {
		t.Fatalf("building the test MCP server: %v", serverErr)
	}
	return serverPath
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }

// RequireNative skips a test on a host where probe (the native tier's
// Probe) fails, or fails it when CODECELL_REQUIRE_NATIVE=1 (as in CI),
// where skipping would hide that the sandbox is missing.
func RequireNative(t testing.TB, probe func() error) {
	t.Helper()
	if err := probe(); err != nil {
		if os.Getenv("CODECELL_REQUIRE_NATIVE") == "1" {
			t.Fatalf("the native sandbox is required (CODECELL_REQUIRE_NATIVE=1) and this host cannot give it: %v", err)
		}
		t.Skipf("this host cannot give the native sandbox: %v", err)
	}
}

// ForAnotherUser makes a directory any user may read and search, with a
// copy of the test binary in it (the original's directory is its
// builder's alone), for a test that runs the binary as another user. It
// skips the test unless it runs as root, which starting a process as
// another user needs. The directory is removed when the test ends.
func ForAnotherUser(t testing.TB) (dir, bin string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run the test binary as another user")
	}
	dir, err := os.MkdirTemp("", "codecell-user-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin = filepath.Join(dir, filepath.Base(os.Args[0]))
	in, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, bin
}

// asUserEnv names, in a test binary run again by RunAsUser, the directory
// of the user it runs as.
const asUserEnv = "CODECELL_TEST_AS_USER_DIR"

// RunAsUser runs the calling test again, in a copy of the test binary
// (ForAnotherUser), as uid, with a directory of that user's, and fails
// the test unless the run passes. In that run, AsUser returns the
// directory; the checks are made there. It skips the test unless it runs
// as root.
func RunAsUser(t *testing.T, uid int) {
	t.Helper()
	dir, bin := ForAnotherUser(t)
	work := filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(work, uid, uid); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^"+regexp.QuoteMeta(t.Name())+"$", "-test.v")
	cmd.Env = []string{asUserEnv + "=" + work}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("as uid %d: %v\n%s", uid, err, out)
	}
}

// AsUser is, in a test binary RunAsUser runs, the directory of the user
// it runs as; "" elsewhere.
func AsUser() string { return os.Getenv(asUserEnv) }
