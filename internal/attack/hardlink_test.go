package attack_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/codecell-dev/codecell"
)

// attackHardLink: a file of the user's --workspace directory that is a hard
// link to a file outside it (pnpm's store, a git worktree's objects) is
// rewritten by the program. The copy-back gives the workspace a new file;
// the file outside keeps its content.
func attackHardLink(t *testing.T) {
	requireNative(t)
	base := hostTempDir(t)
	ws := filepath.Join(base, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	outside := newCanary(t, filepath.Join(base, "store-file"))
	if err := os.Link(outside.Path, filepath.Join(ws, "linked.txt")); err != nil {
		t.Fatal(err)
	}
	word := marker("hardlink")
	res := run(t, codecell.Exec{Workspace: ws, Code: "open('linked.txt', 'w').write(" + pyQuote(word) + ")\nprint('written')\n"})
	if res.Status != codecell.StatusSuccess {
		t.Fatalf("the program failed: %s", describe(res))
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "linked.txt")); string(b) != word {
		t.Fatalf("the workspace's file holds %q, want the program's %q", b, word)
	}
	outside.unchanged(t)
}

func pyQuote(s string) string { return "'" + s + "'" }

// attackHardLinkFanOut: a program gives one 4 MiB file 256 names (hard
// links cost its tmpfs nothing). Brought back to the caller's directory,
// the names are names of one file, 4 MiB of disk, not 1 GiB: at the
// workspace's 100,000 entries a 1 GiB file would have been 100 TiB. Every
// name is listed with the file's sha256.
func attackHardLinkFanOut(t *testing.T) {
	requireNative(t)
	ws := hostTempDir(t)
	code := `import os
with open('f0', 'wb') as f:
    f.write(os.urandom(4 << 20))
for i in range(1, 256):
    os.link('f0', 'f%d' % i)
print('linked', os.stat('f0').st_nlink)
`
	res := run(t, codecell.Exec{Code: code, Workspace: ws, Limits: codecell.Limits{Workspace: 16 << 20}})
	if res.Status != codecell.StatusSuccess || !strings.Contains(res.Stdout, "linked 256") {
		t.Fatalf("the program did not make its links: %s", describe(res))
	}
	if len(res.Files) != 256 {
		t.Fatalf("%d files listed: %s", len(res.Files), describe(res))
	}
	for _, f := range res.Files {
		if f.SHA256 == "" || f.SHA256 != res.Files[0].SHA256 {
			t.Fatalf("%+v, then %+v", res.Files[0], f)
		}
	}
	var used int64
	for i := range 256 {
		var st syscall.Stat_t
		if err := syscall.Lstat(filepath.Join(ws, fmt.Sprint("f", i)), &st); err != nil {
			t.Fatal(err)
		}
		if i == 0 || st.Nlink == 1 {
			used += st.Blocks * 512
		}
	}
	if used > 16<<20 {
		t.Errorf("the names brought back hold %d MiB of disk for a file of 4 MiB", used>>20)
	}
}
