package attack_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/workspace"
)

// attackHugeWorkspace: a --workspace directory near the entry limit, into
// which the program writes a file and then empty files until it can make
// no more. Copy-back brings every one of them, and loses none of the
// user's: the sandbox's workspace holds no more entries than its listing
// takes. A directory past the limit is refused before anything runs, and
// left as it was.
func attackHugeWorkspace(t *testing.T) {
	requireNative(t)
	if testing.Short() {
		t.Skip("makes 101,000 files on the host's disk: not in -short")
	}
	ws := filepath.Join(hostTempDir(t), "ws")
	const perDir = 1000
	dirs := workspace.MaxWorkspaceEntries/perDir - 2
	makeFiles := func(from, to int) {
		for d := from; d < to; d++ {
			dir := filepath.Join(ws, fmt.Sprintf("d%03d", d))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for i := range perDir {
				f, err := os.OpenFile(filepath.Join(dir, fmt.Sprint(i)), os.O_CREATE|os.O_WRONLY, 0o644)
				if err != nil {
					t.Fatal(err)
				}
				f.Close()
			}
		}
	}
	start := time.Now()
	makeFiles(0, dirs)
	t.Logf("%v: %d entries made", time.Since(start), dirs*perDir)
	if err := os.WriteFile(filepath.Join(ws, "zz-keep.txt"), []byte("the user's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code := `import os
open('new.txt', 'w').write('made')
os.mkdir('out')
made = 0
try:
    for i in range(5000):
        open('out/%d' % i, 'w').close()
        made += 1
except OSError as e:
    print('stopped', e.errno)
made
`
	res := run(t, codecell.Exec{Workspace: ws, Code: code})
	t.Logf("%v: ran", time.Since(start))
	var made int
	fmt.Sscan(string(res.Value), &made)
	if res.Status != codecell.StatusSuccess || !strings.Contains(res.Stdout, "stopped 28") || made < 100 {
		t.Fatalf("filling a workspace of %d entries: %s", dirs*perDir, describe(res))
	}
	if len(res.Warnings) > 0 {
		t.Errorf("warnings: %v", res.Warnings)
	}
	if len(res.Files) != made+1 {
		t.Errorf("%d files listed, the program made %d", len(res.Files), made+1)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "new.txt")); err != nil || string(b) != "made" {
		t.Errorf("the program's file did not come back: %q, %v", b, err)
	}
	if out, err := os.ReadDir(filepath.Join(ws, "out")); err != nil || len(out) != made {
		t.Errorf("%d of the program's %d files came back: %v", len(out), made, err)
	}
	countUser := func() int {
		n := 0
		for d := range dirs + 3 {
			entries, _ := os.ReadDir(filepath.Join(ws, fmt.Sprintf("d%03d", d)))
			n += len(entries)
		}
		if _, err := os.Stat(filepath.Join(ws, "zz-keep.txt")); err == nil {
			n++
		}
		return n
	}
	if n := countUser(); n != dirs*perDir+1 {
		t.Errorf("the user's files: %d of %d left", n, dirs*perDir+1)
	}

	// Past the limit: refused, nothing touched.
	makeFiles(dirs, dirs+3)
	t.Logf("%v: %d entries more", time.Since(start), 3*perDir)
	res, err := engine.Run(context.Background(), &codecell.Exec{Tier: "native", Language: "python", Workspace: ws, Code: "open('zz-keep.txt', 'w').write('overwritten')\n"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%v: refused", time.Since(start))
	if res.Status != codecell.StatusBlocked || res.Error == nil || res.Error.Code != codecell.CodeWorkspaceTooLarge || !strings.Contains(res.Error.Message, "files, directories and links") {
		t.Errorf("a workspace past the entry limit: %s", describe(res))
	}
	if n := countUser(); n != (dirs+3)*perDir+1 {
		t.Errorf("the user's files: %d of %d left", n, (dirs+3)*perDir+1)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "zz-keep.txt")); string(b) != "the user's\n" {
		t.Errorf("zz-keep.txt: %q", b)
	}
}

// attackDeepWorkspace: a --workspace directory holding a tree nested past
// PATH_MAX, in which the program changes the user's file and makes one of
// its own. What the listing cannot name is said in a warning; the user's
// file there is kept as it was, nothing is taken for deleted, and the
// change beside the deep tree comes back.
func attackDeepWorkspace(t *testing.T) {
	requireNative(t)
	ws := filepath.Join(hostTempDir(t), "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	// 24 levels of 204-byte names: a path of about 4,900 bytes, made from
	// directory descriptor to descriptor, as no path of it can be opened.
	fd, err := unix.Open(ws, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 24 {
		name := fmt.Sprintf("d%02d", i) + strings.Repeat("x", 200)
		if err := unix.Mkdirat(fd, name, 0o755); err != nil {
			t.Fatal(err)
		}
		next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
	}
	bottom := func() string {
		f, err := unix.Openat(fd, "bottom.txt", unix.O_RDONLY, 0)
		if err != nil {
			return err.Error()
		}
		defer unix.Close(f)
		b := make([]byte, 100)
		n, _ := unix.Read(f, b)
		return string(b[:n])
	}
	defer unix.Close(fd)
	f, err := unix.Openat(fd, "bottom.txt", unix.O_WRONLY|unix.O_CREAT, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	unix.Write(f, []byte("the user's"))
	unix.Close(f)
	if err := os.WriteFile(filepath.Join(ws, "top.txt"), []byte("top"), 0o644); err != nil {
		t.Fatal(err)
	}
	code := `import os
fd = os.open('.', os.O_RDONLY)
while True:
    ds = [e for e in os.listdir(fd) if e.startswith('d')]
    if not ds:
        break
    n = os.open(ds[0], os.O_RDONLY, dir_fd=fd)
    os.close(fd)
    fd = n
f = os.open('bottom.txt', os.O_WRONLY | os.O_APPEND, dir_fd=fd)
os.write(f, b' and the sandbox')
os.close(f)
f = os.open('made.txt', os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
os.close(f)
open('top.txt', 'a').write('+')
`
	res := run(t, codecell.Exec{Workspace: ws, Code: code})
	if res.Status != codecell.StatusSuccess {
		t.Fatalf("the deep tree: %s", describe(res))
	}
	if w := strings.Join(res.Warnings, " "); !strings.Contains(w, "a path longer than the system allows") || !strings.Contains(w, "d00") {
		t.Errorf("no warning names the deep tree: %v", res.Warnings)
	}
	for _, c := range res.Files {
		if c.Change == codecell.Deleted {
			t.Errorf("taken for deleted: %s", c.Path)
		}
	}
	if len(res.Files) != 1 || res.Files[0].Path != "top.txt" {
		t.Errorf("files: %+v", res.Files)
	}
	if got := bottom(); got != "the user's" {
		t.Errorf("the user's deep file: %q", got)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "top.txt")); string(b) != "top+" {
		t.Errorf("top.txt: %q", b)
	}
}
