//go:build linux

package attack_test

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/codecell-dev/codecell"
)

// readProgram tries every way it knows to a list of host files (CANARIES,
// name → path), prints the first bytes of whatever it reads (so that a leak
// shows in stdout, which the test checks), and reports per probe whether a
// token of TOKENS was in what it read. With SYSTEM=1 it also tries the
// host's secrets and init's /proc files.
const readProgram = `
canaries = json.loads(os.environ['CANARIES']) or {}
tokens = [t.encode() for t in json.loads(os.environ['TOKENS']) or []]

def leak(p):
    data = read_all(p)
    sys.stdout.write(data.decode(errors='replace')[:200] + '\n')
    return 'secret' if any(t in data for t in tokens) else 'len=%d' % len(data)

def first_success(outcomes):
    for o in outcomes:
        if o.startswith('ok'):
            return o
    return ','.join(sorted(set(outcomes))) or 'ENOENT'

pids = [d for d in os.listdir('/proc') if d.isdigit()]
for name, p in canaries.items():
    rel = p.lstrip('/')
    R[name + '/absolute'] = attempt(lambda: leak(p))
    # ../ from the working directory, which is the workspace.
    R[name + '/dotdot'] = attempt(lambda: leak('../' * 16 + rel))
    R[name + '/dotdot-workspace'] = attempt(lambda: leak(os.getcwd() + '/..' * 16 + '/' + rel))
    R[name + '/proc-1-root'] = attempt(lambda: leak('/proc/1/root/' + rel))
    R[name + '/proc-self-root'] = attempt(lambda: leak('/proc/self/root/' + rel))
    R[name + '/proc-any-cwd'] = first_success([attempt(lambda: leak('/proc/%s/cwd/%s%s' % (pid, '../' * 16, rel))) for pid in pids])
    R[name + '/proc-any-root'] = first_success([attempt(lambda: leak('/proc/%s/root/%s' % (pid, rel))) for pid in pids])
    # chdir up as far as it goes, then a relative path.
    def climb():
        here = os.getcwd()
        try:
            for _ in range(32):
                os.chdir('..')
            return leak(rel)
        finally:
            os.chdir(here)
    R[name + '/chdir-climb'] = attempt(climb)

if os.environ.get('SYSTEM') == '1':
    R['etc-shadow'] = attempt(lambda: len(read_all('/etc/shadow')))
    R['root-home'] = attempt(lambda: os.listdir('/root'))
    R['home'] = attempt(lambda: os.listdir('/home'))
    R['proc-1-exe'] = attempt(lambda: len(read_all('/proc/1/exe', 4096)))
    R['proc-1-environ'] = attempt(lambda: len(read_all('/proc/1/environ')))
    R['proc-1-fd'] = attempt(lambda: os.listdir('/proc/1/fd'))
    R['proc-1-mem'] = attempt(lambda: len(read_all('/proc/1/mem', 16)))
    R['proc-1-maps'] = attempt(lambda: len(read_all('/proc/1/maps')))
    R['proc-1-root'] = attempt(lambda: os.listdir('/proc/1/root'))
    R['proc-1-cwd'] = attempt(lambda: os.listdir('/proc/1/cwd'))
`

// readCanaries creates the canaries of the read attacks: one in a host
// temporary directory, one in /root, one in /etc.
func readCanaries(t *testing.T) map[string]canary {
	c := map[string]canary{"tempdir": newCanary(t, filepath.Join(hostTempDir(t), "canary"))}
	if !rootless() { // only root may write to /root and /etc
		c["root"] = newCanary(t, "/root/.codecell-attack-canary-"+randHex(6))
		c["etc"] = newCanary(t, "/etc/codecell-attack-canary-"+randHex(6))
	}
	return c
}

func readEnv(canaries map[string]canary, system bool) map[string]string {
	paths := map[string]string{}
	var tokens []string
	for name, c := range canaries {
		paths[name] = c.Path
		tokens = append(tokens, c.Token)
	}
	p, _ := json.Marshal(paths)
	tk, _ := json.Marshal(tokens)
	env := map[string]string{"CANARIES": string(p), "TOKENS": string(tk)}
	if system {
		env["SYSTEM"] = "1"
	}
	return env
}

var readWays = []string{"absolute", "dotdot", "dotdot-workspace", "proc-1-root", "proc-self-root", "proc-any-cwd", "proc-any-root", "chdir-climb"}

