//go:build linux

package native

import (
	"bufio"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// What a process that did not answer was doing goes into the error: a
// waiting one's state and the kernel function it waits in, and a process
// that is gone says so.
func TestInitState(t *testing.T) {
	cmd := exec.Command("/bin/cat")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer in.Close()
	// cat has echoed the line: it goes back to wait for the next.
	if _, err := in.Write([]byte("x\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	// The kernel function it waits in follows, where the kernel says.
	want := "init, pid " + strconv.Itoa(cmd.Process.Pid) + ": S (sleeping)"
	var got string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if got = initState(cmd.Process.Pid); strings.HasPrefix(got, want) {
			break
		}
	}
	if !strings.HasPrefix(got, want) {
		t.Errorf("a waiting process: %q", got)
	}
	if got := initState(1 << 30); !strings.HasSuffix(got, ": gone") {
		t.Errorf("no such process: %q", got)
	}
}
