//go:build linux

package cgroup

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codecell-dev/codecell/internal/proc"
)

func TestOwnedID(t *testing.T) {
	id := OwnedID()
	if !validID(id) {
		t.Fatalf("OwnedID() = %q is not a valid id", id)
	}
	if alive, known := ownerAlive(id); !alive || !known {
		t.Errorf("ownerAlive(own id %q) = %v, %v", id, alive, known)
	}
	if OwnedID() == id {
		t.Error("two OwnedID() calls gave the same id")
	}
	me, _ := self()
	for _, tc := range []struct {
		name         string
		id           string
		alive, known bool
	}{
		{"no such pid", owner{me.ns, fakePid, me.start}.id(), false, true},
		{"reused pid", owner{me.ns, me.pid, me.start + 1}.id(), false, true},
		{"other pid namespace", owner{me.ns + 1, me.pid, me.start}.id(), false, false},
		{"old style", "0123456789ab", false, false},
		{"three fields", fmt.Sprintf("%x-%x-%x", me.ns, me.pid, me.start), false, false},
		{"empty field", fmt.Sprintf("%x--%x-ab", me.ns, me.start), false, false},
		{"pid 0", fmt.Sprintf("%x-0-%x-ab", me.ns, me.start), false, false},
	} {
		if alive, known := ownerAlive(tc.id); alive != tc.alive || known != tc.known {
			t.Errorf("%s: ownerAlive(%q) = %v, %v; want %v, %v", tc.name, tc.id, alive, known, tc.alive, tc.known)
		}
	}
	for _, id := range []string{"-ab", "ab-", "a-b-c-d", "ab.cd", "ab/cd"} {
		if got, want := validID(id), id[0] != '-' && !strings.ContainsAny(id, "./"); got != want {
			t.Errorf("validID(%q) = %v", id, got)
		}
	}
}

// An owner that has exited but is not yet reaped (a zombie) is dead.
func TestOwnerZombie(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skip("no sleep(1):", err)
	}
	id, err := ownedIDOf(cmd.Process.Pid)
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal(err)
	}
	if alive, known := ownerAlive(id); !alive || !known {
		t.Errorf("running owner: ownerAlive = %v, %v", alive, known)
	}
	cmd.Process.Kill()
	deadline := time.Now().Add(5 * time.Second)
	for {
		p, ok := proc.Stat(cmd.Process.Pid)
		if !ok || p.State == 'Z' || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if alive, known := ownerAlive(id); alive || !known {
		t.Errorf("zombie owner: ownerAlive = %v, %v", alive, known)
	}
	cmd.Wait()
	if alive, known := ownerAlive(id); alive || !known {
		t.Errorf("reaped owner: ownerAlive = %v, %v", alive, known)
	}
}

// On the fake v2: Recover kills and removes the groups of dead owners
// (including a child cgroup), never touches a live owner's, and applies the
// age rule to groups with no known owner.
func TestRecoverFake(t *testing.T) {
	for _, how := range []string{"Recover", "Sweep"} {
		t.Run(how, func(t *testing.T) {
			h, f := fakeHost{euid: 0, rootCtrls: "cpu memory pids", rootOn: "cpu memory pids", swap: true}.detect(t)
			me, _ := self()
			newGroup := func(id string, pids ...int) string {
				t.Helper()
				g, err := h.New(id, Limits{Processes: 8})
				if err != nil {
					t.Fatal(err)
				}
				for _, p := range pids {
					if err := g.Add(p); err != nil {
						t.Fatal(err)
					}
				}
				return g.paths[0]
			}
			old := func(dir string) {
				t.Helper()
				past := time.Now().Add(-time.Hour)
				if err := os.Chtimes(dir, past, past); err != nil {
					t.Fatal(err)
				}
			}
			dead := newGroup(owner{me.ns, fakePid, me.start}.id(), fakePid+1, fakePid+2)
			if err := f.mkdir(filepath.Join(dead, "child")); err != nil {
				t.Fatal(err)
			}
			reused := newGroup(owner{me.ns, me.pid, me.start + 7}.id())
			live := newGroup(OwnedID(), fakePid+3)
			liveEmpty := newGroup(OwnedID())
			old(liveEmpty)
			foreign := newGroup(owner{me.ns + 1, fakePid, me.start}.id())
			foreignBusy := newGroup(owner{me.ns + 1, fakePid, me.start}.id(), fakePid+4)
			old(foreignBusy)
			plainYoung := newGroup("ab12")
			plainOld := newGroup("cd34")
			old(plainOld)
			f.takeWrites()

			var r Recovered
			if how == "Recover" {
				var err error
				if r, err = h.Recover(); err != nil {
					t.Fatal(err)
				}
				if want := (Recovered{Groups: 3, Processes: 2}); r != want {
					t.Errorf("Recover() = %+v, want %+v", r, want)
				}
			} else if n := h.Sweep(time.Minute); n != 3 {
				t.Errorf("Sweep() = %d, want 3", n)
			}
			writes := f.takeWrites()
			if !slices.Contains(writes, f.rel(dead)+"/cgroup.kill=1") {
				t.Errorf("the dead owner's group was not killed; writes %q", writes)
			}
			for _, w := range writes {
				for _, dir := range []string{live, liveEmpty, foreign, foreignBusy} {
					if strings.HasPrefix(w, f.rel(dir)+"/") {
						t.Errorf("wrote to a group it must leave alone: %s", w)
					}
				}
			}
			for _, dir := range []string{dead, reused, plainOld} {
				if exists(dir) {
					t.Errorf("%s is still there", f.rel(dir))
				}
			}
			for _, dir := range []string{live, liveEmpty, foreign, foreignBusy, plainYoung} {
				if !exists(dir) {
					t.Errorf("%s was removed", f.rel(dir))
				}
			}
			if got := readPids(filepath.Join(live, "cgroup.procs")); !slices.Equal(got, []int{fakePid + 3}) {
				t.Errorf("the live group holds %v", got)
			}
		})
	}
}

