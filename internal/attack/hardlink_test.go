package attack_test

import (
	"os"
	"path/filepath"
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
