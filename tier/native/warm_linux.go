//go:build linux

package native

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/codecell-dev/codecell/internal/fdrelay"

	"golang.org/x/sys/unix"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/instdir"
	"github.com/codecell-dev/codecell/internal/workspace"
)

// Warm interpreters. A ready sandbox may hold its job's interpreter already
// started, its runner loaded, waiting on a pipe for the job (see
// codecell.WarmStart): a run then pays for its own code only. The
// interpreter is started as the program would be — by the sandbox's init,
// confined as the program is, as the program's user — and serves exactly
// one job, in the one sandbox it was started in, which is torn down after
// it as every sandbox is. Nothing of it outlives its run, so no run sees
// what another left.
//
// Which interpreters the pool starts follows demand: the warm keys of the
// last jobs decide how many of the pool's sandboxes hold each.

// warmProc is an interpreter started ahead of its job, on the host's side.
type warmProc struct {
	key      string
	language string
	rlimits  []rlimit
	// The host's ends of its descriptors.
	stdin, stdout, stderr, control *os.File
	sockets                        []*os.File
}

func (w *warmProc) close() {
	for _, f := range append([]*os.File{w.stdin, w.stdout, w.stderr, w.control}, w.sockets...) {
		if f != nil {
			f.Close()
		}
	}
}

// warmable reports whether the job can run in an interpreter started before
// it: it says how, and its environment changes nothing the interpreter
// decided at its start.
func (t *Tier) warmable(job *codecell.Job) bool {
	w := job.Warm
	return w != nil && w.Key != "" && len(w.Argv) > 0 && w.Extra == len(job.ExtraFiles) && w.Extra <= 8
}

// demand is what recent jobs asked for, in the pool's words. The tier's
// poolMu guards it.
type demand struct {
	recent   []string               // warm keys of the last jobs, oldest first; "" for none
	specs    map[string]*demandSpec // by key, while the key is recent
	building int                    // sandboxes being built or warmed now
	lastErr  error                  // why the last interpreter could not be started
}

type demandSpec struct {
	warm   codecell.WarmStart // without its Message
	limits codecell.Limits
	lang   string
}

// specOf is what starts the interpreter of a job that has a warm start.
func specOf(job *codecell.Job) *demandSpec {
	ds := &demandSpec{warm: *job.Warm, limits: job.Limits, lang: job.Language}
	ds.warm.Message = nil // the job's own
	return ds
}

// note records a job's warm key ("" for a job that has none that fits); n
// is the pool's size.
func (d *demand) note(key string, job *codecell.Job, n int) {
	d.recent = append(d.recent, key)
	if keep := 4*n + 4; len(d.recent) > keep {
		d.recent = slices.Delete(d.recent, 0, len(d.recent)-keep)
	}
	if d.specs == nil {
		d.specs = map[string]*demandSpec{}
	}
	if key != "" {
		d.specs[key] = specOf(job)
	}
	for k := range d.specs {
		if !slices.Contains(d.recent, k) {
			delete(d.specs, k)
		}
	}
}

// targets shares n sandboxes among the recent warm keys, in proportion to
// how often each was asked for, each at least one while there is room.
func (d *demand) targets(n int) map[string]int {
	counts := map[string]int{}
	for _, k := range d.recent {
		counts[k]++
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		if k != "" {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if counts[keys[i]] != counts[keys[j]] {
			return counts[keys[i]] > counts[keys[j]]
		}
		return keys[i] < keys[j]
	})
	out := map[string]int{}
	total := 0
	for _, k := range keys {
		share := n * counts[k] / len(d.recent)
		if share == 0 && total < n {
			share = 1
		}
		share = min(share, n-total)
		out[k] = share
		total += share
	}
	return out
}

// lacking returns the warm key most short of its target among the ready
// sandboxes, with what starts it; nil when none is.
func (d *demand) lacking(ready []*sandbox) (string, *demandSpec) {
	if len(d.specs) == 0 {
		return "", nil
	}
	have := map[string]int{}
	for _, sb := range ready {
		if sb.warm != nil {
			have[sb.warm.key]++
		}
	}
	bestKey, best := "", 0
	for k, want := range d.targets(len(ready) + d.building) {
		if short := want - have[k]; short > best && d.specs[k] != nil {
			bestKey, best = k, short
		}
	}
	if best == 0 {
		return "", nil
	}
	return bestKey, d.specs[bestKey]
}

