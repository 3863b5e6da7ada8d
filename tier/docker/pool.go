package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/moby/moby/client"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/workspace"
)

// The pool keeps containers ready: created and started, their launcher
// connected to the host and waiting for a job, which then pays for neither
// the container's creation nor its start. A ready container is made for the
// settings of the job before it (image, user, memory, processes, CPUs,
// workspace size): a job with other settings gets a container made for it,
// and the pool then turns to its settings. Each container still runs one
// job.

// poolKey is what a ready container was made for.
type poolKey struct {
	image, user string
	memory      int64
	pids        int
	workspace   int64
	cpu         float64
	extra       int
	init        string
}

// DefaultPool is how many containers the tier keeps ready when Tier.Pool
// is 0.
const DefaultPool = 1

func (t *Tier) poolSize() int {
	switch {
	case t.Pool < 0:
		return 0
	case t.Pool == 0:
		return DefaultPool
	}
	return t.Pool
}

type pool struct {
	key     poolKey
	ready   []*run
	filling bool
	closed  bool
	done    chan struct{} // closed when a fill ends
}

// take returns a ready container made for key, or nil.
func (t *Tier) take(key poolKey) *run {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := &t.pool
	if p.key != key || len(p.ready) == 0 {
		return nil
	}
	r := p.ready[0]
	p.ready = p.ready[1:]
	return r
}

// refill makes the pool hold containers for key, in the background.
func (t *Tier) refill(key poolKey) {
	size := t.poolSize()
	if size == 0 {
		return
	}
	t.mu.Lock()
	p := &t.pool
	if p.closed || p.filling {
		t.mu.Unlock()
		return
	}
	var stale []*run
	if p.key != key {
		stale, p.ready, p.key = p.ready, nil, key
	}
	if len(p.ready) >= size {
		t.mu.Unlock()
		return
	}
	p.filling = true
	p.done = make(chan struct{})
	done := p.done
	c := t.cli
	rt := t.runtime
	t.mu.Unlock()
	go func() {
		defer close(done)
		for _, r := range stale {
			r.cleanup()
		}
		for {
			t.mu.Lock()
			enough := p.closed || p.key != key || len(p.ready) >= size
			if enough {
				p.filling = false
				t.mu.Unlock()
				return
			}
			t.mu.Unlock()
			r, err := t.ready(c, rt, key)
			t.mu.Lock()
			if err != nil || p.closed || p.key != key {
				p.filling = false
				t.mu.Unlock()
				if r != nil {
					r.cleanup()
				}
				return
			}
			p.ready = append(p.ready, r)
			t.mu.Unlock()
		}
	}()
}

// ready makes one container for key, starts it, and waits for its
// launcher to connect.
func (t *Tier) ready(c *client.Client, rt string, key poolKey) (*run, error) {
	if c == nil {
		return nil, errors.New("no engine client")
	}
	uid, gid, err := parseUser(key.user)
	if err != nil {
		return nil, err
	}
	id := make([]byte, 6)
	_, _ = rand.Read(id)
	job := &codecell.Job{ID: "ready-" + hex.EncodeToString(id), ExtraFiles: make([]*os.File, key.extra), InitPath: key.init,
		Limits: codecell.Limits{Memory: key.memory, Processes: key.pids, CPU: key.cpu, Workspace: key.workspace}}
	r := &run{t: t, c: c, job: job, image: key.image, uid: uid, gid: gid, runtime: rt, pooled: true}
	ctx, cancel := context.WithTimeout(context.Background(), setupTime)
	defer cancel()
	if err := r.create(ctx); err != nil {
		return r, err
	}
	return r, r.start(ctx)
}

// closePool removes the ready containers and stops filling.
func (t *Tier) closePool() {
	t.mu.Lock()
	p := &t.pool
	p.closed = true
	ready := p.ready
	p.ready = nil
	done := p.done
	t.mu.Unlock()
	if done != nil {
		<-done
	}
	for _, r := range ready {
		r.cleanup()
	}
}

