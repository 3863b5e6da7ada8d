//go:build linux

package native

import (
	"testing"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/sandboxinit"
	"github.com/codecell-dev/codecell/internal/workspace"
)

// internal/sandboxinit imports neither the root package nor
// internal/workspace, for what they import: what it shares with them
// must agree.
func TestSandboxInitAgrees(t *testing.T) {
	if sandboxinit.InitArg0 != codecell.InitArg0 {
		t.Errorf("init's argv[0] %q, codecell.InitArg0 %q", sandboxinit.InitArg0, codecell.InitArg0)
	}
	if sandboxinit.Stage != Name {
		t.Errorf("init stage %q, tier %q", sandboxinit.Stage, Name)
	}
	if sandboxinit.MaxWorkspaceEntries != workspace.MaxWorkspaceEntries {
		t.Errorf("init bounds a workspace to %d entries, internal/workspace to %d", sandboxinit.MaxWorkspaceEntries, workspace.MaxWorkspaceEntries)
	}
}
