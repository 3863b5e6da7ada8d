package codecell

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/codecell-dev/codecell/internal/instdir"
	"github.com/codecell-dev/codecell/internal/workspace"

	"golang.org/x/sys/unix"
)

// Engine runs Execs. The zero value is ready to use: tier "auto", the
// default limits, the default interpreters.
type Engine struct {
	// Tier is the tier for Execs that name none; empty means "auto", the
	// strongest isolating tier this host offers.
	Tier string
	// Limits are the defaults for every Exec; zero fields take DefaultLimits.
	Limits Limits
	// Interpreters overrides interpreter paths by language name, such as
	// {"python": "/opt/python3.12/bin/python3"}.
	Interpreters map[string]string
	// InitPath is an installed codecell binary that tiers re-execute for
	// their init stage when this program did not call Init.
	InitPath string
	// TempDir holds temporary workspaces and runner directories; empty means
	// os.TempDir().
	TempDir string
	// Logger receives one line per Exec; nil means none.
	Logger *slog.Logger
	// Tiers, when set, are used instead of the registered tiers of the same
	// names: a differently configured native tier, say.
	Tiers []Tier
	// Tools are the tools programs may call; nil means none but an Exec's
	// own.
	Tools *Toolbox
	// Policy applies to every Exec, on top of the Exec's own: each can only
	// narrow what the other allows.
	Policy Policy
	// Packages says where the packages Execs ask for come from and where
	// they are kept (Exec.Packages).
	Packages PackageSources
}

// lookupTier finds a tier by name, the Engine's own first.
func (e *Engine) lookupTier(name string) (Tier, bool) {
	for _, t := range e.Tiers {
		if t.Name() == name {
			return t, true
		}
	}
	return LookupTier(name)
}

// autoOrder is the order in which "auto" tries isolating tiers, strongest
// and cheapest first: the tiers codecell has that isolate.
var autoOrder = []string{"native"}

// maxArgsEnv bounds the program's arguments and environment together, well
// under the kernel's own limit for execve.
const maxArgsEnv = 256 << 10

// valueFD is the program's file descriptor for the result channel: the first
// of Job.ExtraFiles.
const valueFD = 3

// warmFD is where a warm interpreter reads its job (see WarmStart): after
// the result and tool channels.
const warmFD = 5

// ResolveTier returns the tier an Exec that names this tier would run on
// ("" and "auto" pick the strongest available), or the refusal it would get.
func (e *Engine) ResolveTier(name string) (Tier, *Envelope) { return e.pickTier(name) }

func (e *Engine) pickTier(name string) (Tier, *Envelope) {
	if name == "" {
		name = e.Tier
	}
	if name == "" || name == "auto" {
		var reasons []string
		for _, n := range autoOrder {
			t, ok := e.lookupTier(n)
			if !ok {
				continue
			}
			if err := t.Probe(); err != nil {
				reasons = append(reasons, n+": "+err.Error())
				continue
			}
			return t, nil
		}
		msg := "no isolating tier can run on this host"
		if len(reasons) > 0 {
			msg += " (" + strings.Join(reasons, "; ") + ")"
		}
		return nil, Errorf(KindValidation, CodeNoIsolation, "%s", msg).WithHints(
			"run `codecell doctor` to see what this host offers",
			"to run without any isolation, which is not safe for untrusted code, choose tier local explicitly (`--tier local`)")
	}
	t, ok := e.lookupTier(name)
	if !ok {
		return nil, Errorf(KindValidation, CodeUnknownTier, "unknown tier %q", name).WithHints(
			"tiers in this build: auto, " + strings.Join(TierNames(), ", "))
	}
	if err := t.Probe(); err != nil {
		return nil, Errorf(KindValidation, CodeTierUnavailable, "tier %q cannot run on this host: %v", name, err).WithHints(
			"run `codecell doctor` to see what this host offers")
	}
	return t, nil
}

// readBounded reads r to its end, keeping at most max bytes and discarding
// the rest, so that the writer never blocks and memory stays bounded.
func readBounded(r io.Reader, max int64) []byte {
	data, _ := io.ReadAll(io.LimitReader(r, max))
	_, _ = io.Copy(io.Discard, r)
	return data
}

