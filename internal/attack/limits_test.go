//go:build linux

package attack_test

import (
	"encoding/json"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codecell-dev/codecell"
)

// memoryBombProgram allocates and touches up to 1 GiB in 32 MiB steps
// (bytes multiplication writes every byte), printing its progress.
const memoryBombProgram = `
import sys
chunks = []
for i in range(32):
    chunks.append(b'\x01' * (32 << 20))
    print((i + 1) * 32, flush=True)
print('allocated 1 GiB', flush=True)
`

func attackMemoryBomb(t *testing.T) {
	t.Parallel()
	const limit = 128 << 20
	res := run(t, codecell.Exec{Code: memoryBombProgram, Limits: codecell.Limits{Memory: limit, Timeout: 30 * time.Second}})
	if res.Status != codecell.StatusMemoryLimit {
		t.Errorf("status %s, want memory_limit: %s", res.Status, describe(res))
	}
	if strings.Contains(res.Stdout, "allocated 1 GiB") {
		t.Errorf("the program allocated 1 GiB under a %d MiB limit", limit>>20)
	}
	// The last progress line is the most it held; it never reaches the limit.
	lines := strings.Fields(res.Stdout)
	t.Logf("progress: %v; memory limited by %q", lines, res.Isolation.Limits.Memory)
	if !strings.Contains(res.Isolation.Limits.Memory, "cgroup") {
		t.Errorf("isolation.limits.memory is %q; want a cgroup named (this host has the memory controller)", res.Isolation.Limits.Memory)
	}
}

// fillProgram writes 1 MiB blocks to $DIR/fill until the filesystem refuses
// or $CAP MiB are written, and reports the errno and how much got in.
const fillProgram = `
import os, errno
path = os.path.join(os.environ['DIR'], 'fill-' + os.environ['MARK'])
block = b'\xa5' * (1 << 20)
written, err = 0, None
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
try:
    while written < int(os.environ['CAP']) << 20:
        try:
            written += os.write(fd, block)
        except OSError as e:
            err = e.errno
            break
finally:
    os.close(fd)
{"written": written, "errno": err}
`

// hostFree returns the free bytes of the filesystem holding path.
func hostFree(t *testing.T, path string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		t.Fatalf("statfs %s: %v", path, err)
	}
	return int64(st.Bavail) * st.Bsize
}

// attackDisk runs alone (not parallel): it measures the host's free space.
func attackDisk(t *testing.T) {
	for _, c := range []struct {
		name      string
		dir       string
		size, cap int64 // the filesystem's size and the program's cap, in MiB
		limits    codecell.Limits
	}{
		// The workspace quota is what is asked for here.
		{"workspace", "/workspace", 64, 128, codecell.Limits{Workspace: 64 << 20}},
		// /tmp and /dev/shm have fixed sizes (128 and 64 MiB); their pages
		// count toward the memory limit, which stays above them.
		{"tmp", "/tmp", 128, 200, codecell.Limits{Memory: 512 << 20}},
		{"dev-shm", "/dev/shm", 64, 200, codecell.Limits{Memory: 512 << 20}},
	} {
		t.Run(c.name, func(t *testing.T) {
			hostPaths := []string{os.TempDir(), "/dev/shm"}
			before := map[string]int64{}
			for _, p := range hostPaths {
				before[p] = hostFree(t, p)
			}
			c.limits.Timeout = 30 * time.Second
			m := marker("fill")
			res := run(t, codecell.Exec{Code: fillProgram, Limits: c.limits, Env: map[string]string{"DIR": c.dir, "CAP": strconv.FormatInt(c.cap, 10), "MARK": m}})
			var v struct {
				Written int64 `json:"written"`
				Errno   *int  `json:"errno"`
			}
			if res.Status != codecell.StatusSuccess || json.Unmarshal(res.Value, &v) != nil {
				t.Fatalf("the fill program failed: %s", describe(res))
			}
			if v.Errno != nil {
				t.Logf("wrote %d MiB into %s, then errno %d", v.Written>>20, c.dir, *v.Errno)
			}
			if v.Errno == nil || *v.Errno != int(syscall.ENOSPC) {
				t.Errorf("wrote %d MiB and stopped with errno %v, want ENOSPC (%d)", v.Written>>20, v.Errno, syscall.ENOSPC)
			}
			if v.Written > c.size<<20 {
				t.Errorf("wrote %d MiB into a %d MiB filesystem", v.Written>>20, c.size)
			}
			for _, p := range hostPaths {
				// Writes that reached the host would have taken all the
				// program wrote. Half of it is slack for what else on the
				// machine writes there meanwhile (other tests, the engine's
				// own temporary directories, logs).
				if drop := before[p] - hostFree(t, p); drop > max(8<<20, v.Written/2) {
					t.Errorf("the host's free space on %s dropped by %d MiB while the program wrote %d MiB", p, drop>>20, v.Written>>20)
				}
			}
			hostAbsent(t, "/tmp/fill-"+m)
			hostAbsent(t, "/dev/shm/fill-"+m)
		})
	}
}

// floodProgram writes 200 MB to stdout and 200 MB to stderr.
const floodProgram = `
import sys
block = (b'x' * 1023 + b'\n') * 1024
for i in range(200):
    sys.stdout.buffer.write(block)
sys.stdout.flush()
for i in range(200):
    sys.stderr.buffer.write(block)
sys.stderr.flush()
print('flood done', flush=True)
`

// heapInUse returns this process's heap in use after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// attackOutputFlood runs alone (not parallel): it measures this process's
// heap.
func attackOutputFlood(t *testing.T) {
	before := heapInUse()
	stop := make(chan struct{})
	peak := make(chan uint64, 1)
	go func() {
		var max uint64
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			max = maxU(max, ms.HeapInuse)
			select {
			case <-stop:
				peak <- max
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	start := time.Now()
	res := run(t, codecell.Exec{Code: floodProgram, Limits: codecell.Limits{Timeout: 90 * time.Second}})
	close(stop)
	max := <-peak
	after := heapInUse()
	t.Logf("%v; heap in use: %d MiB before, %d MiB at most during, %d MiB after", time.Since(start), before>>20, max>>20, after>>20)
	if res.Status != codecell.StatusSuccess {
		t.Errorf("status %s, want success: %s", res.Status, describe(res))
	}
	if !res.StdoutTruncated || !res.StderrTruncated {
		t.Errorf("truncated flags: stdout %v, stderr %v; want both set", res.StdoutTruncated, res.StderrTruncated)
	}
	if len(res.Stdout) > 1<<20 || len(res.Stderr) > 1<<20 {
		t.Errorf("kept %d bytes of stdout and %d of stderr", len(res.Stdout), len(res.Stderr))
	}
	if !strings.Contains(res.Stdout, "flood done") {
		t.Errorf("the tail of stdout is not kept: the program's last line is missing")
	}
	if after > before+50<<20 {
		t.Errorf("the heap grew from %d MiB to %d MiB", before>>20, after>>20)
	}
	// Between collections garbage accumulates; even so the heap must not
	// approach the 400 MB that went through it.
	if max > before+100<<20 {
		t.Errorf("the heap reached %d MiB during the flood (from %d MiB)", max>>20, before>>20)
	}
}

func maxU(a, b uint64) uint64 {
	if a > b {
		return a
	}
	return b
}
