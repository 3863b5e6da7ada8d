// Package sandboxinit is the native sandbox's init: the code that runs
// inside the sandbox when the codecell binary is re-executed as its init
// (tier/native is the host's side), and the control protocol the two speak.
//
// Its init function runs the stage the process was started as, and never
// returns then; every other process returns from it at once. The stages
// run on the path of every sandbox built, so they must not wait for the
// initialisers of the binary's heavy libraries (a JavaScript engine and
// transpiler, the MCP SDK, metrics, Docker's client). Go initialises a
// package once every package it imports is initialised, and among those
// ready, the first by import path: this package is reached as soon as what
// it imports is, so it imports only the standard library,
// golang.org/x/sys/unix and light internal packages, never the root
// package github.com/codecell-dev/codecell. Nor net, net/netip or
// path/filepath, whose initialisers Go reaches only after most of the
// binary's. A test in cmd/codecell (GODEBUG=inittrace=1) holds it to that.
package sandboxinit

// InitArg0 is the argv[0] of the re-executed binary, as for every tier's
// init stage (codecell.InitArg0, which a test holds equal to this).
const InitArg0 = "codecell-init"

// The init stages' names: argv[1] of the re-executed binary.
const (
	// Stage builds the sandbox and confines itself (initStage); it is the
	// native tier's name.
	Stage = "native"
	// RunStage runs the job (runStage).
	RunStage = Stage + "-run"
)

// InitUID is init's uid inside the sandbox: root of its user namespace.
const InitUID = 0

// MaxWorkspaceEntries is internal/workspace's MaxWorkspaceEntries, the
// files, directories and links a workspace may hold, which bounds the
// inodes of the sandbox's workspace. internal/workspace is not imported
// here, for what it imports (net/http among them); tier/native's tests
// hold the two equal.
const MaxWorkspaceEntries = 100_000

// TmpfsInodes is how many files, directories and links a tmpfs of size
// bytes may hold: as many as it holds 4 KiB blocks (at least 1024), and at
// most max when max > 0. Each entry costs an inode, so that a run cannot
// fill the disk its workspace is copied back to with empty entries. The
// workspace's max is MaxWorkspaceEntries+1 (its root is an inode too): the
// snapshots after a run see every change, so copy-back neither misses a
// file nor leaves one unreported. Every tier's workspace is bounded so.
func TmpfsInodes(size, max int64) int64 {
	inodes := size / 4096
	if inodes < 1024 {
		inodes = 1024
	}
	if max > 0 && inodes > max {
		inodes = max
	}
	return inodes
}

// Paths inside the sandbox.
const (
	WorkspaceDir = "/workspace"
	RunnerDir    = "/run/codecell"
)