// jobMessage is what a ready container's launcher reads: the job's
// command, its environment, and how many descriptors to connect.
type jobMessage struct {
	Argv  []string `json:"argv"`
	Env   []string `json:"env"`
	Files int      `json:"files"`
	// Links are the workspace's links the engine would not unpack (see
	// ownTar), for the launcher to make before the program starts.
	Links []linkSpec `json:"links,omitempty"`
	// ReadBack is the most content the host reads back (the workspace
	// limit; 0: no bound), for the launcher to leave out beforehand what
	// would take the read-back past it (see leaveReport).
	ReadBack int64 `json:"read_back,omitempty"`
}

// exitMessage is what the launcher writes on ctl.sock when the program has
// ended: its exit code, or the signal that ended it, and what it read of
// the container's cgroup then (nil: nothing).
type exitMessage struct {
	Exit   int           `json:"exit"`
	Signal int           `json:"signal,omitempty"`
	Cgroup *cgroupReport `json:"cgroup,omitempty"`
	Left   *leaveReport  `json:"left,omitempty"`
}

// leaveReport is what the launcher took out of the workspace after the
// program's end, before the host reads it back: the files whose length
// would take the read-back past the job's ReadBack (an archive carries a
// file's holes as zeros: a truncate to a terabyte would cost a terabyte),
// and the fifos, sockets and device nodes, which an archive does not carry
// (or carries as nothing to bring back). The container is removed after
// the read-back: nothing of the caller's is lost with them, and the host
// says what was left. At most maxSkipped of each are named; the counts
// are of all. Names are bytes, relative to the workspace: a name need not
// be UTF-8, which JSON's strings would change.
type leaveReport struct {
	Files    []leftFile `json:"files,omitempty"`
	NFiles   int        `json:"n_files,omitempty"`
	Specials [][]byte   `json:"specials,omitempty"`
	NSpecial int        `json:"n_specials,omitempty"`
}

// leftFile is a file the launcher left out: its name, length and the
// bytes of data it held (the rest of its length is holes).
type leftFile struct {
	Name []byte `json:"name"`
	Size int64  `json:"size"`
	Data int64  `json:"data"`
}

// send hands the job to the container's launcher.
func (r *run) send() error {
	msg, err := json.Marshal(jobMessage{Argv: r.job.Argv, Env: r.job.Env, Files: len(r.job.ExtraFiles), Links: r.links, ReadBack: r.job.Limits.Workspace})
	if err != nil {
		return err
	}
	_, err = r.ctl.Write(append(msg, '\n'))
	return err
}

// copyRunner copies the job's runner files into a ready container, owned
// by root: the program reads them and cannot change them.
func (r *run) copyRunner(ctx context.Context) error {
	root, err := workspace.Open(r.job.Runner)
	if err != nil {
		return err
	}
	defer root.Close()
	raw, rawW := io.Pipe()
	go func() { rawW.CloseWithError(root.WriteTar("", rawW)) }()
	owned, ownedW := io.Pipe()
	go func() { ownedW.CloseWithError(ownTar(ownedW, raw, 0, 0, 0o755, nil)) }()
	_, err = r.c.CopyToContainer(ctx, r.id, client.CopyToContainerOptions{DestinationPath: runnerDir, Content: owned})
	owned.CloseWithError(errors.New("not read"))
	raw.CloseWithError(errors.New("not read"))
	if err != nil {
		return fmt.Errorf("copying the runner's files into the container: %w", err)
	}
	return nil
}

// PoolReady is how many containers are ready for a job now.
func (t *Tier) PoolReady() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.pool.ready)
}

// PoolSize is how many containers the tier keeps ready.
func (t *Tier) PoolSize() int { return t.poolSize() }

// PoolUsed reports whether the pool has been asked for containers: it
// readies them for the settings of a run, so it is empty until the first.
func (t *Tier) PoolUsed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.pool.key != (poolKey{})
}
