// Package testenv finds or makes what codecell's tests need outside Go: the
// published MCP server they test against, and the small MCP server written
// for them, both kept in a cache of the tests' own (CacheDir).
package testenv

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
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

	"github.com/codecell-dev/codecell/internal/instdir"
	"github.com/codecell-dev/codecell/internal/npm"
)

// Run runs the tests of a package and returns m.Run's code for os.Exit, as
// TestMain does. Like codecell's command, it removes the process's own
// temporary directory (instdir.Process, where runs in this process put
// their runner directories) when they end, rather than leave it for the
// next codecell process to remove.
func Run(m *testing.M) int {
	code := m.Run()
	if err := instdir.ReleaseProcess(); err != nil {
		fmt.Fprintln(os.Stderr, "removing the test binary's temporary directory:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

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
// installed pkg@version, into the tests' cache (CacheDir), once per
// machine; the version installed is checked. Without npm, or when the
// install fails, it calls skip.
func NPM(t testing.TB, pkg, version string, skip func(format string, args ...any)) string {
	t.Helper()
	name := strings.NewReplacer("@", "", "/", "-").Replace(pkg)
	cache, err := CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	prefix := filepath.Join(cache, "npm-"+name+"-"+version)
	if NPMVersion(prefix, pkg) == version {
		return prefix
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		skip("npm is not installed: %v", err)
	}
	// Installed beside its place and renamed into it: test packages run at
	// once, and one must not see another's half-done install.
	tmp, err := os.MkdirTemp(cache, ".npm-"+name+"-install-")
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

// CacheDir is where the tests keep what they make once and reuse (the
// test MCP server's binary, npm packages): codecell/test under the user's
// cache directory, made if missing, or under the temporary directory when
// the user has none (no HOME). Nothing there piles up: an entry is named
// after what it holds, and MCPServer removes old builds of the server.
func CacheDir() (string, error) {
	dir, err := os.UserCacheDir()
	if err == nil && filepath.IsAbs(dir) {
		dir = filepath.Join(dir, "codecell", "test")
	} else {
		dir = filepath.Join(os.TempDir(), fmt.Sprintf("codecell-test-%d", os.Geteuid()))
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	return dir, nil
}

var (
	serverOnce sync.Once
	serverPath string
	serverErr  error
)

// MCPServer returns the path of the MCP server in mcp/upstream/testdata/server
// (tools echo, add, fail, slow, crash, big, env, …), built by BuildMCPServer.
func MCPServer(t testing.TB) string {
	t.Helper()
	serverOnce.Do(func() { serverPath, serverErr = BuildMCPServer() })
	if serverErr != nil {
		t.Fatalf("building the test MCP server: %v", serverErr)
	}
	return serverPath
}

// mcpServerAge is how long a build of the test MCP server that no test
// binary asked for is kept: builds of other versions of its sources (other
// checkouts, older commits) are removed after it.
const mcpServerAge = 7 * 24 * time.Hour

// BuildMCPServer builds the MCP server in mcp/upstream/testdata/server into
// CacheDir, under a name made of a hash of its sources, of go.mod and
// go.sum and of the Go version, and returns its path: the test binaries of
// every package share one build, and a build is made again only when what
// it is made from changed. It is built under a temporary name and renamed
// into place, so that test binaries building it at once never run a
// half-written file.
func BuildMCPServer() (string, error) {
	_, here, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(here), "..", "..")
	src := filepath.Join("mcp", "upstream", "testdata", "server")
	key, err := sourceHash(root, src)
	if err != nil {
		return "", err
	}
	cache, err := CacheDir()
	if err != nil {
		return "", err
	}
	path := filepath.Join(cache, "mcp-server-"+key)
	now := time.Now()
	// Its time says when a test binary last asked for it, for the pruning
	// below.
	if err := os.Chtimes(path, now, now); err == nil {
		return path, nil
	}
	pruneMCPServers(cache)
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	tmpDir, err := os.MkdirTemp(cache, ".mcp-server-"+key+"-*.tmp")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmpDir)
	tmp := filepath.Join(tmpDir, "server")
	build := exec.Command(goTool, "build", "-o", tmp, "./"+filepath.ToSlash(src))
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return "", &buildError{err: err, out: string(out)}
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", err
	}
	return path, nil
}

// sourceHash is a short hash of the files under src (relative to root), of
// root's go.mod and go.sum, and of the Go version and platform.
func sourceHash(root, src string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s %s/%s %s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH, os.Getenv("GOFLAGS"))
	files := []string{"go.mod", "go.sum"}
	err := filepath.WalkDir(filepath.Join(root, src), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(root, p)
		files = append(files, rel)
		return err
	})
	if err != nil {
		return "", err
	}
	for _, name := range files {
		data, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", filepath.ToSlash(name), len(data))
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil)[:8]), nil
}

// pruneMCPServers removes the builds of the test MCP server that no test
// binary asked for in mcpServerAge, and temporary files of builds that
// never finished (an hour is far longer than a build takes), which only a
// test binary killed while building leaves.
func pruneMCPServers(cache string) {
	entries, err := os.ReadDir(cache)
	if err != nil {
		return
	}
	for _, e := range entries {
		name := e.Name()
		age := mcpServerAge
		switch {
		case strings.HasPrefix(name, "mcp-server-"):
		case strings.HasPrefix(name, ".mcp-server-") && strings.HasSuffix(name, ".tmp"):
			age = time.Hour
		default:
			continue
		}
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > age {
			os.RemoveAll(filepath.Join(cache, name))
		}
	}
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
