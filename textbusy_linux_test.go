//go:build linux

package codecell

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
)

// An executable written while this process forks other ones (a sandbox's
// init among them, which waits between its fork and its exec for its user
// namespace's mappings) can be executed at once: no forked child holds it
// open for writing.
func TestWriteExecutableWhileForking(t *testing.T) {
	testWriteWhileForking(t, writeExecutable)
}

func testWriteWhileForking(t *testing.T, write func(string, []byte) error) {
	t.Helper()
	attr := &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}
	if err := (&exec.Cmd{Path: "/bin/true", SysProcAttr: attr}).Run(); err != nil {
		attr = nil // no user namespaces here: plain forks
	}
	stop := make(chan struct{})
	var forking sync.WaitGroup
	for range 2 {
		forking.Add(1)
		go func() {
			defer forking.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				_ = (&exec.Cmd{Path: "/bin/true", SysProcAttr: attr}).Run()
			}
		}()
	}
	defer func() {
		close(stop)
		forking.Wait()
	}()
	dir := t.TempDir()
	for i := range 400 {
		p := filepath.Join(dir, "x"+strconv.Itoa(i))
		if err := write(p, []byte("#!/bin/sh\nexit 0\n")); err != nil {
			t.Fatal(err)
		}
		if err := exec.Command(p).Run(); err != nil {
			if errors.Is(err, syscall.ETXTBSY) {
				t.Fatalf("run %d: %v", i, err)
			}
			t.Fatal(err)
		}
	}
}
