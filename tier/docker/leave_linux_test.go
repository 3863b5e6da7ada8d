//go:build linux

package docker

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestLeave: the launcher's last look leaves out of the workspace the
// fifos, sockets and the files that would take the read-back past its
// budget, in the order of a walk by name, a directory shut to its owner
// included (and shut again after), and reports them; the rest stays.
func TestLeave(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, size int64) {
		t.Helper()
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString("data"); err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(size); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	write("a.txt", 4)
	write("b.bin", 100<<30)
	write("d/c.txt", 1000)
	write("d/holes.bin", 2000)
	write("z.txt", 100)
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Chmod(filepath.Join(dir, "d"), 0); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(filepath.Join(dir, "d"), 0o755)
	rep := leave(dir, 1200)
	if rep == nil || rep.NFiles != 2 || len(rep.Files) != 2 || rep.NSpecial != 1 || len(rep.Specials) != 1 || string(rep.Specials[0]) != "fifo" {
		t.Fatalf("report %+v", rep)
	}
	if f := rep.Files[0]; string(f.Name) != "b.bin" || f.Size != 100<<30 || f.Data > 64<<10 {
		t.Errorf("first left %+v", f)
	}
	if f := rep.Files[1]; string(f.Name) != "d/holes.bin" || f.Size != 2000 {
		t.Errorf("second left %+v", f)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(dir, "d"), &st); err != nil || st.Mode&0o7777 != 0 {
		t.Errorf("d's mode %o, %v", st.Mode&0o7777, err)
	}
	os.Chmod(filepath.Join(dir, "d"), 0o755)
	for _, name := range []string{"a.txt", "d/c.txt", "z.txt"} {
		if _, err := os.Lstat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for _, name := range []string{"b.bin", "d/holes.bin", "fifo"} {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			t.Errorf("%s is still there", name)
		}
	}
	// Nothing to leave: no report.
	if rep := leave(dir, 0); rep != nil {
		t.Errorf("report %+v", rep)
	}
}
