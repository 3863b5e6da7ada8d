package docker

import (
	"os"
	"path/filepath"
	"testing"
)

func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReadCgroup: the launcher finds its cgroup's counters at the
// hierarchy's root (a namespace or the runtime's bind) or under the path
// the kernel names, on v1 and v2; without them it reports nothing.
func TestReadCgroup(t *testing.T) {
	v1 := t.TempDir()
	writeTree(t, v1, map[string]string{
		"memory/memory.oom_control":          "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
		"memory/memory.limit_in_bytes":       "67108864\n",
		"memory/memory.memsw.limit_in_bytes": "67108864\n",
		"memory/memory.max_usage_in_bytes":   "67100000\n",
		"pids/pids.max":                      "22\n",
	})
	self := []byte("9:name=systemd:/libpod_parent/libpod-x\n8:pids:/libpod_parent/libpod-x\n4:memory:/libpod_parent/libpod-x\n0::/libpod_parent/libpod-x\n")
	got := readCgroup(v1, self)
	want := cgroupReport{Version: "v1", OOMKills: 2, MemoryLimit: 64 << 20, Swap: 0, MemoryPeak: 67100000, PidsLimit: 22}
	if got == nil || *got != want {
		t.Errorf("v1 at the root: %+v, want %+v", got, want)
	}

	// The host's hierarchy, seen whole: the container's own directory.
	host := t.TempDir()
	writeTree(t, host, map[string]string{
		"memory/memory.oom_control":                  "oom_kill 40\n",
		"memory/memory.limit_in_bytes":               "9223372036854771712\n",
		"memory/c1/memory.oom_control":               "oom_kill 0\n",
		"memory/c1/memory.limit_in_bytes":            "134217728\n",
		"memory/c1/memory.memsw.limit_in_bytes":      "9223372036854771712\n",
		"memory/c1/memory.max_usage_in_bytes":        "1000\n",
		"cpu,cpuacct/c1/cpu.shares":                  "1024\n",
		"pids/c1/pids.max":                           "max\n",
		"memory/c1/../../outside/memory.oom_control": "oom_kill 9\n",
	})
	got = readCgroup(host, []byte("4:memory:/c1\n3:pids:/c1\n2:cpu,cpuacct:/c1\n"))
	want = cgroupReport{Version: "v1", OOMKills: 0, MemoryLimit: 128 << 20, Swap: noLimit, MemoryPeak: 1000, PidsLimit: noLimit}
	if got == nil || *got != want {
		t.Errorf("v1 under its path: %+v, want %+v", got, want)
	}
	// A path that climbs stays beneath the hierarchy.
	if got := readCgroup(host, []byte("4:memory:/../../outside\n")); got == nil || got.OOMKills != 40 {
		t.Errorf("a climbing path: %+v", got)
	}

	v2 := t.TempDir()
	writeTree(t, v2, map[string]string{
		"memory.events":   "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\n",
		"memory.max":      "67108864\n",
		"memory.swap.max": "0\n",
		"memory.peak":     "67108000\n",
		"pids.max":        "22\n",
	})
	got = readCgroup(v2, []byte("0::/\n"))
	want = cgroupReport{Version: "v2", OOMKills: 1, MemoryLimit: 64 << 20, Swap: 0, MemoryPeak: 67108000, PidsLimit: 22}
	if got == nil || *got != want {
		t.Errorf("v2: %+v, want %+v", got, want)
	}
	// A kernel without memory.peak or a counter: -1, not 0.
	if err := os.Remove(filepath.Join(v2, "memory.peak")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(v2, "memory.events"), []byte("oom 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got = readCgroup(v2, []byte("0::/\n")); got == nil || got.MemoryPeak != -1 || got.OOMKills != -1 {
		t.Errorf("v2 without counters: %+v", got)
	}

	if got := readCgroup(t.TempDir(), []byte("0::/\n")); got != nil {
		t.Errorf("no cgroup files: %+v", got)
	}
	if got := readCgroup(v1, []byte("garbage")); got != nil {
		t.Errorf("an unreadable /proc/self/cgroup: %+v", got)
	}
}
