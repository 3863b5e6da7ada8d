//go:build linux

package docker_test

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/tier/docker"
)

// TestSweepAfterCrash: a codecell process killed while its program runs
// leaves its container and its workspace's volume; the next Sweep removes
// them, and leaves this process's own alone.
func TestSweepAfterCrash(t *testing.T) {
	tier := newTier(t)
	if os.Getenv("CODECELL_DOCKER_CRASH") == "1" {
		// The process that crashes: its program says it is up, then
		// sleeps until the process is killed.
		run(t, tier, codecell.Exec{Language: "sh", Code: "echo up\nsleep 120\n", Stdout: os.Stdout,
			Limits: codecell.Limits{Timeout: 100 * time.Second}})
		return
	}
	// This process's tier sweeps before its first run: it has made that
	// run before the crash.
	if res := run(t, tier, codecell.Exec{Language: "sh", Code: "true\n"}); res.Status != codecell.StatusSuccess {
		t.Fatalf("got %s: %+v", res.Status, res.Error)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSweepAfterCrash$", "-test.v")
	cmd.Env = append(os.Environ(), "CODECELL_DOCKER_CRASH=1", "DOCKER_HOST="+engineHost, "CODECELL_DOCKER_IMAGE="+imageName)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	up := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) == "up" {
				up <- true
				break
			}
		}
		close(up)
		for sc.Scan() {
		}
	}()
	select {
	case ok := <-up:
		if !ok {
			cmd.Wait()
			t.Fatal("the crashing process ended before its program was up")
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("the crashing process's program did not say it was up")
	}
	cmd.Process.Kill()
	cmd.Wait()

	// A container of this process, which the sweep must leave: its
	// program says it is up, then waits for a line.
	mine := make(chan *codecell.Result, 1)
	eng := &codecell.Engine{Tiers: []codecell.Tier{tier}}
	inR, inW := io.Pipe()
	upR, upW := io.Pipe()
	go func() {
		res, _ := eng.Run(context.Background(), &codecell.Exec{Tier: docker.Name, Language: "sh", Code: "echo up\nread x\necho \"got $x\"\n",
			Stdin: inR, Stdout: upW})
		upW.Close()
		mine <- res
	}()
	if line, err := bufio.NewReader(upR).ReadString('\n'); err != nil || line != "up\n" {
		t.Fatalf("this process's program: %q, %v", line, err)
	}
	go io.Copy(io.Discard, upR)

	sweeper := &docker.Tier{Host: engineHost}
	defer sweeper.Close()
	swept, err := sweeper.Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if swept.Containers < 1 || swept.Volumes < 1 || swept.Dirs < 1 || len(swept.Errors) > 0 {
		t.Errorf("swept %+v, want the crashed process's container and its workspace's volume", swept)
	}
	io.WriteString(inW, "go\n")
	inW.Close()
	res := <-mine
	if res == nil || res.Status != codecell.StatusSuccess || res.Stdout != "up\ngot go\n" {
		t.Errorf("this process's run, during the sweep: %+v", res)
	}
	again, err := sweeper.Sweep(context.Background())
	if err != nil || again.Containers != 0 || again.Volumes != 0 {
		t.Errorf("a second sweep: %+v, %v", again, err)
	}
}
