package attack_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/codecell-dev/codecell"
	_ "github.com/codecell-dev/codecell/tier/local"
	"github.com/codecell-dev/codecell/tier/native"
)

func TestMain(m *testing.M) { codecell.Init(); os.Exit(m.Run()) }

func TestExplore(t *testing.T) {
	if err := native.Default.Probe(); err != nil {
		t.Fatal(err)
	}
	src, _ := os.ReadFile(os.Getenv("EXPLORE"))
	eng := &codecell.Engine{}
	lang := os.Getenv("LANG_")
	if lang == "" {
		lang = "python"
	}
	start := time.Now()
	res, err := eng.Run(context.Background(), &codecell.Exec{Tier: os.Getenv("TIER"), Language: lang, Code: string(src), Limits: codecell.Limits{Timeout: 20 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%v status=%s exit=%d\nstdout=%s\nstderr=%s\nvalue=%s\niso=%+v\nwarn=%v err=%+v", time.Since(start), res.Status, res.ExitCode, res.Stdout, res.Stderr, res.Value, res.Isolation, res.Warnings, res.Error)
}