func attackRead(t *testing.T) {
	t.Parallel()
	t.Run("canaries", func(t *testing.T) {
		t.Parallel()
		canaries := readCanaries(t)
		r, res := probes(t, codecell.Exec{Env: readEnv(canaries, false)}, readProgram)
		for name, c := range canaries {
			for _, way := range readWays {
				t.Run(name+"-"+way, func(t *testing.T) {
					expectRefused(t, r, name+"/"+way)
					c.unchanged(t)
				})
			}
		}
		t.Run("secrets-not-in-output", func(t *testing.T) {
			for _, c := range canaries {
				noSecret(t, res, c.Token)
			}
		})
	})

	t.Run("host-secrets", func(t *testing.T) {
		t.Parallel()
		r, res := probes(t, codecell.Exec{Env: readEnv(nil, true)}, readProgram)
		for _, c := range []struct {
			probe  string
			errnos []string
		}{
			{"etc-shadow", []string{"ENOENT", "EACCES"}},
			{"root-home", []string{"ENOENT", "EACCES"}},
			{"home", []string{"ENOENT", "EACCES"}},
			// init is not dumpable: its /proc files are closed even to a
			// process of the same pid namespace.
			{"proc-1-exe", []string{"EACCES", "EPERM"}},
			{"proc-1-environ", []string{"EACCES", "EPERM"}},
			{"proc-1-fd", []string{"EACCES", "EPERM"}},
			{"proc-1-mem", []string{"EACCES", "EPERM"}},
			{"proc-1-maps", []string{"EACCES", "EPERM"}},
			{"proc-1-root", []string{"EACCES", "EPERM"}},
			{"proc-1-cwd", []string{"EACCES", "EPERM"}},
		} {
			t.Run(c.probe, func(t *testing.T) { expectErrno(t, r, c.probe, c.errnos...) })
		}
		// The host's shadow file's hashes would show as "root:$…".
		if strings.Contains(res.Stdout, "root:$") || strings.Contains(res.Stdout, "root:*") {
			t.Errorf("the host's /etc/shadow leaked into stdout")
		}
	})

	// The same program, with no isolation, reads the canary every way that
	// exists on the host: the probes work.
	t.Run("local-control", func(t *testing.T) {
		t.Parallel()
		c := newCanary(t, filepath.Join(hostTempDir(t), "canary"))
		r, res := probes(t, codecell.Exec{Tier: "local", Env: readEnv(map[string]canary{"tempdir": c}, false)}, readProgram)
		for _, way := range []string{"absolute", "dotdot", "proc-self-root", "proc-any-root", "chdir-climb"} {
			if got := r["tempdir/"+way]; got != "ok:secret" {
				t.Errorf("local control: reading the canary %s gave %q, want ok:secret", way, got)
			}
		}
		if !strings.Contains(res.Stdout, c.Token) {
			t.Errorf("local control: the canary's token is not in stdout: the leak check would not see a leak")
		}
	})
}

// writeProgram tries to create a marker file at each path of CREATE (name →
// path), and probes write access without changing anything: access(W_OK)
// on ACCESS, open(O_WRONLY) without O_TRUNC on OPEN, and rewriting the
// sandbox's hostname sysctl with its own value.
const writeProgram = `
def create(p):
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        os.write(fd, os.environ['MARKER'].encode())
    finally:
        os.close(fd)

for name, p in json.loads(os.environ['CREATE']).items():
    R['create/' + name] = attempt(lambda: create(p))
for p in json.loads(os.environ.get('ACCESS', '[]')):
    R['access' + p] = can_write(p)
for p in json.loads(os.environ.get('OPEN', '[]')):
    R['open' + p] = attempt(lambda: open_write(p))
if os.environ.get('SYSTEM') == '1':
    # The runner's files, whatever their names.
    for d, dirs, files in os.walk('/run/codecell'):
        for f in dirs + files:
            p = os.path.join(d, f)
            R['access' + p] = can_write(p)
            if f in files:
                R['open' + p] = attempt(lambda: open_write(p))
    def rewrite(p):
        v = read_all(p)
        fd = os.open(p, os.O_WRONLY)
        try:
            os.write(fd, v)
        finally:
            os.close(fd)
    R['rewrite/proc/sys/kernel/hostname'] = attempt(lambda: rewrite('/proc/sys/kernel/hostname'))
    R['rewrite/proc/sys/kernel/domainname'] = attempt(lambda: rewrite('/proc/sys/kernel/domainname'))
    time.sleep(0.5)  # while the host looks at its copy of the runner's files
`

