package docker

import (
	"bufio"
	"bytes"
	"os"
	"path"
	"strconv"
	"strings"
)

// cgroupReport is what the launcher reads of its container's cgroup once
// the program has ended, for the host: the engine's own word on an
// out-of-memory kill is missing on some engines (Podman on cgroup v1 does
// not report one), and the limits it names are those it was asked for,
// not those the kernel holds. A value of -1 is one the launcher could not
// read.
type cgroupReport struct {
	Version     string `json:"version"`      // "v1" or "v2"
	OOMKills    int64  `json:"oom_kills"`    // the kernel's out-of-memory kills in the container
	MemoryLimit int64  `json:"memory_limit"` // bytes; noLimit: none
	Swap        int64  `json:"swap"`         // bytes of swap beyond the memory limit; noLimit: any
	MemoryPeak  int64  `json:"memory_peak"`  // bytes
	PidsLimit   int64  `json:"pids_limit"`   // noLimit: none
}

// readCgroup reads the cgroup of this process (the container's) under
// root (/sys/fs/cgroup), as /proc/self/cgroup (selfCgroup) names it, or
// returns nil when it finds no memory controller there.
func readCgroup(root string, selfCgroup []byte) *cgroupReport {
	var v1Memory, v1Pids, v2 string
	haveV2 := false
	sc := bufio.NewScanner(bytes.NewReader(selfCgroup))
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			v2, haveV2 = parts[2], true
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			switch c {
			case "memory":
				v1Memory = parts[2]
			case "pids":
				v1Pids = parts[2]
			}
		}
	}
	// The container sees its own cgroup at the hierarchy's root (a cgroup
	// namespace, or the runtime's bind mount), or under the path the
	// kernel names (the host's hierarchy): the first that has the files.
	find := func(dir, rel, file string) string {
		if p := path.Join(dir, path.Clean("/"+rel)); fileExists(path.Join(p, file)) {
			return p
		}
		if fileExists(path.Join(dir, file)) {
			return dir
		}
		return ""
	}
	if v1Memory != "" {
		mem := find(path.Join(root, "memory"), v1Memory, "memory.oom_control")
		if mem == "" {
			return nil
		}
		r := &cgroupReport{Version: "v1",
			OOMKills:    keyed(path.Join(mem, "memory.oom_control"), "oom_kill"),
			MemoryLimit: v1Limit(path.Join(mem, "memory.limit_in_bytes")),
			MemoryPeak:  number(path.Join(mem, "memory.max_usage_in_bytes")),
			Swap:        -1,
			PidsLimit:   -1,
		}
		// v1 limits memory and swap together (memsw), when the kernel
		// counts swap.
		if memsw := v1Limit(path.Join(mem, "memory.memsw.limit_in_bytes")); memsw == noLimit {
			r.Swap = noLimit
		} else if memsw > 0 && r.MemoryLimit > 0 && memsw >= r.MemoryLimit {
			r.Swap = memsw - r.MemoryLimit
		}
		if pids := find(path.Join(root, "pids"), v1Pids, "pids.max"); pids != "" {
			r.PidsLimit = maxNumber(path.Join(pids, "pids.max"))
		}
		return r
	}
	if !haveV2 {
		return nil
	}
	dir := find(root, v2, "memory.events")
	if dir == "" {
		return nil
	}
	r := &cgroupReport{Version: "v2",
		OOMKills:    keyed(path.Join(dir, "memory.events"), "oom_kill"),
		MemoryLimit: maxNumber(path.Join(dir, "memory.max")),
		Swap:        maxNumber(path.Join(dir, "memory.swap.max")),
		MemoryPeak:  number(path.Join(dir, "memory.peak")),
		PidsLimit:   maxNumber(path.Join(dir, "pids.max")),
	}
	return r
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// number reads a file holding one number, or returns -1.
func number(p string) int64 {
	b, err := os.ReadFile(p)
	if err != nil {
		return -1
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// noLimit is a limit the kernel does not set.
const noLimit = -2

// maxNumber reads a v2 limit: a number, or "max" (noLimit).
func maxNumber(p string) int64 {
	b, err := os.ReadFile(p)
	if err != nil {
		return -1
	}
	if strings.TrimSpace(string(b)) == "max" {
		return noLimit
	}
	return number(p)
}

// v1Limit reads a v1 limit: the kernel writes "no limit" as a number near
// 2^63, rounded down to a page.
func v1Limit(p string) int64 {
	n := number(p)
	if n >= 1<<62 {
		return noLimit
	}
	return n
}

// keyed reads the value of key in a file of "key value" lines, or -1.
func keyed(p, key string) int64 {
	b, err := os.ReadFile(p)
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if ok && k == key {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil || n < 0 {
				return -1
			}
			return n
		}
	}
	return -1
}
