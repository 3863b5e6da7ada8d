// Package native is codecell's Linux sandbox, the tier "auto" picks on
// Linux. A program runs in fresh user, mount, pid, network, IPC, UTS and
// cgroup namespaces, in a root filesystem of read-only binds of the host's
// system directories, as an unprivileged user with no capabilities,
// no_new_privs, a seccomp deny list and Landlock, under cgroup limits.
//
// The sandbox's init is the codecell binary itself, re-executed (as runc's
// init is): the program must call codecell.Init first thing in main, or set
// Engine.InitPath. No external sandbox program is needed. What runs inside
// the sandbox is internal/sandboxinit, which takes over the re-executed
// binary before its heavier packages are initialised; this package is the
// host's side.
//
// How one run goes:
//
//  1. The host claims two host uids for the sandbox (never root's), creates
//     its cgroup, and starts init in the new namespaces.
//  2. init builds the filesystem: a tmpfs root with /usr and friends bound
//     read-only, a minimal /etc and /dev, its own /proc, a tmpfs /tmp, a
//     tmpfs /workspace of the workspace quota's size, and pivots into it.
//     It answers "ready" and waits. Up to this point nothing depends on the
//     job, so the tier keeps a few sandboxes ready in advance (Tier.Pool);
//     each still runs exactly one job, in namespaces of its own.
//  3. For the job, the host writes the runner's files and the workspace's
//     contents into the sandbox through /proc/<init>/root, and sends the
//     job with its stdin, stdout, stderr and result channel attached.
//  4. init confines itself — capability bounding set, no_new_privs,
//     Landlock, seccomp — and forks the program as the sandbox user.
//  5. When the program ends, or the host says kill, init kills everything
//     else in the pid namespace and reports. The host lists the
//     workspace's changes (bringing them back to the caller's directory if
//     the workspace was one), and ends init, which ends the namespaces.
//
// Warm interpreters (warm_linux.go): between steps 2 and 3, the pool may
// have init start the interpreter a job of some language will need, its
// runner loaded, as init would start the program (step 4); the job then
// hands it the rest of its command instead of starting one. Which
// languages the pool warms follows what recent jobs asked for. An
// interpreter serves one job, in its own sandbox, like any program.
//
// Fork servers (zygote_linux.go, zygote.py): for Python, whose runner can
// be loaded without running a program, the tier keeps a template sandbox
// whose init became that interpreter, its runner loaded. Each run is a
// child of it that enters new mount, UTS, IPC, network, pid and cgroup
// namespaces, joins a cgroup of its own, mounts its own workspace, /tmp,
// /dev/shm, runner directory and /proc, confines itself as init does, and
// only then reads its job: neither the interpreter's start nor the
// sandbox's construction is paid per run. Runs are prepared ahead of their
// job, as the pool's sandboxes are. Every other program runs the same way
// in a sandbox forked from a server that holds no runner, and executes its
// command there; a warm interpreter in the pool, when one is ready for
// the job, is used first.
//
// Networks (network_linux.go): a job whose policy lets it reach some
// hosts runs in a sandbox built for it, whose loopback holds an address
// for each allowed name (given by its /etc/hosts), where init listens and
// hands each connection to the host's proxy (internal/egress), which
// checks the name, its TLS server name or HTTP Host, and the address the
// name resolves to before it connects.
package native

import (
	"context"
	"crypto/x509"
	"net/netip"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/sandboxinit"
)

// Name is the tier's registered name.
const Name = "native"

// DefaultUIDBase is where the host uids of sandboxes start when codecell
// runs as root: above the ranges that systemd-nspawn (up to 0x6FFFFFFF) and
// SSSD's default ID mapping (up to 2,000,200,000) hand out, below 2^31.
const DefaultUIDBase = 2_100_000_000

// Paths inside the sandbox.
const (
	workspaceDir = sandboxinit.WorkspaceDir
	runnerDir    = sandboxinit.RunnerDir
)

func init() {
	codecell.RegisterTier(Default)
}

// Default is the registered native tier.
var Default = &Tier{}

