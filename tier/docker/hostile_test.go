//go:build linux

package docker_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codecell-dev/codecell"
)

// TestAttackHostile: what a hostile program does in its container ends
// within its limits, with a Result that says what happened, and leaves no
// container behind: a fork bomb, a container filled with processes until
// the timeout, a program that ignores SIGTERM, output past its cap, sparse
// files (brought back at their length, and one longer than the quota left
// in the container with a warning that names it, the other files coming
// back), hard links (each name brought back), unreadable files and a fifo
// and a socket in the workspace. The launcher,
// whose threads share the pids limit with the program, outlives a program
// that takes every process left.
func TestAttackHostile(t *testing.T) {
	tier := newTier(t)
	tier.Pool = -1
	const fork = "import os, time\nn = 0\ntry:\n    while True:\n        if os.fork() == 0:\n            time.sleep(600)\n            os._exit(0)\n        n += 1\nexcept OSError as e:\n    print('forks', n, e.errno, flush=True)\n"
	// forked: the program made about its 16 processes (the launcher's
	// threads, which share the limit, are made before it starts, but how
	// many the runtime starts may vary by one or two), then got EAGAIN.
	forked := func(stdout string) bool {
		var n, errno int
		_, err := fmt.Sscanf(stdout, "forks %d %d\n", &n, &errno)
		return err == nil && errno == 11 && n >= 12 && n <= 15
	}
	cases := []struct {
		name  string
		code  string
		lim   codecell.Limits
		check func(t *testing.T, res *codecell.Result, ws string)
	}{
		{"a fork bomb", fork, codecell.Limits{Processes: 16, Timeout: 20 * time.Second}, func(t *testing.T, res *codecell.Result, ws string) {
			if res.Status != codecell.StatusSuccess || !forked(res.Stdout) {
				t.Errorf("got %s, stdout %q, stderr %q, error %+v, warnings %q", res.Status, res.Stdout, res.Stderr, res.Error, res.Warnings)
			}
		}},
		{"processes until the timeout", fork + "time.sleep(600)\n", codecell.Limits{Processes: 16, Timeout: 5 * time.Second}, func(t *testing.T, res *codecell.Result, ws string) {
			if res.Status != codecell.StatusTimeout || !forked(res.Stdout) {
				t.Errorf("got %s, stdout %q, stderr %q, error %+v, warnings %q", res.Status, res.Stdout, res.Stderr, res.Error, res.Warnings)
			}
		}},
		{"empty files past the entries the workspace holds", "import os\nn = 0\ntry:\n    for n in range(20000):\n        open('e%d' % n, 'w').close()\n    n = 20000\nexcept OSError as e:\n    print('files', n, e.errno, flush=True)\n", codecell.Limits{Workspace: 16 << 20}, func(t *testing.T, res *codecell.Result, ws string) {
			// As the native tier's: one entry per 4 KiB block of the
			// quota, its root among them; every file made comes back.
			var n, errno int
			_, err := fmt.Sscanf(res.Stdout, "files %d %d\n", &n, &errno)
			if res.Status != codecell.StatusSuccess || err != nil || errno != int(syscall.ENOSPC) || n >= 4096 || len(res.Files) != n {
				t.Errorf("got %s, stdout %q, %d files listed, warnings %q", res.Status, res.Stdout, len(res.Files), res.Warnings)
			}
		}},
		{"SIGTERM ignored", "import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('up', flush=True)\nwhile True:\n    pass\n", codecell.Limits{Timeout: 5 * time.Second}, func(t *testing.T, res *codecell.Result, ws string) {
			if res.Status != codecell.StatusTimeout || res.Stdout != "up\n" {
				t.Errorf("got %s, stdout %q", res.Status, res.Stdout)
			}
		}},
		{"output past its cap", "import sys\nb = 'x' * (1 << 20)\nfor i in range(64):\n    sys.stdout.write(b)\n", codecell.Limits{Stdout: 100_000}, func(t *testing.T, res *codecell.Result, ws string) {
			if res.Status != codecell.StatusSuccess || len(res.Stdout) > 100_100 || !res.StdoutTruncated {
				t.Errorf("got %s, %d bytes of stdout, truncated %v", res.Status, len(res.Stdout), res.StdoutTruncated)
			}
		}},
		{"a sparse file", "f = open('holes.bin', 'wb')\nf.truncate(48 << 20)\nf.close()\n", codecell.Limits{Workspace: 64 << 20}, func(t *testing.T, res *codecell.Result, ws string) {
			var st syscall.Stat_t
			if err := syscall.Stat(filepath.Join(ws, "holes.bin"), &st); err != nil || st.Size != 48<<20 {
				t.Errorf("holes.bin in the caller's workspace: size %d, %d bytes on disk, %v", st.Size, st.Blocks*512, err)
			}
		}},
		{"a sparse file longer than the quota", "open('ok.txt', 'w').write('ok')\nf = open('holes.bin', 'wb')\nf.truncate(100 << 30)\nf.close()\nf = open('keep.txt', 'r+b')\nf.truncate(1 << 30)\nf.close()\nopen('z.txt', 'w').write('z')\n", codecell.Limits{Workspace: 8 << 20}, func(t *testing.T, res *codecell.Result, ws string) {
			// The two files of holes are left, each named with its length
			// and what to do; the others come back, and the caller's
			// keep.txt stays as it was.
			var left []string
			for _, w := range res.Warnings {
				if strings.Contains(w, "was left in the container") && strings.Contains(w, "raise limits.workspace") {
					left = append(left, strings.Fields(w)[0])
				}
			}
			if len(res.Warnings) != 2 || !slices.Equal(left, []string{"holes.bin", "keep.txt"}) ||
				!strings.Contains(res.Warnings[0], "it is 107374182400 bytes long but holds 0 bytes of data") {
				t.Errorf("warnings %q", res.Warnings)
			}
			if paths := changed(res); !slices.Equal(paths, []string{"created ok.txt", "created z.txt"}) {
				t.Errorf("files %q", paths)
			}
			for f, want := range map[string]string{"keep.txt": "mine", "ok.txt": "ok", "z.txt": "z"} {
				if b, err := os.ReadFile(filepath.Join(ws, f)); err != nil || string(b) != want {
					t.Errorf("%s: %q, %v", f, b, err)
				}
			}
			if _, err := os.Lstat(filepath.Join(ws, "holes.bin")); err == nil {
				t.Errorf("holes.bin came back")
			}
		}},
		{"a sparse file in a directory shut to its owner", "import os\nos.mkdir('d')\nf = open('d/holes.bin', 'wb')\nf.truncate(100 << 30)\nf.close()\nopen('d/ok.txt', 'w').write('ok')\nos.chmod('d', 0)\n", codecell.Limits{Workspace: 8 << 20}, func(t *testing.T, res *codecell.Result, ws string) {
			if len(res.Warnings) != 1 || !strings.HasPrefix(res.Warnings[0], "d/holes.bin was left in the container") {
				t.Errorf("warnings %q", res.Warnings)
			}
			if b, err := os.ReadFile(filepath.Join(ws, "d", "ok.txt")); err != nil || string(b) != "ok" {
				t.Errorf("d/ok.txt: %q, %v", b, err)
			}
		}},
		{"hard links", "import os\nopen('a.txt', 'w').write('hello')\nos.link('a.txt', 'b.txt')\nos.remove('keep.txt')\nos.link('a.txt', 'keep.txt')\n", codecell.Limits{}, func(t *testing.T, res *codecell.Result, ws string) {
			// Every name comes back with the content, as on the native
			// tier, and is listed.
			for _, f := range []string{"a.txt", "b.txt", "keep.txt"} {
				if b, err := os.ReadFile(filepath.Join(ws, f)); err != nil || string(b) != "hello" {
					t.Errorf("%s: %q, %v", f, b, err)
				}
			}
			if paths := changed(res); len(res.Warnings) != 0 || !slices.Equal(paths, []string{"created a.txt", "created b.txt", "modified keep.txt"}) {
				t.Errorf("files %q, warnings %q", paths, res.Warnings)
			}
		}},
		{"hard links past the quota", "import os\nopen('a.bin', 'wb').write(b'x' * (3 << 20))\nfor n in 'bcd':\n    os.link('a.bin', n + '.bin')\n", codecell.Limits{Workspace: 8 << 20}, func(t *testing.T, res *codecell.Result, ws string) {
			// One copy fits beside a.bin; the others are left, by name.
			if len(res.Warnings) != 2 || !strings.HasPrefix(res.Warnings[0], "c.bin was left in the container") || !strings.HasPrefix(res.Warnings[1], "d.bin was left in the container") {
				t.Errorf("warnings %q", res.Warnings)
			}
			if paths := changed(res); !slices.Equal(paths, []string{"created a.bin", "created b.bin"}) {
				t.Errorf("files %q", paths)
			}
		}},
		{"a fifo and a socket", "import os, socket\nos.mkfifo('fifo')\ns = socket.socket(socket.AF_UNIX)\ns.bind('sock')\nopen('ok.txt', 'w').write('ok')\n", codecell.Limits{}, func(t *testing.T, res *codecell.Result, ws string) {
			// As the native tier says it.
			want := []string{"2 pipes, sockets or device nodes left in the workspace are in no list and not copied back (only regular files, directories and symbolic links are): fifo, sock"}
			if !slices.Equal(res.Warnings, want) {
				t.Errorf("warnings %q", res.Warnings)
			}
			if paths := changed(res); !slices.Equal(paths, []string{"created ok.txt"}) {
				t.Errorf("files %q", paths)
			}
		}},
		{"unreadable files", "import os\nos.mkdir('d')\nopen('d/in.txt', 'w').write('in')\nopen('f.txt', 'w').write('f')\nos.chmod('f.txt', 0)\nos.chmod('d', 0)\n", codecell.Limits{}, func(t *testing.T, res *codecell.Result, ws string) {
			if b, err := os.ReadFile(filepath.Join(ws, "d", "in.txt")); err != nil || string(b) != "in" {
				t.Errorf("d/in.txt: %q, %v; warnings %q", b, err, res.Warnings)
			}
			if info, err := os.Stat(filepath.Join(ws, "f.txt")); err != nil || info.Mode().Perm() != 0 || info.Size() != 1 {
				t.Errorf("f.txt: %v, %v", info, err)
			}
		}},
		{"a socket", "import socket\ns = socket.socket(socket.AF_UNIX)\ns.bind('sock')\nopen('ok.txt', 'w').write('ok')\n", codecell.Limits{}, func(t *testing.T, res *codecell.Result, ws string) {
			if _, err := os.Lstat(filepath.Join(ws, "sock")); err == nil {
				t.Errorf("a socket came back")
			}
			if b, err := os.ReadFile(filepath.Join(ws, "ok.txt")); err != nil || string(b) != "ok" {
				t.Errorf("ok.txt: %q, %v; warnings %q", b, err, res.Warnings)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ws := t.TempDir()
			if err := os.WriteFile(filepath.Join(ws, "keep.txt"), []byte("mine"), 0o644); err != nil {
				t.Fatal(err)
			}
			res := run(t, tier, codecell.Exec{Language: "python", Code: c.code, Workspace: ws, Limits: c.lim})
			c.check(t, res, ws)
			if n := countContainers(t, tier); n != 0 {
				t.Errorf("%d containers left", n)
			}
		})
	}
}

// changed is what res lists, as "change path", in order.
func changed(res *codecell.Result) []string {
	var out []string
	for _, f := range res.Files {
		out = append(out, string(f.Change)+" "+f.Path)
	}
	return out
}

// TestLauncherThreadsBeforeProgram: the launcher has made the threads it
// may want before the program starts, so that a program taking every
// process the pids limit leaves cannot take one the launcher needs later.
func TestLauncherThreadsBeforeProgram(t *testing.T) {
	tier := newTier(t)
	tier.Pool = -1
	for i := range 3 {
		res := run(t, tier, codecell.Exec{Language: "python", Code: "import os\nlen(os.listdir('/proc/%d/task' % os.getppid()))\n",
			Limits: codecell.Limits{Processes: 16}})
		if n, err := strconv.Atoi(string(res.Value)); res.Status != codecell.StatusSuccess || err != nil || n < 7 || n > 8 {
			t.Errorf("run %d: got %s, the launcher's threads %s, stderr %q", i, res.Status, res.Value, res.Stderr)
		}
	}
}
