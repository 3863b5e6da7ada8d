//go:build linux

package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/codecell-dev/codecell/internal/barrier"
)

// shells are the shells the client is run under: dash is what sh is on
// Debian, and bash reads and locks the same way by other code.
func shells(t *testing.T) []string {
	var out []string
	for _, sh := range []string{"/bin/sh", "/bin/bash", "/bin/dash"} {
		if _, err := os.Stat(sh); err == nil {
			out = append(out, sh)
		}
	}
	if len(out) == 0 {
		t.Skip("no shell on this host")
	}
	return out
}

// runShell runs script under sh with the shell client on its PATH and the
// host's end of a tool channel served by h, as a sandbox would: the
// program's end is its descriptor 4.
func runShell(t *testing.T, sh, script string, h Handler) (stdout, stderr string, err error) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	hostFile := os.NewFile(uintptr(fds[0]), "host")
	prog := os.NewFile(uintptr(fds[1]), "program")
	host, err := net.FileConn(hostFile)
	hostFile.Close()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "codecell-tool"), ShellClient, 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	served := make(chan struct{})
	go func() {
		defer close(served)
		Serve(ctx, host, h)
	}()
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	cmd := exec.CommandContext(ctx, sh, "-c", script)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin", "TMPDIR=" + tmp}
	cmd.ExtraFiles = []*os.File{devNull, prog} // descriptors 3 and 4
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	prog.Close()
	host.Close()
	cancel()
	<-served
	return out.String(), errOut.String(), err
}

// gate is a tool that holds every call until n calls are in at once, then
// lets them all go: a client that makes its calls one at a time never gets
// there, and its calls fail with a message that says so.
func gate(n int) Handler {
	pass := barrier.New(n)
	return func(r Request) Call {
		name, params := r.Name, r.Arguments
		return func(ctx context.Context) (json.RawMessage, error) {
			switch name {
			case "gate":
				if err := pass(ctx); err != nil {
					return nil, err
				}
				return params, nil
			case "fail":
				return nil, &Error{Envelope: json.RawMessage(`{"error_kind":"tool","error_code":"TOOL_FAILED","message":"failed on purpose","retryable":false}`)}
			}
			return params, nil
		}
	}
}

// Calls made from shells in the background are served at once, and each
// gets its own answer, whatever order the answers come back in.
func TestShellClientConcurrent(t *testing.T) {
	for _, sh := range shells(t) {
		t.Run(filepath.Base(sh), func(t *testing.T) {
			script := `for i in 1 2 3; do codecell-tool gate "{\"n\": $i}" >out$i 2>err$i & done
wait
for i in 1 2 3; do cat out$i err$i; done
`
			stdout, stderr, err := runShell(t, sh, script, gate(3))
			if err != nil {
				t.Fatalf("%v; stderr: %s", err, stderr)
			}
			if want := "{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n"; stdout != want {
				t.Errorf("stdout %q, want %q; stderr %q", stdout, want, stderr)
			}
		})
	}
}

// Many calls at once, with results and failures mixed, and arguments that
// are not JSON: each caller gets its own answer, never another's.
func TestShellClientDemultiplexes(t *testing.T) {
	const n = 12
	for _, sh := range shells(t) {
		t.Run(filepath.Base(sh), func(t *testing.T) {
			script := fmt.Sprintf(`i=0
while [ $i -lt %d ]; do
	i=$((i+1))
	case $i in
	*3) codecell-tool fail "{\"i\": $i}" >out$i 2>err$i & ;;
	*7) codecell-tool gate "{\"i\": $i" >out$i 2>err$i & ;;
	*) codecell-tool gate "{\"i\": $i}" >out$i 2>err$i & ;;
	esac
done
wait
i=0
while [ $i -lt %d ]; do
	i=$((i+1))
	echo "$i out $(cat out$i)"
	echo "$i err $(cat err$i)"
done
`, n, n)
			// Call 3 fails and 7 is malformed: the others are held
			// until all of them are in.
			stdout, stderr, err := runShell(t, sh, script, gate(n-2))
			if err != nil {
				t.Fatalf("%v; stderr: %s", err, stderr)
			}
			lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
			if len(lines) != 2*n {
				t.Fatalf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
			}
			for i := 1; i <= n; i++ {
				out := strings.TrimPrefix(lines[2*i-2], fmt.Sprintf("%d out ", i))
				errLine := strings.TrimPrefix(lines[2*i-1], fmt.Sprintf("%d err ", i))
				switch i % 10 {
				case 3:
					if out != "" || errLine != `{"error_kind":"tool","error_code":"TOOL_FAILED","message":"failed on purpose","retryable":false}` {
						t.Errorf("call %d: out %q err %q", i, out, errLine)
					}
				case 7:
					// Its answer reached it: the host found its id.
					if out != "" || !strings.HasPrefix(errLine, `{"jsonrpc":"2.0","id":`) || strings.Contains(errLine, `"id":null`) || !strings.Contains(errLine, "not JSON") {
						t.Errorf("call %d: out %q err %q", i, out, errLine)
					}
				default:
					if want := fmt.Sprintf(`{"i":%d}`, i); out != want || errLine != "" {
						t.Errorf("call %d: out %q err %q, want out %q", i, out, errLine, want)
					}
				}
			}
		})
	}
}

// A caller alone on the channel gets its answer, and an answer when its
// arguments are not JSON.
func TestShellClientAlone(t *testing.T) {
	sh := shells(t)[0]
	stdout, stderr, err := runShell(t, sh, `codecell-tool echo '{"a": 1}'; codecell-tool echo '{"a": ' ; echo "exit $?"`, gate(1))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(stdout, "{\"a\":1}\nexit 1\n") || !strings.Contains(stderr, "not JSON") {
		t.Errorf("stdout %q stderr %q", stdout, stderr)
	}
}

// Answers are left only in a directory of the caller's own: a directory of
// that name made by someone else, or a link, is refused, not used.
func TestShellClientRefusesAForeignDirectory(t *testing.T) {
	sh := shells(t)[0]
	stdout, stderr, err := runShell(t, sh, `ln -s /nonexistent "$TMPDIR/.codecell-tool-$(readlink /proc/self/fd/4 | tr -cd 0-9)"; codecell-tool echo '{}'; echo "exit $?"`, gate(1))
	if err != nil || stdout != "exit 2\n" || !strings.Contains(stderr, "not a directory of this user's own") {
		t.Errorf("a link in its place: %v, stdout %q stderr %q", err, stdout, stderr)
	}
}