// warmDir returns a host directory holding the files of a warm key,
// written once.
func (t *Tier) warmDir(spec *codecell.WarmStart) (string, error) {
	t.poolMu.Lock()
	dir, ok := t.warmDirs[spec.Key]
	t.poolMu.Unlock()
	if ok {
		return dir, nil
	}
	// In this process's own directory, not the shared temporary
	// directory: Close removes them, but a process that ends without it
	// (killed, or one that never closes its tier) leaves them to the next
	// codecell process, which removes them with the directory.
	parent, _ := instdir.Process()
	dir, err := os.MkdirTemp(parent, "codecell-warm-")
	if err != nil {
		return "", err
	}
	for name, data := range spec.Files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			os.RemoveAll(dir)
			return "", err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			os.RemoveAll(dir)
			return "", err
		}
	}
	t.poolMu.Lock()
	defer t.poolMu.Unlock()
	if t.closed.Load() {
		os.RemoveAll(dir)
		return "", errors.New("closed")
	}
	if old, ok := t.warmDirs[spec.Key]; ok {
		os.RemoveAll(dir)
		return old, nil
	}
	if t.warmDirs == nil {
		t.warmDirs = map[string]string{}
	}
	t.warmDirs[spec.Key] = dir
	return dir, nil
}

// startWarm starts the interpreter of spec in a ready sandbox.
func (t *Tier) startWarm(sb *sandbox, spec *demandSpec) error {
	dir, err := t.warmDir(&spec.warm)
	if err != nil {
		return err
	}
	root := fmt.Sprintf("/proc/%d/root", sb.pid)
	initOwner, _ := sb.id.owners()
	if err := workspace.CopyTree(dir, root+runnerDir, initOwner); err != nil {
		return fmt.Errorf("copying the interpreter's files into the sandbox: %w", err)
	}
	rlimits, _ := sb.fallbacks(spec.limits)
	w := &warmSpec{Argv: spec.warm.Argv, Env: spec.warm.Env, Dir: workspaceDir, Extra: spec.warm.Extra, Rlimits: rlimits}
	if err := sb.c.Send(message{Warm: w}); err != nil {
		return sb.failure("starting the interpreter", err)
	}
	var m message
	fds, err := sb.recvFDs(&m, 30*time.Second)
	if err != nil {
		return sb.failure("starting the interpreter", err)
	}
	if m.Error != "" || m.Warmed == 0 || len(fds) != 4+w.Extra {
		closeAll(fds)
		if m.Error != "" {
			return errors.New(m.Error)
		}
		return errors.New("init answered the interpreter's start without its descriptors")
	}
	files := make([]*os.File, len(fds))
	for i, fd := range fds {
		// Non-blocking, so that closing one ends a read or write on it.
		_ = unix.SetNonblock(fd, true)
		files[i] = os.NewFile(uintptr(fd), "warm")
	}
	wp := &warmProc{
		key: spec.warm.Key, language: spec.lang, rlimits: rlimits,
		stdin: files[0], stdout: files[1], stderr: files[2], control: files[3], sockets: files[4:],
	}
	// Ready means loaded: the interpreter's byte on its first socket says
	// so. (init ends an interpreter that never says it before a job that
	// starts its own.)
	if len(wp.sockets) == 0 {
		wp.close()
		return errors.New("a warm interpreter needs its result channel")
	}
	var b [1]byte
	_ = wp.sockets[0].SetReadDeadline(time.Now().Add(30 * time.Second))
	n, err := wp.sockets[0].Read(b[:])
	_ = wp.sockets[0].SetReadDeadline(time.Time{})
	if n != 1 || b[0] != 'R' {
		wp.close()
		if err == nil {
			err = errors.New("it wrote something else first")
		}
		return fmt.Errorf("the interpreter did not say it was ready: %w", err)
	}
	sb.warm = wp
	return nil
}

// errWarmLost says the interpreter started for a job ended before it: the
// job runs again in a sandbox of its own.
var errWarmLost = errors.New("the interpreter started for this job has ended")

// startWarmJob hands the job to the sandbox's warm interpreter: init
// adopts it as the program, and the interpreter reads the job's Message.
// The returned wait blocks until the program's output and channels are
// done with, and cuts what is left.
func (sb *sandbox) startWarmJob(job *codecell.Job, js jobSpec) (wait func(), err error) {
	w := sb.warm
	js.Warm = true
	js.Argv, js.Env = nil, nil
	if err := sb.c.Send(message{Job: &js}); err != nil {
		return nil, sb.failure("sending the job", err)
	}
	var m message
	if err := sb.recvTimeout(&m, 30*time.Second); err != nil || m.Started == 0 {
		if m.Error != "" {
			return nil, errWarmLost
		}
		return nil, sb.failure("starting the program", err)
	}
	go func() {
		// A job's message may be larger than a pipe holds: the interpreter
		// reads it while this writes.
		_, _ = w.control.Write(job.Warm.Message)
		w.control.Close()
	}()
	var copying sync.WaitGroup
	pipeStdio(job, w.stdin, w.stdout, w.stderr, &copying)
	var stops []func()
	for i, sock := range w.sockets {
		done, stop, err := fdrelay.Relay(sock, job.ExtraFiles[i])
		if err != nil {
			// The program's side still ends; its channel stays silent.
			sock.Close()
			continue
		}
		copying.Add(1)
		go func() { defer copying.Done(); <-done }()
		stops = append(stops, stop)
	}
	return func() {
		copying.Wait()
		for _, stop := range stops {
			stop()
		}
	}, nil
}