func attackWrite(t *testing.T) {
	t.Parallel()
	t.Run("outside-workspace", func(t *testing.T) {
		t.Parallel()
		m := marker("write")
		hostDir := hostTempDir(t)
		// Each path names a host path too: the marker must not appear there.
		refused := map[string]string{
			"root":         "/" + m,
			"usr":          "/usr/" + m,
			"usr-local":    "/usr/local/" + m,
			"etc":          "/etc/" + m,
			"bin":          "/bin/" + m,
			"run-codecell": "/run/codecell/" + m,
			"dev":          "/dev/" + m,
			"proc":         "/proc/" + m,
			"proc-sys":     "/proc/sys/kernel/" + m,
			"host-tempdir": filepath.Join(hostDir, m),
		}
		// The sandbox has its own /tmp and /dev/shm: writing there works, and
		// must not reach the host's.
		own := map[string]string{"tmp": "/tmp/" + m, "dev-shm": "/dev/shm/" + m}
		create := map[string]string{}
		for k, v := range refused {
			create[k] = v
		}
		for k, v := range own {
			create[k] = v
		}
		access := []string{"/", "/usr", "/usr/bin", "/usr/local", "/usr/bin/python3", "/etc", "/etc/passwd",
			"/bin", "/lib", "/run/codecell", "/dev", "/proc/sys/kernel/hostname", "/proc/sys/kernel/core_pattern",
			"/proc/sys/vm/drop_caches", "/proc/sys/kernel/randomize_va_space"}
		open := []string{"/etc/passwd", "/etc/hosts", "/usr/bin/python3", "/proc/sys/kernel/hostname",
			"/proc/sys/kernel/core_pattern", "/proc/sys/vm/drop_caches", "/proc/sys/kernel/randomize_va_space"}
		hostname, _ := os.ReadFile("/proc/sys/kernel/hostname")
		env := map[string]string{"MARKER": m, "CREATE": mustJSON(create), "ACCESS": mustJSON(access), "OPEN": mustJSON(open), "SYSTEM": "1"}
		// The engine's temporary directories (the run's workspace, and the
		// runner's files for a tier that reads them from the host) in a
		// directory of the test's, watched during the run.
		eng := &codecell.Engine{TempDir: hostTempDir(t)}
		stop := make(chan struct{})
		inRunner := make(chan []string, 1)
		go func() {
			var hits []string
			var sawDir bool
			for {
				filepath.WalkDir(eng.TempDir, func(p string, d fs.DirEntry, err error) error {
					if err == nil && strings.Contains(d.Name(), m) {
						hits = append(hits, p)
					}
					sawDir = sawDir || err == nil && (strings.HasPrefix(d.Name(), "codecell-run-") || strings.HasPrefix(d.Name(), "codecell-ws-"))
					return nil
				})
				select {
				case <-stop:
					if !sawDir {
						hits = append(hits, "(no workspace or runner directory was ever seen: the watch saw nothing)")
					}
					inRunner <- hits
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		}()
		r, _ := probesWith(t, eng, codecell.Exec{Env: env}, writeProgram)
		close(stop)
		t.Run("host-runner-dir", func(t *testing.T) {
			if hits := <-inRunner; len(hits) > 0 {
				t.Errorf("the engine's temporary directory: %v", hits)
			}
		})

		for name, p := range refused {
			t.Run("create-"+name, func(t *testing.T) {
				expectErrno(t, r, "create/"+name, "EROFS", "EACCES", "ENOENT", "EPERM")
				hostAbsent(t, p)
			})
		}
		for name, p := range own {
			t.Run("create-own-"+name, func(t *testing.T) {
				expectOK(t, r, "create/"+name) // the sandbox's own directory
				hostAbsent(t, p)
			})
		}
		for _, p := range access {
			t.Run("access"+dashed(p), func(t *testing.T) { expectErrno(t, r, "access"+p, "EROFS", "EACCES", "EPERM", "ENOENT") })
		}
		for _, p := range open {
			t.Run("open"+dashed(p), func(t *testing.T) { expectErrno(t, r, "open"+p, "EROFS", "EACCES", "EPERM", "ENOENT") })
		}
		t.Run("runner-files", func(t *testing.T) {
			var n int
			for _, k := range sortedKeys(r) {
				if strings.HasPrefix(k, "access/run/codecell/") || strings.HasPrefix(k, "open/run/codecell/") {
					n++
					expectErrno(t, r, k, "EROFS", "EACCES", "EPERM")
				}
			}
			if n == 0 {
				t.Errorf("the program found no runner files under /run/codecell to probe")
			}
		})
		t.Run("sysctl-rewrite", func(t *testing.T) {
			expectErrno(t, r, "rewrite/proc/sys/kernel/hostname", "EROFS", "EACCES", "EPERM")
			expectErrno(t, r, "rewrite/proc/sys/kernel/domainname", "EROFS", "EACCES", "EPERM")
			if now, _ := os.ReadFile("/proc/sys/kernel/hostname"); string(now) != string(hostname) {
				t.Errorf("the host's hostname changed from %q to %q", hostname, now)
			}
		})
	})

	// With no isolation the same program creates the marker in a host
	// directory: the host-side check sees a write that got through.
	t.Run("local-control", func(t *testing.T) {
		t.Parallel()
		m := marker("write")
		p := filepath.Join(hostTempDir(t), m)
		env := map[string]string{"MARKER": m, "CREATE": mustJSON(map[string]string{"host-tempdir": p})}
		r, _ := probes(t, codecell.Exec{Tier: "local", Env: env}, writeProgram)
		expectOK(t, r, "create/host-tempdir")
		if data, err := os.ReadFile(p); err != nil || string(data) != m {
			t.Errorf("local control: the marker did not appear on the host (%q, %v): the host-side check would miss a write", data, err)
		}
	})
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// dashed turns a path into a subtest name's part: /usr/bin → -usr-bin.
func dashed(p string) string {
	if p == "/" {
		return "-root"
	}
	return strings.ReplaceAll(p, "/", "-")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