// requireCgroups returns the real host when it can make groups, and skips
// the test otherwise, or fails it under CODECELL_REQUIRE_NATIVE=1.
func requireCgroups(t *testing.T) *Host {
	t.Helper()
	h := Detect()
	t.Logf("Detect: version %d, controllers %v, reason %q", h.Version, h.Controllers, h.Reason)
	if h.Version == 0 {
		if os.Getenv("CODECELL_REQUIRE_NATIVE") == "1" {
			t.Fatalf("cgroups are required (CODECELL_REQUIRE_NATIVE=1) and unusable here: %s", h.Reason)
		}
		t.Skipf("cgroups are unusable here: %s", h.Reason)
	}
	return h
}

// privateHost is h with parents of the test's own beside the shared
// "codecell" ones, so that what Recover counts is only the test's.
func privateHost(t *testing.T, h *Host) *Host {
	t.Helper()
	own := *h
	name := fmt.Sprintf("codecell-test-%016x", rand.Uint64())
	if h.Version == 2 {
		own.v2Parent = filepath.Join(filepath.Dir(h.v2Parent), name)
	} else {
		own.v1Parents = map[string]string{}
		for c, dir := range h.v1Parents {
			own.v1Parents[c] = filepath.Join(filepath.Dir(dir), name)
		}
	}
	t.Cleanup(func() {
		for _, p := range own.Parents() {
			syscall.Rmdir(p)
		}
	})
	return &own
}

// On the real host: a group whose owner was killed is emptied and removed;
// a group of this (live) process, and its process, are left alone.
func TestRecoverHost(t *testing.T) {
	h := privateHost(t, requireCgroups(t))
	start := func() *exec.Cmd {
		t.Helper()
		cmd := exec.Command("sleep", "30")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	ownerProc := start()
	deadID, err := ownedIDOf(ownerProc.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	deadG, err := h.New(deadID, Limits{Processes: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deadG.Destroy() })
	victims := []*exec.Cmd{start(), start()}
	for _, v := range victims {
		if err := deadG.Add(v.Process.Pid); err != nil {
			t.Fatal(err)
		}
	}
	liveG, err := h.New(OwnedID(), Limits{Processes: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { liveG.Destroy() })
	keeper := start()
	if err := liveG.Add(keeper.Process.Pid); err != nil {
		t.Fatal(err)
	}
	ownerProc.Process.Kill()
	ownerProc.Wait()

	r, err := h.Recover()
	if err != nil {
		t.Fatal(err)
	}
	if want := (Recovered{Groups: 1, Processes: 2}); r != want {
		t.Errorf("Recover() = %+v, want %+v", r, want)
	}
	for _, v := range victims {
		if sig := killedBy(v.Wait()); sig != syscall.SIGKILL {
			t.Errorf("victim %d ended by %v, not SIGKILL", v.Process.Pid, sig)
		}
	}
	for _, dir := range deadG.paths {
		if exists(dir) {
			t.Errorf("%s is still there", dir)
		}
	}
	for _, dir := range liveG.paths {
		if !exists(dir) {
			t.Errorf("the live owner's %s was removed", dir)
		}
	}
	if err := keeper.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the live group's process is gone: %v", err)
	}
	if got := liveG.procs(); !slices.Equal(got, []int{keeper.Process.Pid}) {
		t.Errorf("the live group holds %v", got)
	}
}
