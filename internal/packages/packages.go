// Package packages keeps the third-party packages programs import: the
// checks on what may be asked for, and a cache on the host, one directory
// per exact list, installed once and shared read-only by every run after.
//
// The install itself runs elsewhere (in a sandbox, by the caller's
// function): this package only names, locks and publishes.
package packages

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/codecell-dev/codecell/internal/lazyre"
)

// MaxSpecs bounds one list.
const MaxSpecs = 64

// pythonSpec is a requirement pip reads from an index or a wheel
// directory: a name, extras, and version clauses. No URL, path, option or
// environment marker: those would reach past the configured source.
var pythonSpec = lazyre.New(`^([A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?)(\[[A-Za-z0-9._,-]+\])?((===|==|>=|<=|~=|!=|<|>)[A-Za-z0-9.*+!_-]+(,(===|==|>=|<=|~=|!=|<|>)[A-Za-z0-9.*+!_-]+)*)?$`)

// npmSpec is a package of the registry with an optional version, range or
// tag: "lodash", "lodash@4.17.21", "@types/node@^20". No git, file or URL
// specifier.
var npmSpec = lazyre.New(`^(@[a-z0-9][a-z0-9._-]*/)?[a-z0-9][a-z0-9._-]*(@[A-Za-z0-9.^~<>=*|_+-][A-Za-z0-9.^~<>=*| _+-]*)?$`)

var pep503 = lazyre.New(`[-_.]+`)

var aroundOperators = lazyre.New(`[ \t]*([=<>!~,\[\]]+)[ \t]*`)

// NormalizePython checks a list of Python requirements and returns it in
// the one form the cache is keyed by: names lower-cased with runs of
// "-", "_" and "." as one "-" (PEP 503), no spaces, sorted, without
// duplicates.
func NormalizePython(specs []string) ([]string, error) {
	return normalize(specs, func(s string) (string, error) {
		// Spaces around operators, commas and brackets only: "a b" is
		// no requirement.
		s = aroundOperators().ReplaceAllString(strings.TrimSpace(s), "$1")
		m := pythonSpec().FindStringSubmatch(s)
		if m == nil {
			return "", fmt.Errorf("%q is not a Python requirement codecell installs: write a name with an optional version, such as \"humanize==4.9.0\" or \"requests>=2.31,<3\" (no URLs, paths or options)", s)
		}
		name := strings.ToLower(pep503().ReplaceAllString(m[1], "-"))
		return name + strings.ToLower(m[3]) + m[4], nil
	})
}

// NormalizeNPM checks a list of npm packages and returns it sorted,
// without duplicates.
func NormalizeNPM(specs []string) ([]string, error) {
	return normalize(specs, func(s string) (string, error) {
		s = strings.TrimSpace(s)
		if !npmSpec().MatchString(s) || len(s) > 214+64 {
			return "", fmt.Errorf("%q is not an npm package codecell installs: write a name with an optional version, such as \"lodash@4.17.21\" or \"@types/node@^20\" (no git, file or URL specifiers)", s)
		}
		return s, nil
	})
}

func normalize(specs []string, one func(string) (string, error)) ([]string, error) {
	if len(specs) > MaxSpecs {
		return nil, fmt.Errorf("%d packages asked for; at most %d may be", len(specs), MaxSpecs)
	}
	out := make([]string, 0, len(specs))
	for _, s := range specs {
		if len(s) > 256 {
			return nil, fmt.Errorf("a package specifier of %d characters is too long", len(s))
		}
		n, err := one(s)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// Key names a cache entry: a digest of everything the installed files
// depend on (the language, the interpreter, the source, the list).
func Key(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s\n", len(p), p)
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// Cache is a directory of installed package lists, one subdirectory per
// key. An entry appears whole, by a rename, or not at all.
type Cache struct {
	Dir string
}

// DefaultDir is where the cache lives when none is configured: as root,
// /var/cache/codecell/packages (which sandboxes' users, other host uids,
// can reach); otherwise $XDG_CACHE_HOME/codecell/packages, or
// ~/.cache/codecell/packages.
func DefaultDir() string {
	if os.Geteuid() == 0 {
		return "/var/cache/codecell/packages"
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "codecell", "packages")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("codecell-packages-%d", os.Geteuid()))
}

// Install is what fills an entry: it installs into tmp (an empty
// directory of the cache's) and returns the directory under tmp to
// publish.
type Install func(ctx context.Context, tmp string) (string, error)

// Get returns the entry for key, installing it with install when it is
// not there yet. Two callers asking for the same key, in this process or
// another, install it once: the second waits, then finds it. cached says
// whether it was there already.
func (c *Cache) Get(ctx context.Context, key string, install Install) (dir string, cached bool, err error) {
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return "", false, err
	}
	dir = filepath.Join(c.Dir, key)
	if isDir(dir) {
		return dir, true, nil
	}
	unlock, err := lock(ctx, filepath.Join(c.Dir, "."+key+".lock"))
	if err != nil {
		return "", false, err
	}
	defer unlock()
	if isDir(dir) {
		// Another run installed it while this one waited.
		return dir, true, nil
	}
	// What a killed installer left: nobody else installs this key now.
	if old, _ := filepath.Glob(filepath.Join(c.Dir, ".tmp-"+key+"-*")); len(old) > 0 {
		for _, o := range old {
			os.RemoveAll(o)
		}
	}
	tmp, err := os.MkdirTemp(c.Dir, ".tmp-"+key+"-")
	if err != nil {
		return "", false, err
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", false, err
	}
	out, err := install(ctx, tmp)
	if err != nil {
		return "", false, err
	}
	if err := readable(out); err != nil {
		return "", false, err
	}
	if err := os.Rename(out, dir); err != nil {
		return "", false, err
	}
	return dir, false, nil
}

// readable makes what an install left readable by every user, and
// writable by none but its owner: sandboxes run as other host uids, and
// see the entry read-only anyway. Links are left as they are, never
// followed.
func readable(root string) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			return nil
		case d.IsDir():
			return os.Chmod(p, 0o755)
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			mode := os.FileMode(0o644)
			if info.Mode()&0o100 != 0 {
				mode = 0o755
			}
			return os.Chmod(p, mode)
		}
		// Devices, sockets, pipes: no package needs one.
		return os.Remove(p)
	})
}

// Reachable checks that users other than this one (sandboxes' host uids,
// when codecell runs as root) can reach dir: every directory above it
// searchable by others. Without root, sandboxes run as this user, and
// anything it reaches will do.
func Reachable(dir string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	for p := abs; ; p = filepath.Dir(p) {
		info, err := os.Stat(p)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err == nil && info.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("%s cannot be entered by other users (mode %v), and sandboxes run as other users: chmod o+x it, or use a directory such as /var/cache/codecell", p, info.Mode().Perm())
		}
		if p == "/" {
			return nil
		}
	}
}

func isDir(p string) bool {
	info, err := os.Stat(p)
	return err == nil && info.IsDir()
}

// lockPoll is how often a run waiting for another's install checks its
// lock.
const lockPoll = 50 * time.Millisecond
