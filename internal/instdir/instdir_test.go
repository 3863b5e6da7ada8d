//go:build unix

package instdir

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary re-executed with helperEnv set to a base claims a
// directory with the prefix "srv-", prints its path and waits to be killed.
const helperEnv = "CODECELL_INSTDIR_TEST_HELPER"

func TestMain(m *testing.M) {
	if base := os.Getenv(helperEnv); base != "" {
		d, _, err := Claim(base, "srv-")
		if d == nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(2)
		}
		os.Stdout.WriteString(d.Path + "\n")
		io.Copy(io.Discard, os.Stdin) // until killed, or the test ends
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func claim(t *testing.T, base, prefix string) (*Dir, []string) {
	t.Helper()
	d, removed, err := Claim(base, prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Release() })
	return d, removed
}

func isDir(path string) bool {
	info, err := os.Lstat(path)
	return err == nil && info.IsDir()
}

func TestClaimTwice(t *testing.T) {
	base := filepath.Join(t.TempDir(), "inst")
	a, removed := claim(t, base, "srv-")
	if len(removed) != 0 {
		t.Errorf("first claim removed %q", removed)
	}
	if info, err := os.Stat(base); err != nil || info.Mode().Perm() != 0o700 {
		t.Errorf("base: %v, %v", info.Mode(), err)
	}
	b, removed := claim(t, base, "srv-")
	if len(removed) != 0 {
		t.Errorf("second claim removed %q (the first is alive)", removed)
	}
	if a.Path == b.Path {
		t.Fatalf("both claims got %s", a.Path)
	}
	for _, d := range []*Dir{a, b} {
		name := filepath.Base(d.Path)
		if ok, tmp := leftover(name, "srv-"); !ok || tmp || filepath.Dir(d.Path) != base {
			t.Errorf("unexpected name %s", d.Path)
		}
		if info, err := os.Lstat(d.Path); err != nil || !info.IsDir() || info.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v, %v", d.Path, info.Mode(), err)
		}
		if !exists(filepath.Join(d.Path, lockName)) {
			t.Errorf("%s has no lock file", d.Path)
		}
	}
	os.WriteFile(filepath.Join(a.Path, "data"), []byte("x"), 0o600)
	if err := a.Release(); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(); err != nil {
		t.Errorf("second Release: %v", err)
	}
	if exists(a.Path) || !isDir(b.Path) {
		t.Errorf("after releasing a: a exists %v, b exists %v", exists(a.Path), isDir(b.Path))
	}
	entries, _ := os.ReadDir(base)
	if len(entries) != 1 {
		t.Errorf("base holds %d entries, want b's only", len(entries))
	}
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// A process that claims a directory and is killed with SIGKILL leaves it;
// a Claim while it lives leaves it alone, the next one removes it.
func TestClaimAfterKill(t *testing.T) {
	base := filepath.Join(t.TempDir(), "inst")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+base)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); stdin.Close(); cmd.Wait() })
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		lines <- strings.TrimSpace(line)
	}()
	var theirs string
	select {
	case theirs = <-lines:
	case <-time.After(30 * time.Second):
		t.Fatal("the helper did not claim a directory")
	}
	if !isDir(theirs) {
		t.Fatalf("the helper's directory %q does not exist", theirs)
	}
	os.WriteFile(filepath.Join(theirs, "state"), []byte("x"), 0o600)

	mine, removed := claim(t, base, "srv-")
	if len(removed) != 0 || !isDir(theirs) {
		t.Fatalf("a claim removed %q while their owner lives", removed)
	}
	mine.Release()

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if !isDir(theirs) {
		t.Fatal("the killed helper's directory is gone before any Claim: the test proves nothing")
	}
	_, removed = claim(t, base, "srv-")
	if !slices.Equal(removed, []string{theirs}) {
		t.Errorf("removed %q, want [%s]", removed, theirs)
	}
	if exists(theirs) {
		t.Errorf("%s is still there", theirs)
	}
}

