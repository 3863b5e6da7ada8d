package codecell

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"sync"
	"sync/atomic"
)

// A Tier runs prepared programs somewhere: a subprocess, a Linux sandbox, a
// container. The Engine does everything around the run (validation,
// preparation, output caps, the return value, the file list); a tier only
// starts the program, enforces the limits it can, and waits.
type Tier interface {
	// Name is the tier's registered name, such as "local" or "native".
	Name() string
	// Isolating reports whether the tier isolates programs from the host.
	// "auto" only picks isolating tiers.
	Isolating() bool
	// Probe returns nil when this host can run the tier, or an error that
	// says what is missing.
	Probe() error
	// View says where the program sees the workspace and the runner
	// directory, given their paths on the host.
	View(workspace, runner string) View
	// Run runs job.Argv and waits for it and everything it started. When ctx
	// is done it kills them all and sets Outcome.Stopped. It returns an error
	// only when the program could not be run at all; the Engine reports that
	// as StatusSandboxError.
	Run(ctx context.Context, job *Job) (*Outcome, error)
}

// View is where a program sees the directories codecell prepared for it.
type View struct {
	Workspace string // read-write: the program's working directory
	Runner    string // read-only: the runner prelude and the program's source
}

// Job is a program ready to run, as the Engine hands it to a tier.
type Job struct {
	ID       string
	Language string
	// Argv is the command, in the tier's view; Argv[0] is the interpreter.
	Argv []string
	// Env is the program's whole environment, in the tier's view.
	Env []string
	// Workspace and Runner are host paths; View is how the program sees them.
	// A run on a RunnerFilesTier has no Runner (a live session's
	// interpreter has both).
	Workspace string
	Runner    string
	View      View
	// RunnerFiles are the runner directory's files, by slash-separated
	// name relative to it; those under bin/ are executable. A tier may
	// write them from here rather than copy Runner, which holds the same.
	RunnerFiles map[string][]byte
	// Finished, when not nil, is closed once the Engine has built the job's
	// Result: work a tier can put off (refilling a pool, tearing a sandbox
	// down) waits for it, for up to a second, rather than compete for the
	// CPU with the Result.
	Finished <-chan struct{}
	// KeepWorkspace is true when the workspace is the caller's directory:
	// a tier that runs the program on a copy must bring the changes back.
	KeepWorkspace bool
	Stdin         io.Reader
	Stdout        io.Writer
	Stderr        io.Writer
	// ExtraFiles become the program's file descriptors 3, 4, …: the value
	// channel first.
	ExtraFiles []*os.File
	Limits     Limits
	Policy     Policy
	// Network, when not empty, is the network policy's layers, widest
	// first, which let the program reach some hosts: only a tier that
	// implements NetworkTier gets a job with it.
	Network []NetworkLayer
	// InitPath is the binary a tier re-executes for its init stage: the
	// running binary when Init was called, else Engine.InitPath. Empty when
	// neither is available; tiers that need it refuse.
	InitPath string
	// Mounts are host directories the program sees read-only (the
	// packages it asked for): only a tier that implements MountTier gets
	// a job with any.
	Mounts []Mount
	Log    *slog.Logger
	// Warm, when set, says how the job's interpreter can be started before
	// the job: a tier that keeps sandboxes ready may start one there, with
	// its runner loaded, and hand it the job when it comes. A tier that
	// does not ignores it and runs Argv.
	Warm *WarmStart
}

// WarmStart is an interpreter started before its job. It runs as the job's
// program would (same sandbox, user and limits), with its stdin, stdout and
// stderr, len(Job.ExtraFiles) sockets at descriptors 3, 4, … (each standing
// for the job's extra file there), and at the next descriptor a pipe from
// which it reads Message to its end, then runs the job as Argv would have.
type WarmStart struct {
	// Key is the same for two jobs exactly when one warm interpreter serves
	// either: a digest of Argv, Env and Files.
	Key string
	// Argv starts the interpreter, its runner loaded, waiting for the job.
	Argv []string
	// Env is its environment until the job's replaces it.
	Env []string
	// Files are what it reads before the job, relative to the job's runner
	// directory (Job.View.Runner), in a directory of their own: a tier writes
	// them there, not with the job's files.
	Files map[string][]byte
	// Extra is how many sockets it expects at descriptors 3, 4, ….
	Extra int
	// Message is the job, in the runner's words: the rest of Argv and the
	// job's environment.
	Message []byte
	// Fork, when not nil, says the interpreter can also be a fork server's
	// template (Python's can): see ForkStart.
	Fork *ForkStart
}

