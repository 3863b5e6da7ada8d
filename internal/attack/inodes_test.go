package attack_test

import (
	"strings"
	"testing"

	"github.com/codecell-dev/codecell"
)

// attackEmptyFiles: a program that makes empty files without end, in a
// 1 MiB workspace, runs out of inodes (one per 4 KiB of the workspace, at
// least 1024) long before it could make the disk its workspace is copied
// back to hold a directory entry per byte of quota. Bounded at 20,000.
func attackEmptyFiles(t *testing.T) {
	requireNative(t)
	code := `import os
made = 0
try:
    for i in range(20000):
        open('e%d' % i, 'w').close()
        made += 1
except OSError as e:
    print('stopped', e.errno)
print('made', made)
`
	res := run(t, codecell.Exec{Code: code, Limits: codecell.Limits{Workspace: 1 << 20}})
	if res.Status != codecell.StatusSuccess || !strings.Contains(res.Stdout, "stopped 28") {
		t.Fatalf("20,000 empty files in a 1 MiB workspace: %s", describe(res))
	}
	if len(res.Files) > 1100 {
		t.Errorf("%d files made in a 1 MiB workspace", len(res.Files))
	}
}