// deadLeftover makes what a killed owner leaves: a directory under its final
// name with a lock file that no one holds.
func deadLeftover(t *testing.T, base, name string) string {
	t.Helper()
	if err := os.MkdirAll(base, 0o700); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(base, name)
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, lockName), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Links, whether named like a leftover or inside one, are removed as links:
// what they point to survives.
func TestSymlinksNotFollowed(t *testing.T) {
	tmp := t.TempDir()
	outside := filepath.Join(tmp, "outside")
	os.Mkdir(outside, 0o755)
	marker := filepath.Join(outside, "marker")
	if err := os.WriteFile(marker, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(tmp, "inst")
	os.Mkdir(base, 0o700)
	link := filepath.Join(base, "srv-4242-0123456789ab")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	dead := deadLeftover(t, base, "srv-4343-0123456789ab")
	os.Symlink(outside, filepath.Join(dead, "to-outside"))
	os.Symlink(marker, filepath.Join(dead, "to-marker"))
	os.Mkdir(filepath.Join(dead, "sub"), 0o700)
	os.Symlink(outside, filepath.Join(dead, "sub", "deeper"))

	_, removed := claim(t, base, "srv-")
	if !slices.Equal(removed, []string{dead}) {
		t.Errorf("removed %q, want [%s]", removed, dead)
	}
	if exists(dead) {
		t.Errorf("%s is still there", dead)
	}
	if data, err := os.ReadFile(marker); err != nil || string(data) != "keep" {
		t.Fatalf("the marker outside: %q, %v", data, err)
	}
	if target, err := os.Readlink(link); err != nil || target != outside {
		t.Errorf("the link named like a leftover was changed: %q, %v", target, err)
	}
}

// A leftover whose contents keep even their owner out (0000 directories,
// a 0500 directory, 0000 files) is still removed. Run as root, the kernel's
// permission checks would not apply, so the unprivileged case is also run
// on a thread whose filesystem uid is nobody's.
func TestOddPermissions(t *testing.T) {
	mkLeftover := func(t *testing.T, base string) string {
		dead := deadLeftover(t, base, "srv-77-aaaaaaaaaaaa")
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		must(os.MkdirAll(filepath.Join(dead, "closed", "inner"), 0o700))
		must(os.WriteFile(filepath.Join(dead, "closed", "inner", "f"), []byte("x"), 0o600))
		must(os.WriteFile(filepath.Join(dead, "closed", "f"), []byte("x"), 0o000))
		must(os.Chmod(filepath.Join(dead, "closed", "inner"), 0o000))
		must(os.Chmod(filepath.Join(dead, "closed"), 0o000))
		must(os.MkdirAll(filepath.Join(dead, "readonly", "x"), 0o700))
		must(os.WriteFile(filepath.Join(dead, "readonly", "g"), nil, 0o400))
		must(os.Chmod(filepath.Join(dead, "readonly"), 0o500))
		must(os.Mkdir(filepath.Join(dead, "searchonly"), 0o700))
		must(os.WriteFile(filepath.Join(dead, "searchonly", "h"), nil, 0o600))
		must(os.Chmod(filepath.Join(dead, "searchonly"), 0o100))
		must(syscall.Mkfifo(filepath.Join(dead, "fifo"), 0o000))
		return dead
	}
	t.Run("claim", func(t *testing.T) {
		base := filepath.Join(t.TempDir(), "inst")
		dead := mkLeftover(t, base)
		_, removed := claim(t, base, "srv-")
		if !slices.Equal(removed, []string{dead}) || exists(dead) {
			t.Errorf("removed %q, %s exists: %v", removed, dead, exists(dead))
		}
	})
	t.Run("unprivileged", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("the claim subtest ran unprivileged already")
		}
		oddPermsUnprivileged(t, mkLeftover)
	})
}

func TestRefusesBase(t *testing.T) {
	tmp := t.TempDir()
	real := filepath.Join(tmp, "real")
	os.Mkdir(real, 0o700)
	link := filepath.Join(tmp, "link")
	os.Symlink(real, link)
	if _, _, err := Claim(link, "srv-"); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("a linked base: %v", err)
	}
	open := filepath.Join(tmp, "open")
	os.Mkdir(open, 0o700)
	os.Chmod(open, 0o777)
	if _, _, err := Claim(open, "srv-"); err == nil || !strings.Contains(err.Error(), "writable by group or others") {
		t.Errorf("a world-writable base: %v", err)
	}
	if os.Geteuid() == 0 {
		other := filepath.Join(tmp, "other")
		os.Mkdir(other, 0o700)
		os.Chown(other, 65534, 65534)
		if _, _, err := Claim(other, "srv-"); err == nil || !strings.Contains(err.Error(), "belongs to uid 65534") {
			t.Errorf("another user's base: %v", err)
		}
	}
	for _, p := range []string{"", ".x", "a/b"} {
		if _, _, err := Claim(real, p); err == nil {
			t.Errorf("prefix %q accepted", p)
		}
	}
	entries, _ := os.ReadDir(real)
	if len(entries) != 0 {
		t.Errorf("refused claims left %d entries", len(entries))
	}
}

