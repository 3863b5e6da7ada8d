//go:build linux

package native

import (
	"os"

	"github.com/codecell-dev/codecell/internal/sandboxinit"
)

// The sandbox's init and the protocol the host speaks to it live in
// internal/sandboxinit, which the re-executed binary runs before the rest
// of it is initialised. These are its names on the host's side.

type (
	message       = sandboxinit.Message
	spawnSpec     = sandboxinit.SpawnSpec
	netSpec       = sandboxinit.NetSpec
	bindSpec      = sandboxinit.BindSpec
	hostAddr      = sandboxinit.HostAddr
	connInfo      = sandboxinit.ConnInfo
	jobSpec       = sandboxinit.JobSpec
	warmSpec      = sandboxinit.WarmSpec
	rlimit        = sandboxinit.Rlimit
	readyInfo     = sandboxinit.ReadyInfo
	exitInfo      = sandboxinit.ExitInfo
	conn          = sandboxinit.Conn
	templateSpec  = sandboxinit.TemplateSpec
	forkConfig    = sandboxinit.ForkConfig
	forkSpec      = sandboxinit.ForkSpec
	mountSpec     = sandboxinit.MountSpec
	landlockRules = sandboxinit.LandlockRules
)

const (
	initCaps     = sandboxinit.InitCaps
	caBundlePath = sandboxinit.CABundlePath
	caPath       = sandboxinit.CAPath
)

// systemDirs and etcEntries are what every sandbox shows of the host.
var (
	systemDirs = sandboxinit.SystemDirs()
	etcEntries = sandboxinit.EtcEntries()
)

func newConn(f *os.File) *conn                     { return sandboxinit.NewConn(f) }
func closeAll(fds []int)                           { sandboxinit.CloseAll(fds) }
func socketPair() (host, init *os.File, err error) { return sandboxinit.SocketPair() }

// SystemDirs returns the host directories a sandbox sees, read-only, at
// the same paths. Those that are symbolic links on the host (/bin → usr/bin
// on merged-/usr systems) become the same links. Tier.ExtraMounts adds to
// them; the list itself is fixed, so that no caller widens every sandbox.
func SystemDirs() []string { return sandboxinit.SystemDirs() }

// EtcEntries returns the entries of the host's /etc a sandbox sees: the
// loader's cache, TLS certificates, the alternatives that Debian's commands
// are links through, time zones, fonts and interpreters' configuration. No
// account, credential or network configuration of the host is among them;
// passwd, group, hosts and the rest are written fresh for the sandbox.
func EtcEntries() []string { return sandboxinit.EtcEntries() }

// LandlockABI returns the kernel's Landlock ABI version, or 0 when Landlock
// is not available (not built in, or not enabled at boot).
func LandlockABI() int { return sandboxinit.LandlockABI() }
