//go:build linux

package native_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/tier/native"
)

// A mount the sandbox cannot show is the caller's to change: blocked with
// MOUNT_UNAVAILABLE, not retryable, naming the directory and what to do;
// never a retryable sandbox_error, never a run that silently lacks it. A
// mount it can show is there, read-only.
func TestMountsTheSandboxCannotShow(t *testing.T) {
	requireNative(t)
	// Outside /tmp, which the sandbox has of its own, and which every
	// user may pass.
	dir, err := os.MkdirTemp("/var/tmp", "codecell-mounts-")
	if err != nil {
		t.Skipf("no directory outside /tmp to mount: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	shown := filepath.Join(dir, "shown")
	// Under a directory only its owner may enter: the sandbox reaches
	// mounts as a user of its own, which may not pass it.
	hidden := filepath.Join(dir, "private", "data")
	file := filepath.Join(dir, "file")
	for _, d := range []string{shown, hidden} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Dir(hidden), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{file, filepath.Join(shown, "marker")} {
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(mount string, pool int) *codecell.Result {
		tier := &native.Tier{Pool: pool, ExtraMounts: []string{mount}}
		t.Cleanup(func() { tier.Close() })
		e := &codecell.Engine{Tier: native.Name, Tiers: []codecell.Tier{tier}}
		res, err := e.Run(context.Background(), &codecell.Exec{Language: "sh",
			Code: "cat " + filepath.Join(shown, "marker") + " && touch " + filepath.Join(shown, "w") + " 2>/dev/null || echo read-only\n"})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for _, pool := range []int{-1, 0} {
		for _, c := range []struct{ mount, why string }{
			{hidden, "permission denied"},
			{filepath.Join(dir, "missing"), "no such file or directory"},
			{file, "not a directory"},
			{"/tmp", "a /tmp of its own"},
			{"/etc/ssl", "a /etc of its own"},
		} {
			res := run(c.mount, pool)
			if res.Status != codecell.StatusBlocked || res.Error == nil || res.Error.Code != codecell.CodeMountUnavailable || res.Error.Retryable ||
				!strings.Contains(res.Error.Message, c.mount) || !strings.Contains(res.Error.Message, c.why) || len(res.Error.Hints) == 0 {
				t.Errorf("pool %d, mount %s: status %s, error %+v", pool, c.mount, res.Status, res.Error)
			}
		}
		res := run(shown, pool)
		if res.Status != codecell.StatusSuccess || res.Stdout != "xread-only\n" {
			t.Errorf("pool %d, a mount it can show: status %s, stdout %q, error %+v", pool, res.Status, res.Stdout, res.Error)
		}
	}
}

// An interpreter outside what the sandbox shows fails the run, saying how
// to show it, and not as a failure a retry could mend; shown by a mount,
// it runs.
func TestInterpreterOutsideTheSandbox(t *testing.T) {
	requireNative(t)
	dir, err := os.MkdirTemp("/var/tmp", "codecell-interp-")
	if err != nil {
		t.Skipf("no directory outside /tmp: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	sh, err := os.ReadFile("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sh"), sh, 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(mounts []string) *codecell.Result {
		tier := &native.Tier{Pool: -1, ExtraMounts: mounts}
		t.Cleanup(func() { tier.Close() })
		e := &codecell.Engine{Tier: native.Name, Tiers: []codecell.Tier{tier}, Interpreters: map[string]string{"sh": filepath.Join(dir, "sh")}}
		res, err := e.Run(context.Background(), &codecell.Exec{Language: "sh", Code: "echo ok\n"})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := run(nil)
	if res.Status != codecell.StatusSandboxError || res.Error == nil || res.Error.Retryable || !strings.Contains(res.Error.Message, "outside what the sandbox shows") ||
		!strings.Contains(strings.Join(res.Error.Hints, " "), "--mount DIR") {
		t.Errorf("an interpreter outside the sandbox: status %s, error %+v", res.Status, res.Error)
	}
	if res := run([]string{dir}); res.Status != codecell.StatusSuccess || res.Stdout != "ok\n" {
		t.Errorf("the interpreter's directory mounted: status %s, stdout %q, error %+v", res.Status, res.Stdout, res.Error)
	}
}