// ForkStart says how an interpreter can serve as a template that forks one
// child per job. A tier starts Interpreter with a script of its own that
// loads Runner (a path in the runner directory, among Files: source, or a
// marshalled code object when it ends in ".code") as the module
// __codecell_template__, which imports what jobs need and runs nothing;
// each child, once in its own sandbox, calls the module's
// _codecell_forked(Message), which runs the job and ends the process.
type ForkStart struct {
	Interpreter []string // the command up to the runner: the interpreter and its options
	Runner      string
	// Preload names modules of the interpreter's own library the template
	// imports besides the runner's, because the job would import them
	// (Python's asyncio, for a program that awaits). Templates that differ
	// in Preload are different templates: each child of one pays to copy
	// and tear down what the template holds, so the one a job is forked
	// from holds what the job needs, not what every job might.
	Preload []string
}

// Outcome is what a tier observed.
type Outcome struct {
	// ExitCode is the program's exit status, or -1 when a signal ended it.
	ExitCode int
	// Signal is the signal that ended the program, or 0.
	Signal int
	// Stopped is true when the tier killed the program because ctx was done.
	Stopped bool
	// MemoryKilled is true when the kernel ended the program for exceeding
	// its memory limit.
	MemoryKilled bool
	// MemoryPeak is the most memory the program's sandbox held at once, in
	// bytes, as the host's kernel counted it; 0 when the tier does not know.
	MemoryPeak int64
	Isolation  Isolation
	Warnings   []string
	// Network lists the connections the program opened, when Job.Network
	// let it reach any host.
	Network []NetworkConnection
	// Files, when not nil, lists the workspace's changes as the tier saw
	// them: a tier that runs the program on a copy of the workspace knows
	// them, and the Engine does not look at Job.Workspace then.
	Files []FileChange
}

// Mount is a host directory a program sees, read-only, at Path.
type Mount struct {
	Host string // an absolute path on the host
	Path string // an absolute path in the program's view, under /opt
}

// MountTier is implemented by tiers that can show a program host
// directories read-only (Job.Mounts). Other tiers are refused an Exec that
// asks for packages.
type MountTier interface {
	MountsReadOnly() bool
}

// WorkspaceCopier is implemented by tiers that run the program on a copy of
// the workspace, not in Job.Workspace itself: the Engine can then keep a
// fresh workspace on a tmpfs, where making and removing it is cheap, since
// the program's writes never land there.
type WorkspaceCopier interface {
	CopiesWorkspace() bool
}

// RunnerFilesTier is implemented by tiers that write a job's runner files
// into their sandbox themselves, from Job.RunnerFiles: the Engine makes no
// runner directory on the host for them (Job.Runner is empty).
type RunnerFilesTier interface {
	TakesRunnerFiles() bool
}

// InitUser is implemented by tiers that re-execute the running binary (or
// Engine.InitPath) for an init stage: the Engine refuses to run them when
// neither is available, with a message that says what to do.
type InitUser interface {
	NeedsInit() bool
}

var (
	registryMu sync.RWMutex
	tiers      = map[string]Tier{}
	initStages = map[string]func(){}
	initCalled atomic.Bool
)

// RegisterTier makes a tier available by name. Registering a name twice
// panics: that is a wiring mistake, and it should be loud.
func RegisterTier(t Tier) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := tiers[t.Name()]; dup {
		panic(fmt.Sprintf("codecell: tier %q registered twice", t.Name()))
	}
	tiers[t.Name()] = t
}

// LookupTier returns the tier registered under name.
func LookupTier(name string) (Tier, bool) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	t, ok := tiers[name]
	return t, ok
}

// TierNames lists the registered tiers, sorted.
func TierNames() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	names := make([]string, 0, len(tiers))
	for n := range tiers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// InitArg0 is the argv[0] a tier gives the binary it re-executes for its init
// stage; argv[1] names the stage. (The native tier's stages are caught
// before main, by internal/sandboxinit, whose InitArg0 a test holds equal.)
const InitArg0 = "codecell-init"

// RegisterInitStage registers the function that runs when this binary is
// re-executed as a tier's init stage. fn must not return. Registering a name
// twice panics.
func RegisterInitStage(name string, fn func()) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := initStages[name]; dup {
		panic(fmt.Sprintf("codecell: init stage %q registered twice", name))
	}
	initStages[name] = fn
}

// Init must be the first call in main of any program that uses tiers which
// re-execute the running binary (local, native), as runc's init does:
//
//	func main() {
//		codecell.Init()
//		…
//	}
//
// In the re-executed child it runs the tier's init stage and never returns;
// in every other process it returns at once. A program that cannot call Init
// sets Engine.InitPath to an installed codecell binary instead.
func Init() {
	initCalled.Store(true)
	if len(os.Args) < 2 || os.Args[0] != InitArg0 {
		return
	}
	registryMu.RLock()
	fn := initStages[os.Args[1]]
	registryMu.RUnlock()
	if fn == nil {
		fmt.Fprintf(os.Stderr, "codecell: no init stage %q in this binary\n", os.Args[1])
		os.Exit(125)
	}
	fn()
	fmt.Fprintf(os.Stderr, "codecell: init stage %q returned\n", os.Args[1])
	os.Exit(125)
}
