package attack_test

import (
	"context"
	"strings"
	"testing"

	"github.com/codecell-dev/codecell"
)

// attackFillTmpfs: the workspace and /tmp are tmpfs whose pages count toward
// the sandbox's memory. A program that writes past its memory limit there
// (64 MiB; 1 MiB at a time, stopping at four times the limit) is the one
// the kernel ends: the Result says memory_limit, not retryable, with the
// isolation it had and a message that names the workspace, never a
// retryable sandbox_error from an init that was killed instead: writing to
// /tmp, to the workspace, and to both in turn.
func attackFillTmpfs(t *testing.T) {
	requireNative(t)
	for _, where := range [][]string{{"/tmp"}, {"."}, {"/tmp", "."}} {
		dirs := make([]string, len(where))
		for i, d := range where {
			dirs[i] = pyQuote(d)
		}
		code := `import os
chunk = b'x' * (1 << 20)
written = 0
dirs = [` + strings.Join(dirs, ", ") + `]
for i in range(256):
    path = os.path.join(dirs[i % len(dirs)], 'fill-%d.bin' % (i % 2))
    with open(path, 'ab') as f:
        f.write(chunk)
    written += 1
print('wrote', written)
`
		x := codecell.Exec{Code: code, Limits: codecell.Limits{Memory: 64 << 20}, Tier: "native", Language: "python"}
		res, err := engine.Run(context.Background(), &x)
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != codecell.StatusMemoryLimit || res.Error == nil || res.Error.Retryable || !strings.Contains(res.Error.Message, "workspace") {
			t.Errorf("filling %s: %s", where, describe(res))
		}
		if where[len(where)-1] == "." && len(res.Files) == 0 {
			t.Errorf("filling the workspace: the files it wrote are not listed (init did not survive to read them): %s", describe(res))
		}
		if res.Isolation.Level != "sandbox" {
			t.Errorf("filling %s: isolation %q", where, res.Isolation.Level)
		}
	}
}

// attackOOMScore: the program is the OOM killer's first choice (it starts
// with the highest score) and cannot make itself unkillable.
func attackOOMScore(t *testing.T) {
	requireNative(t)
	res := run(t, codecell.Exec{Code: `print(open('/proc/self/oom_score_adj').read().strip())
try:
    with open('/proc/self/oom_score_adj', 'w') as f:
        f.write('-1000')
    print('lowered')
except OSError as e:
    print('refused')
print(open('/proc/self/oom_score_adj').read().strip())
`})
	if res.Status != codecell.StatusSuccess || res.Stdout != "1000\nrefused\n1000\n" {
		t.Errorf("the program's OOM score: %s", describe(res))
	}
}
