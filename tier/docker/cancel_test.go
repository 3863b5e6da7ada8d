//go:build linux

package docker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/tier/docker"
	"github.com/moby/moby/client"
)

// TestCancelLeavesNothing: a run canceled while its program runs (and
// ignores SIGTERM, with children of its own) ends at once, and leaves no
// container, volume or directory behind, in a container made for it and in
// one the pool readied.
func TestCancelLeavesNothing(t *testing.T) {
	tier := newTier(t)
	tier.Pool = 1
	code := `import os, signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
for i in range(4):
    if os.fork() == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(600)
        os._exit(0)
open("partial.txt", "w").write("x")
call_tool_sync("cancel", {})
time.sleep(600)
`
	for i := range 2 {
		ctx, cancel := context.WithCancel(context.Background())
		stop := codecell.Tool{Name: "cancel", Call: func(context.Context, json.RawMessage) (json.RawMessage, error) {
			cancel()
			return json.Marshal("ok")
		}}
		eng := &codecell.Engine{Tiers: []codecell.Tier{tier}}
		res, err := eng.Run(ctx, &codecell.Exec{Tier: docker.Name, Language: "python", Code: code, Tools: []codecell.Tool{stop},
			Workspace: t.TempDir(), Limits: codecell.Limits{Timeout: 120e9, Workspace: 8 << 20}})
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Errorf("run %d: got %v, %+v; want the cancellation", i, err, res)
		}
		if i == 0 {
			waitReady(t, tier)
		}
	}
	if n := countContainers(t, tier); n > 1 {
		t.Errorf("%d containers besides the ready one", n-1)
	}
	tier.Close()
	if n := countContainers(t, tier); n != 0 {
		t.Errorf("%d containers left", n)
	}
	cli, err := client.New(client.WithHost(engineHost), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	vols, err := cli.VolumeList(context.Background(), client.VolumeListOptions{Filters: client.Filters{}.Add("label", fmt.Sprintf("codecell.owner.pid=%d", os.Getpid()))})
	if err != nil || len(vols.Items) != 0 {
		t.Errorf("volumes left: %+v, %v", vols.Items, err)
	}
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), fmt.Sprintf("codecell-docker-%d.*", os.Getpid())))
	if len(dirs) != 0 {
		t.Errorf("directories left: %v", dirs)
	}
}
