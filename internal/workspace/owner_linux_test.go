//go:build linux

package workspace

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

var nobody = Owner{65534, 65534}

// creatorDirs makes a source readable by root alone and a destination
// only nobody may write, for the tests of a creator.
func creatorDirs(t *testing.T) (src, dst string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("creating files as another user needs root")
	}
	base := t.TempDir()
	must(t, os.Chmod(filepath.Dir(base), 0o755))
	must(t, os.Chmod(base, 0o755))
	src, dst = filepath.Join(base, "src"), filepath.Join(base, "dst")
	must(t, os.Mkdir(src, 0o700))
	must(t, os.Mkdir(dst, 0o700))
	must(t, os.Chown(dst, nobody.UID, nobody.GID))
	return src, dst
}

// owned fails unless p (not what it links to) belongs to o.
func owned(t *testing.T, p string, o Owner) {
	t.Helper()
	var st unix.Stat_t
	must(t, unix.Lstat(p, &st))
	if int(st.Uid) != o.UID || int(st.Gid) != o.GID {
		t.Errorf("%s belongs to %d:%d, want %d:%d", p, st.Uid, st.Gid, o.UID, o.GID)
	}
}

func mtime(t *testing.T, p string) time.Time {
	t.Helper()
	info, err := os.Lstat(p)
	must(t, err)
	return info.ModTime()
}

// What CopyTree makes for a creator belongs to it, with the modes and
// times of the source, directories' included; the sources are read with
// the caller's identity.
func TestCopyTreeAsCreator(t *testing.T) {
	src, dst := creatorDirs(t)
	old := time.Date(2010, 1, 2, 3, 4, 5, 6, time.UTC)
	mustWrite(t, filepath.Join(src, "dir/secret.txt"), "root's", 0o600)
	mustSymlink(t, "dir/secret.txt", filepath.Join(src, "link"))
	must(t, os.Chmod(filepath.Join(src, "dir"), 0o750))
	for _, p := range []string{"dir/secret.txt", "dir"} {
		must(t, os.Chtimes(filepath.Join(src, p), old, old))
	}

	if err := CopyTree(src, dst, nobody); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{".": "dir", "dir": "dir", "dir/secret.txt": "root's", "link": "-> dir/secret.txt"}
	if got := snapshot(t, dst); !reflect.DeepEqual(got, want) {
		t.Errorf("copied %v, want %v", got, want)
	}
	for p, mode := range map[string]os.FileMode{"dir": os.ModeDir | 0o750, "dir/secret.txt": 0o600} {
		full := filepath.Join(dst, p)
		owned(t, full, nobody)
		if info, err := os.Lstat(full); err != nil || info.Mode() != mode {
			t.Errorf("%s: %v, want %v (%v)", p, info.Mode(), mode, err)
		}
		if got := mtime(t, full); !got.Equal(old) {
			t.Errorf("%s: modified %v, want %v", p, got, old)
		}
	}
	owned(t, filepath.Join(dst, "link"), nobody)
}

// Apply for an owner writes as the owner, makes missing directories its
// own, and keeps the source's mode and time.
func TestApplyAsOwner(t *testing.T) {
	from, to := creatorDirs(t)
	old := time.Date(2010, 1, 2, 3, 4, 5, 6, time.UTC)
	mustWrite(t, filepath.Join(from, "sub/new.txt"), "root's", 0o640)
	must(t, os.Chtimes(filepath.Join(from, "sub/new.txt"), old, old))
	changes := []Change{
		{Path: "sub/new.txt", Kind: "created"},
		{Path: "sub/link", Kind: "created", Symlink: "new.txt"},
	}
	if errs := Apply(changes, from, to, nobody); len(errs) > 0 {
		t.Fatal(errs)
	}
	want := map[string]string{".": "dir", "sub": "dir", "sub/new.txt": "root's", "sub/link": "-> new.txt"}
	if got := snapshot(t, to); !reflect.DeepEqual(got, want) {
		t.Errorf("applied %v, want %v", got, want)
	}
	for _, p := range []string{"sub", "sub/new.txt", "sub/link"} {
		owned(t, filepath.Join(to, p), nobody)
	}
	if info, err := os.Lstat(filepath.Join(to, "sub/new.txt")); err != nil || info.Mode() != 0o640 || !info.ModTime().Equal(old) {
		t.Errorf("sub/new.txt: %v, %v (%v)", info.Mode(), info.ModTime(), err)
	}
	noTempFiles(t, to)
}