// Only names Claim makes are touched, and only when they are directories of
// this euid: a user's own "srv-data" directory with no lock stays.
func TestLeavesOthersAlone(t *testing.T) {
	base := filepath.Join(t.TempDir(), "inst")
	os.MkdirAll(filepath.Join(base, "srv-data"), 0o700)
	os.MkdirAll(filepath.Join(base, "other-1-0123456789ab"), 0o700)
	os.WriteFile(filepath.Join(base, "srv-5-0123456789ab"), []byte("a file"), 0o600)
	young := filepath.Join(base, ".srv-6-0123456789ab.tmp") // an owner between mkdir and rename
	os.Mkdir(young, 0o700)
	oldTmp := filepath.Join(base, ".srv-7-0123456789ab.tmp")
	os.Mkdir(oldTmp, 0o700)
	past := time.Now().Add(-time.Hour)
	os.Chtimes(oldTmp, past, past)
	noLock := filepath.Join(base, "srv-8-0123456789ab") // its owner died while releasing it
	os.Mkdir(noLock, 0o700)

	_, removed := claim(t, base, "srv-")
	slices.Sort(removed)
	if want := []string{oldTmp, noLock}; !slices.Equal(removed, want) {
		t.Errorf("removed %q, want %q", removed, want)
	}
	for _, p := range []string{"srv-data", "other-1-0123456789ab", "srv-5-0123456789ab", filepath.Base(young)} {
		if !exists(filepath.Join(base, p)) {
			t.Errorf("%s was removed", p)
		}
	}
}

// A Dir that is dropped still holds its directory until the process ends:
// collecting it must not release the lock.
func TestDroppedDirStaysHeld(t *testing.T) {
	base := filepath.Join(t.TempDir(), "inst")
	d, _, err := Claim(base, "proc-")
	if err != nil {
		t.Fatal(err)
	}
	path := d.Path
	d = nil
	for i := 0; i < 5; i++ {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	other, removed, err := Claim(base, "proc-")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release()
	if len(removed) != 0 {
		t.Fatalf("a claim removed %v, held by a dropped Dir of a live process", removed)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the dropped Dir's directory: %v", err)
	}
}

// TestClaimFirstSkipsARefusedBase: a base that Claim refuses (here a
// symbolic link, as another user could leave in a shared directory) is
// passed over for the next; only when every base refuses is there an
// error, naming each.
func TestClaimFirstSkipsARefusedBase(t *testing.T) {
	dir := t.TempDir()
	link, good := filepath.Join(dir, "link"), filepath.Join(dir, "good")
	if err := os.Symlink(t.TempDir(), link); err != nil {
		t.Fatal(err)
	}
	d, _, err := ClaimFirst([]string{link, good}, "srv-")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Release()
	if filepath.Dir(d.Path) != good {
		t.Errorf("claimed %s, want one under %s", d.Path, good)
	}
	if _, _, err := ClaimFirst([]string{link, link}, "srv-"); err == nil || !strings.Contains(err.Error(), link) {
		t.Errorf("every base refused, and the error is %v", err)
	}
}

// TestReleaseProcess: the process's own directory is removed, with what it
// holds, by ReleaseProcess, and Process gives none after it.
func TestReleaseProcess(t *testing.T) {
	dir, err := Process()
	if err != nil && dir == "" {
		t.Skipf("no process directory on this host: %v", err)
	}
	if again, _ := Process(); again != dir {
		t.Fatalf("Process gave %s, then %s", dir, again)
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := ReleaseProcess(); err != nil {
		t.Fatal(err)
	}
	if exists(dir) {
		t.Errorf("%s is left after ReleaseProcess", dir)
	}
	if after, err := Process(); after != "" || err == nil {
		t.Errorf("Process after ReleaseProcess: %q, %v; want no directory and an error", after, err)
	}
	if err := ReleaseProcess(); err != nil {
		t.Errorf("a second ReleaseProcess: %v", err)
	}
}