// Tier is the native Linux sandbox. Its zero value is ready to use; set
// fields before the first run.
type Tier struct {
	// ExtraMounts are host directories the sandbox also sees, read-only, at
	// the same paths: for interpreters installed outside the system
	// directories, such as /opt/node.
	ExtraMounts []string
	// Tmp is the size of the sandbox's /tmp; 0 means 128 MiB.
	Tmp int64
	// Pool is how many sandboxes to keep ready, each holding at most one
	// interpreter started ahead of its job; 0 means 2, and a negative
	// value none (every run then pays for building its sandbox and
	// starting its interpreter).
	Pool int
	// PoolMemory bounds the memory, as the sandboxes' cgroups count it,
	// that what waits for jobs may hold in all: the pool's sandboxes with
	// their interpreters, the fork servers and their prepared runs. Once
	// it is reached, nothing more is prepared until runs take some (so the
	// last thing prepared may pass it). 0 means DefaultPoolMemory; a
	// negative value, no bound.
	PoolMemory int64
	// UIDBase is the first host uid given to sandboxes when codecell runs
	// as root; 0 means DefaultUIDBase.
	UIDBase int
	// Resolve looks up the names a network policy lets programs reach,
	// for the proxy that connects them; nil means the host's resolver.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// RootCAs verify the servers the proxy opens TLS to itself, to add a
	// network secret; nil means the host's roots.
	RootCAs *x509.CertPool
	state
}

func (t *Tier) Name() string    { return Name }
func (t *Tier) Isolating() bool { return true }
func (t *Tier) NeedsInit() bool { return true }

// ReachesHosts: a network policy's names are reached through the host's
// proxy, and nothing else is (network_linux.go).
func (t *Tier) ReachesHosts() bool { return true }

// MountsReadOnly: a job's mounts are bound read-only into a sandbox built
// for it.
func (t *Tier) MountsReadOnly() bool { return true }

// CopiesWorkspace: the program works in a tmpfs inside the sandbox, and the
// host's workspace is only copied in and, when it is the caller's, back.
func (t *Tier) CopiesWorkspace() bool { return true }

// TakesRunnerFiles: the runner's files are written into the sandbox from
// the Job, through init's root, as the workspace is copied in.
func (t *Tier) TakesRunnerFiles() bool { return true }

// View: the program sees its workspace and the runner's files at fixed
// paths, whatever their host paths.
func (t *Tier) View(workspace, runner string) codecell.View {
	return codecell.View{Workspace: workspaceDir, Runner: runnerDir}
}

func (t *Tier) tmpSize() int64 {
	if t.Tmp > 0 {
		return t.Tmp
	}
	return 128 << 20
}

// PoolSize is how many sandboxes the tier keeps ready.
func (t *Tier) PoolSize() int { return t.poolSize() }

func (t *Tier) poolSize() int {
	switch {
	case t.Pool < 0:
		return 0
	case t.Pool == 0:
		return 2
	}
	return t.Pool
}

// DefaultPoolMemory is the pool's memory bound when Tier.PoolMemory is 0.
const DefaultPoolMemory = 256 << 20

func (t *Tier) poolMemory() int64 {
	if t.PoolMemory == 0 {
		return DefaultPoolMemory
	}
	return t.PoolMemory
}

func (t *Tier) uidBase() int {
	if t.UIDBase > 0 {
		return t.UIDBase
	}
	return DefaultUIDBase
}

// Report is what this host offers the native sandbox, for codecell doctor.
type Report struct {
	// Namespaces is "" when the namespaces the sandbox needs can be made,
	// else what is missing.
	Namespaces string `json:"namespaces"`
	// Root is whether codecell runs as root: sandboxes then get host uids
	// of their own; otherwise they run as the caller's uid (rootless).
	Root bool `json:"root"`
	// Seccomp is "" when seccomp filters work, else why not.
	Seccomp string `json:"seccomp"`
	// SeccompDenied is how many system calls the filter refuses outright.
	SeccompDenied int `json:"seccomp_denied"`
	// Landlock is the kernel's Landlock ABI version; 0 when absent.
	Landlock int `json:"landlock"`
	// Cgroup is the cgroup version the sandbox's limits use (0: none, and
	// rlimits instead), with its controllers and what is missing.
	Cgroup            int      `json:"cgroup"`
	CgroupControllers []string `json:"cgroup_controllers"`
	CgroupReason      string   `json:"cgroup_reason,omitempty"`
	// CgroupMounts describes every cgroup hierarchy mounted here.
	CgroupMounts []string `json:"cgroup_mounts"`
}

// Recovered is what Recover removed of sandboxes whose codecell process
// died.
type Recovered struct {
	Groups    int // sandbox cgroups removed
	Processes int // sandbox processes killed
}
