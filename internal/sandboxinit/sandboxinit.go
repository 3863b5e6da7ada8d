// Package sandboxinit is the native sandbox's init: the code that runs
// inside the sandbox when the codecell binary is re-executed as its init
// (tier/native), with the control protocol it speaks to the host.
//
// Its init function catches the two init stages before any other package
// of the binary is initialised but those this one needs, which are the
// standard library's and golang.org/x/sys/unix: the sandbox's init, on the
// path of every sandbox built, does not pay the initialisers of the
// binary's heavy libraries (a JavaScript engine, an MCP SDK, metrics).
// Go initialises a package once every package it imports is initialised,
// and among those ready, the first in import path order; a package whose
// path sorts early and that imports little is reached early. So this
// package must import nothing heavy, nor the root package
// github.com/codecell-dev/codecell; a test in cmd/codecell holds it to that.
//
// Every other process returns from its init at once.
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

// Paths inside the sandbox.
const (
	WorkspaceDir = "/workspace"
	RunnerDir    = "/run/codecell"
)
