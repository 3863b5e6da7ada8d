//go:build linux

package attack_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codecell-dev/codecell"
)

// symlinkProgram plays with links in the workspace (its working
// directory), driven by $ACTION.
const symlinkProgram = `
action = os.environ['ACTION']
if action == 'make-links':
    # Links to the host's files, for the host to bring back.
    for name, target in json.loads(os.environ['LINKS']).items():
        R['symlink/' + name] = attempt(lambda: os.symlink(target, name))
    # A file the caller gave, replaced by a link to the canary.
    R['replace-file'] = attempt(lambda: (os.remove('data.txt'), os.symlink(os.environ['CANARY'], 'data.txt')) and None)
    R['write-through'] = attempt(lambda: open('link-canary', 'w').write('overwritten'))
elif action == 'read-links':
    for name in json.loads(os.environ['NAMES']):
        def leak():
            if os.path.isdir(name):
                return 'dir:' + ','.join(os.listdir(name))
            data = read_all(name)
            sys.stdout.write(data.decode(errors='replace')[:200] + '\n')
            return 'len=%d' % len(data)
        R['read/' + name] = attempt(leak)
elif action == 'write-dangling':
    for name in json.loads(os.environ['NAMES']):
        def write():
            if not os.path.islink(name):
                os.symlink(os.environ['TARGET'], name)
            with open(name, 'w') as f:
                f.write(os.environ['MARK'])
        R['write/' + name] = attempt(write)
elif action == 'replace-dir-link':
    def swap():
        os.remove('sub')
        os.mkdir('sub')
        with open('sub/' + os.environ['MARK'], 'w') as f:
            f.write(os.environ['MARK'])
    R['swap'] = attempt(swap)
elif action == 'special-modes':
    def suid():
        with open('suid', 'w') as f:
            f.write('#!/bin/sh\nid\n')
        os.chmod('suid', 0o6755)
        return oct(os.stat('suid').st_mode)
    R['suid'] = attempt(suid)
    R['sticky-dir'] = attempt(lambda: (os.mkdir('sticky'), os.chmod('sticky', 0o3777)) and None)
    R['fifo'] = attempt(lambda: os.mkfifo('fifo'))
    R['fifo-over-file'] = attempt(lambda: (os.remove('data.txt'), os.mkfifo('data.txt')) and None)
`

// hostWorkspace makes a caller's workspace directory on the host.
func hostWorkspace(t *testing.T, files map[string]string) string {
	t.Helper()
	ws := hostTempDir(t)
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return ws
}