// workspace returns the run's workspace and how to clean it up: the caller's
// directory, kept, or a fresh temporary one, removed.
func (e *Engine) workspace(x *Exec, tier Tier) (string, func(), error) {
	dir := x.Workspace
	cleanup := func() {}
	if dir == "" {
		wc, ok := tier.(WorkspaceCopier)
		d, err := os.MkdirTemp(e.workspaceTempDir(ok && wc.CopiesWorkspace()), "codecell-ws-")
		if err != nil {
			return "", nil, err
		}
		// A program on a tier without a copy of its own (local) may
		// leave directories shut: workspace.RemoveAll opens them up.
		dir, cleanup = d, func() { workspace.RemoveAll(d) }
	} else {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return "", nil, err
		}
		info, err := os.Stat(abs)
		if err != nil || !info.IsDir() {
			return "", nil, Errorf(KindValidation, CodeInvalidRequest, "workspace %q is not a directory", dir).WithHints(
				"create the directory first, or leave the workspace out for a fresh temporary one")
		}
		// codecell reads the workspace (to copy it into the sandbox, to
		// list what changed) as the user it runs as.
		if err := unix.Access(abs, unix.R_OK|unix.X_OK); err != nil {
			return "", nil, Errorf(KindValidation, CodeInvalidRequest, "workspace %q cannot be read by uid %d, whom codecell runs as: %v", dir, os.Geteuid(), err).WithHints(
				"give a directory of your own as the workspace, or leave it out for a fresh temporary one")
		}
		dir = abs
	}
	if err := writeFiles(dir, x.Files); err != nil {
		cleanup()
		return "", nil, err
	}
	return dir, cleanup, nil
}

// writeFiles places the Exec's files in the workspace, through the one
// safe root every writer of workspaces uses (workspace.Root): never through
// a symbolic link, never in place over a file that may be a hard link to
// one outside, never outside the workspace.
func writeFiles(dir string, files []File) error {
	if len(files) == 0 {
		return nil
	}
	root, err := workspace.Open(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	for _, f := range files {
		if _, err := workspace.CleanPath(f.Path); err != nil {
			return Errorf(KindValidation, CodeInvalidRequest, "file path %q is not inside the workspace", f.Path).WithHints(
				"use a relative path such as data/input.csv")
		}
		mode := os.FileMode(f.Mode & 0o777)
		if mode == 0 {
			mode = 0o644
		}
		if _, err := root.WriteFile(f.Path, bytes.NewReader(f.Data), mode, 0); err != nil {
			if errors.Is(err, workspace.ErrSymlink) || errors.Is(err, workspace.ErrBadPath) || errors.Is(err, workspace.ErrNotRegular) {
				return Errorf(KindValidation, CodeInvalidRequest, "file %q cannot be written: %v", f.Path, err).WithHints(
					"write files under plain directories of the workspace, not through a symbolic link")
			}
			return err
		}
	}
	return nil
}

// runnerTempDir is where runner directories go: a few small files each, made
// and removed once per run. A tmpfs makes that an order of magnitude
// cheaper than a disk filesystem (on ext4 mounted with discard, removal
// waits for the device); /dev/shm is one on every Linux host, and the
// directories are made 0700. Should another user have taken this user's
// name there first, they go under the next of instdir.Bases.
//
// They go in a directory of this process's own (internal/instdir), held
// with a lock for its life: a process killed in the middle of a run leaves
// its runner directory behind, and the next codecell process to run a
// program removes what a dead one left, on a tmpfs that holds memory.
//
// That directory is the process's, not an Engine's: an Engine has no
// Close and is copied as a value, so one that claimed a locked directory
// of its own would hold it until the process ends, and a process that
// makes many Engines would hold many. Engine.TempDir gives an Engine a
// directory of its caller's choosing instead.
// workspaceTempDir is where a run's temporary workspace goes: TempDir
// when set; else this process's own directory, which the next codecell
// process removes if this one is killed — on a tmpfs when the tier copies
// the workspace into its sandbox (copied, which holds the program's
// writes), on disk when the program writes in it in place (the local
// tier), where it may write as much as its quota lets it.
func (e *Engine) workspaceTempDir(copied bool) string {
	if e.TempDir != "" || copied {
		return e.runnerTempDir()
	}
	dir, _ := instdir.ProcessOnDisk()
	return dir
}

// TempWorkspace makes an empty workspace for one run whose caller keeps it
// until the Result is made (remove removes it): in this process's own
// directory on disk, as a run's own temporary workspace is made where its
// tier is not known, unless TempDir is set.
func (e *Engine) TempWorkspace() (dir string, remove func(), err error) {
	dir, err = os.MkdirTemp(e.workspaceTempDir(false), "codecell-ws-")
	if err != nil {
		return "", nil, err
	}
	return dir, func() { workspace.RemoveAll(dir) }, nil
}

func (e *Engine) runnerTempDir() string {
	if e.TempDir != "" {
		return e.TempDir
	}
	// With an error, the directory may still be usable (some leftovers
	// stayed); without one, "" means os.TempDir().
	dir, _ := instdir.Process()
	return dir
}

// InitBinary is the binary a tier re-executes for its init stage, as each
// Job's InitPath gives it: the running binary once Init was called, else
// InitPath; empty when neither is there.
func (e *Engine) InitBinary() string { return e.initPath() }

func (e *Engine) initPath() string {
	if initCalled.Load() {
		// The running binary itself, even if its file was replaced or
		// removed since it started.
		return "/proc/self/exe"
	}
	return e.InitPath
}

func newID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func tailLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func formatBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20:
		return fmt.Sprintf("%.4g MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.4g KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
