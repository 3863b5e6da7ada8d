//go:build linux

package native

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/workspace"
)

// Live sessions (codecell.LiveTier). A live session's interpreter is a
// program like any other — started by a sandbox's init, confined as a
// program is, as the program's user — in a sandbox built for that session
// alone, with the session's limits. It is not torn down when a cell ends:
// the sandbox, its namespaces, its cgroup and its tmpfs workspace last as
// long as the interpreter. The session's workspace on the host and the
// sandbox's copy are kept in step around each cell: what changed on the
// host (an upload, a file an Exec brought) goes in before it, what the
// cell changed comes back after it.

// liveSandbox is a live session's interpreter and its sandbox, on the
// host's side.
type liveSandbox struct {
	sb  *sandbox
	job *codecell.Job
	iso codecell.Isolation

	mu       sync.Mutex // guards the snapshots
	inside   *workspace.Snapshot
	onHost   *workspace.Snapshot
	done     chan struct{}
	exit     *codecell.Outcome // how the interpreter ended, once done
	killOnce sync.Once
}

// StartLive starts job.Argv as a live session's interpreter, in a sandbox
// of its own, and leaves it running.
func (t *Tier) StartLive(ctx context.Context, job *codecell.Job) (codecell.LiveProgram, error) {
	if err := t.canRun(job); err != nil {
		return nil, err
	}
	// The session's mounts (its packages) and network, for the
	// interpreter's life.
	sb, job, err := t.spawnFor(job)
	if err != nil {
		return nil, err
	}
	lp := &liveSandbox{sb: sb, job: job, done: make(chan struct{})}
	lp.iso = sb.isolation(job)
	if sb.px != nil {
		lp.iso.Network = networkIsolation(sb.network)
	}
	lp.iso.Interpreter = "started for this live session, in a sandbox of its own: the session's cells share it, and no other session or run does"
	before, rlimits, warnings, err := sb.setUp(job)
	if err == nil {
		lp.inside = before
		lp.onHost, err = workspace.Take(job.Workspace)
	}
	if err != nil {
		sb.close()
		return nil, err
	}
	_ = warnings // the same for every cell: Isolation says what stood in
	wait, err := sb.startJob(job, jobSpec{Argv: job.Argv, Env: job.Env, Dir: workspaceDir, Rlimits: rlimits})
	if err != nil {
		sb.close()
		return nil, err
	}
	// As for a run (see sandbox.run): init out of the OOM killer's reach,
	// after the interpreter's fork.
	_ = os.WriteFile(fmt.Sprintf("/proc/%d/oom_score_adj", sb.pid), []byte("-1000"), 0)
	t.coldRuns.Add(1)
	go lp.watch(wait)
	return lp, nil
}

// watch waits for the interpreter to end, and says how it did.
func (lp *liveSandbox) watch(wait func()) {
	sb := lp.sb
	var exited *exitInfo
	for {
		var m message
		fds, err := sb.c.Recv(&m)
		if err != nil {
			break
		}
		if m.Conn != nil && len(fds) == 1 && sb.px != nil {
			// A connection the interpreter opened: the proxy's to serve.
			sb.px.serve(m.Conn, fds[0])
			continue
		}
		closeAll(fds)
		if m.Exited != nil {
			exited = m.Exited
			break
		}
	}
	wait()
	out := &codecell.Outcome{Isolation: lp.iso, ExitCode: -1, Signal: int(syscall.SIGKILL)}
	if exited != nil {
		out.ExitCode, out.Signal = exited.ExitCode, exited.Signal
	}
	sb.noteMemory(out)
	lp.exit = out
	close(lp.done)
}

func (lp *liveSandbox) Done() <-chan struct{}         { return lp.done }
func (lp *liveSandbox) Isolation() codecell.Isolation { return lp.iso }
func (lp *liveSandbox) MemoryUsage() int64            { return lp.sb.memoryUsage() }

// Exit says how the interpreter ended; nil while it runs.
func (lp *liveSandbox) Exit() *codecell.Outcome {
	select {
	case <-lp.done:
		return lp.exit
	default:
		return nil
	}
}

// Interrupt sends the interpreter SIGINT.
func (lp *liveSandbox) Interrupt() error {
	return lp.sb.c.Send(message{Interrupt: true})
}

// Kill ends the interpreter and everything it started; the sandbox stays,
// and its workspace can still be brought back.
func (lp *liveSandbox) Kill() {
	lp.killOnce.Do(func() {
		if lp.sb.c.Send(message{Kill: true}) != nil {
			lp.sb.kill()
			return
		}
		go func() {
			select {
			case <-lp.done:
			case <-time.After(5 * time.Second):
				lp.sb.kill()
			}
		}()
	})
}

// SyncIn brings into the sandbox what changed in the host's workspace
// since the last sync.
func (lp *liveSandbox) SyncIn() error {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	host := lp.job.Workspace
	// Files without their owner's read permission are read as setUp
	// reads them (workspace.Unlock).
	locked := workspace.Unlock(host)
	defer locked.Restore(host)
	now, err := workspace.Take(host)
	if err != nil {
		return err
	}
	changes, err := workspace.Diff(lp.onHost, now, host)
	if err != nil {
		return err
	}
	if len(changes) == 0 {
		return nil
	}
	_, programOwner := lp.sb.id.owners()
	ws := lp.sb.workspace()
	if errs := locked.Apply(changes, host, ws, programOwner); len(errs) > 0 {
		return workspaceCopyError(errors.Join(errs...), lp.job.Limits)
	}
	lp.onHost = now
	// What came in is not the next cell's doing.
	lp.inside, err = workspace.Take(ws)
	return err
}

// SyncOut brings back to the host's workspace what changed in the
// sandbox's since the last sync, and lists it.
func (lp *liveSandbox) SyncOut() ([]codecell.FileChange, []string) {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	files, after, warnings := lp.sb.bringBack(lp.inside, lp.job, true)
	if after != nil {
		lp.inside = after
	}
	if now, err := workspace.Take(lp.job.Workspace); err == nil {
		lp.onHost = now
	}
	return files, warnings
}

// Close ends the interpreter and tears its sandbox down.
func (lp *liveSandbox) Close() {
	lp.sb.t.bg.Add(1)
	defer lp.sb.t.bg.Done()
	lp.sb.close()
	<-lp.done
	if lp.sb.px != nil {
		lp.sb.px.finish()
	}
}

// TakeConnections lists the connections the interpreter made that ended
// since the last call: a cell's, mostly (one still open when its cell
// ends is listed with the next).
func (lp *liveSandbox) TakeConnections() []codecell.NetworkConnection {
	if lp.sb.px == nil {
		return nil
	}
	return lp.sb.px.take()
}

var (
	_ codecell.LiveTier    = (*Tier)(nil)
	_ codecell.LiveNetwork = (*liveSandbox)(nil)
)
