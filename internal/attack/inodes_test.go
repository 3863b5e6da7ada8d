package attack_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
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

// attackDiskCost: in a --workspace directory with a 2 MiB workspace limit,
// a program makes 480 directories holding a 4 KiB file each: within the
// tmpfs, which counts content alone, and twice the quota on the disk the
// workspace is brought back to. The Result says so in a warning.
func attackDiskCost(t *testing.T) {
	requireNative(t)
	ws := filepath.Join(hostTempDir(t), "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	code := `import os
for i in range(480):
    os.mkdir('d%d' % i)
    open('d%d/f' % i, 'wb').write(b'x' * 4096)
`
	res := run(t, codecell.Exec{Workspace: ws, Code: code, Limits: codecell.Limits{Workspace: 2 << 20}})
	if res.Status != codecell.StatusSuccess || len(res.Files) != 480 {
		t.Fatalf("480 small files in directories of their own: %s", describe(res))
	}
	if w := strings.Join(res.Warnings, " "); !strings.Contains(w, "past its 2 MiB quota") {
		t.Errorf("no warning that the workspace costs its disk more than its quota: %v", res.Warnings)
	}
	// Within the quota: no warning.
	res = run(t, codecell.Exec{Workspace: ws, Code: "open('d0/f', 'wb').write(b'y')\n", Limits: codecell.Limits{Workspace: 64 << 20}})
	if res.Status != codecell.StatusSuccess || len(res.Warnings) > 0 {
		t.Errorf("a workspace within its quota: %s, warnings %v", describe(res), res.Warnings)
	}
}

// attackSparseFile: a program truncates a file in its workspace to 4 GiB
// (which a tmpfs quota, counting blocks, lets pass) and writes 1 MiB into
// it. Run returns with the file listed at its length, without a sha256 and
// with a warning (hashing it byte by byte would cost the host a second per GiB, and a
// petabyte is as easy to make),
// and the copy brought back to the caller's directory holds the program's
// data in about as many blocks, not 4 GiB of zeros (and a file of a
// petabyte would not fill the host's disk). The host's free space stays
// within a bound. The length is below the host's free space, so that a
// copy that filled the holes is harmless.
func attackSparseFile(t *testing.T) {
	requireNative(t)
	ws := hostTempDir(t)
	free := hostFree(t, ws)
	code := `import os
with open('huge.bin', 'wb') as f:
    f.write(b'x' * (1 << 20))
    f.truncate(4 << 30)
st = os.stat('huge.bin')
print('made', st.st_size, st.st_blocks)
`
	res := run(t, codecell.Exec{Code: code, Workspace: ws, Limits: codecell.Limits{Workspace: 8 << 20}})
	if res.Status != codecell.StatusSuccess || !strings.Contains(res.Stdout, "made 4294967296") {
		t.Fatalf("the program did not make its file: %s", describe(res))
	}
	if len(res.Files) != 1 || res.Files[0].Path != "huge.bin" || res.Files[0].Size != 4<<30 || res.Files[0].SHA256 != "" {
		t.Errorf("files %+v", res.Files)
	}
	if w := strings.Join(res.Warnings, "\n"); !strings.Contains(w, "without a sha256") || !strings.Contains(w, "huge.bin") {
		t.Errorf("no warning of the unhashed file: %q", res.Warnings)
	}
	info, err := os.Stat(filepath.Join(ws, "huge.bin"))
	if err != nil || info.Size() != 4<<30 {
		t.Fatalf("the file brought back: %v, %v", info, err)
	}
	if st, ok := info.Sys().(*syscall.Stat_t); !ok || st.Blocks*512 > 4<<20 {
		t.Errorf("the file brought back holds %d bytes of disk for 1 MiB of data", st.Blocks*512)
	}
	if used := free - hostFree(t, ws); used > 1<<30 {
		t.Errorf("the host's free space fell by %d MiB", used>>20)
	}
}