func attackSymlinks(t *testing.T) {
	t.Parallel()

	// (a) Links the program makes come back to the caller's directory as
	// links, and are listed with their targets, never followed.
	t.Run("program-links-copied-back", func(t *testing.T) {
		t.Parallel()
		c := newCanary(t, filepath.Join(hostTempDir(t), "canary"))
		ws := hostWorkspace(t, map[string]string{"data.txt": "caller's data\n"})
		rel, _ := filepath.Rel(ws, c.Path)
		links := map[string]string{
			"link-passwd":     "/etc/passwd",
			"link-root":       "/",
			"link-canary":     c.Path,
			"link-canary-rel": rel,
		}
		env := map[string]string{"ACTION": "make-links", "LINKS": mustJSON(links), "CANARY": c.Path}
		r, res := probes(t, codecell.Exec{Workspace: ws, Env: env}, symlinkProgram)
		links["data.txt"] = c.Path
		for name, target := range links {
			t.Run(name, func(t *testing.T) {
				if name != "data.txt" {
					expectOK(t, r, "symlink/"+name)
				}
				got, err := os.Readlink(filepath.Join(ws, name))
				if err != nil || got != target {
					t.Errorf("the host's %s is not the link to %s: %q, %v", name, target, got, err)
				}
				var listed bool
				for _, f := range res.Files {
					if f.Path == name {
						listed = true
						if f.Symlink != target || f.SHA256 != "" {
							t.Errorf("Result.Files lists %s as %+v; want the link's target and no hash", name, f)
						}
					}
				}
				if !listed {
					t.Errorf("Result.Files does not list %s: %+v", name, res.Files)
				}
			})
		}
		t.Run("write-through-link", func(t *testing.T) {
			expectRefused(t, r, "write-through")
			c.unchanged(t)
		})
		noSecret(t, res, c.Token)
	})

	// (b) A link in the caller's workspace that points out of it does not
	// lead the program to the host file.
	readLinks := func(t *testing.T, tier string) (map[string]string, *codecell.Result, canary) {
		dir := hostTempDir(t)
		c := newCanary(t, filepath.Join(dir, "canary"))
		ws := filepath.Join(dir, "ws")
		if err := os.Mkdir(ws, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, target := range map[string]string{"escape": c.Path, "escape-rel": "../canary", "escape-dir": dir} {
			if err := os.Symlink(target, filepath.Join(ws, name)); err != nil {
				t.Fatal(err)
			}
		}
		env := map[string]string{"ACTION": "read-links", "NAMES": mustJSON([]string{"escape", "escape-rel", "escape-dir"})}
		r, res := probes(t, codecell.Exec{Tier: tier, Workspace: ws, Env: env}, symlinkProgram)
		return r, res, c
	}
	t.Run("caller-link-out-of-workspace", func(t *testing.T) {
		t.Parallel()
		t.Run("sandbox", func(t *testing.T) {
			t.Parallel()
			r, res, c := readLinks(t, "")
			for _, name := range []string{"escape", "escape-rel", "escape-dir"} {
				t.Run(name, func(t *testing.T) { expectRefused(t, r, "read/"+name) })
			}
			noSecret(t, res, c.Token)
			c.unchanged(t)
		})
		t.Run("local-control", func(t *testing.T) {
			t.Parallel()
			r, res, c := readLinks(t, "local")
			for _, name := range []string{"escape", "escape-rel"} {
				expectOK(t, r, "read/"+name)
			}
			if !strings.Contains(res.Stdout, c.Token) {
				t.Errorf("local control: reading through the link did not show the canary: the check would miss a leak")
			}
		})
	})

	// (c) Writing through a link to an absolute host path does not create
	// that path, whether the program made the link or the caller did.
	writeDangling := func(t *testing.T, tier string) (map[string]string, string) {
		dir := hostTempDir(t)
		target := filepath.Join(dir, marker("dangling"))
		ws := hostWorkspace(t, nil)
		if err := os.Symlink(target, filepath.Join(ws, "caller-dangling")); err != nil {
			t.Fatal(err)
		}
		env := map[string]string{"ACTION": "write-dangling", "NAMES": mustJSON([]string{"caller-dangling", "program-dangling"}),
			"TARGET": target, "MARK": filepath.Base(target)}
		r, _ := probes(t, codecell.Exec{Tier: tier, Workspace: ws, Env: env}, symlinkProgram)
		return r, target
	}
	t.Run("write-through-dangling-link", func(t *testing.T) {
		t.Parallel()
		t.Run("sandbox", func(t *testing.T) {
			t.Parallel()
			r, target := writeDangling(t, "")
			expectRefused(t, r, "write/caller-dangling")
			expectRefused(t, r, "write/program-dangling")
			hostAbsent(t, target)
		})
		t.Run("local-control", func(t *testing.T) {
			t.Parallel()
			r, target := writeDangling(t, "local")
			expectOK(t, r, "write/caller-dangling")
			if _, err := os.Stat(target); err != nil {
				t.Errorf("local control: writing through the link did not create %s (%v): the host check would miss it", target, err)
			}
		})
	})

	// (d) The caller's link to a host directory, replaced inside by a real
	// directory with a file in it: bringing the file back must not follow
	// the caller's link out of the workspace.
	t.Run("replaced-dir-link-copy-back", func(t *testing.T) {
		t.Parallel()
		outside := hostTempDir(t)
		ws := hostWorkspace(t, nil)
		if err := os.Symlink(outside, filepath.Join(ws, "sub")); err != nil {
			t.Fatal(err)
		}
		m := marker("swap")
		r, res := probes(t, codecell.Exec{Workspace: ws, Env: map[string]string{"ACTION": "replace-dir-link", "MARK": m}}, symlinkProgram)
		expectOK(t, r, "swap")
		hostAbsent(t, filepath.Join(outside, m))
		t.Logf("host workspace after: files %+v, warnings %q", res.Files, res.Warnings)
	})

	// (e) Special modes and files: no setuid or setgid file (which the
	// host would own) and no FIFO (which would block a reader) comes back.
	t.Run("special-modes-copy-back", func(t *testing.T) {
		t.Parallel()
		ws := hostWorkspace(t, map[string]string{"data.txt": "caller's data\n"})
		start := time.Now()
		r, res := probes(t, codecell.Exec{Workspace: ws, Env: map[string]string{"ACTION": "special-modes"}}, symlinkProgram)
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("the run took %v: a FIFO blocked the host", d)
		}
		expectOK(t, r, "suid")
		expectOK(t, r, "fifo")
		filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			info, err := os.Lstat(p)
			if err != nil {
				return nil
			}
			if info.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
				t.Errorf("the host's %s has mode %v (owner uid %d)", p, info.Mode(), ownerUID(info))
			}
			if info.Mode()&fs.ModeNamedPipe != 0 {
				t.Errorf("the host's %s is a FIFO", p)
			}
			return nil
		})
		t.Logf("files %+v, warnings %q", res.Files, res.Warnings)
	})
}

func ownerUID(info fs.FileInfo) int {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}
