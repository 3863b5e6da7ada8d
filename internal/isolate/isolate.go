// Package isolate runs functions on untrusted input in a child process, so
// that a crash, a blow-up in memory or a run that never ends costs one call,
// never the calling process.
//
// The parsers codecell runs on the host (esbuild for JavaScript and
// TypeScript, goja in the guardrails, mvdan.cc/sh for shell) are written in
// Go: a program nested deeply enough overflows Go's stack, which is a fatal
// error no recover catches, and some inputs make them grow their output or
// their time out of proportion to the input. A Pool keeps a few worker
// processes (the running binary, re-executed) that serve such calls one at a
// time, each with a bounded heap, a bounded stack and a deadline; a worker
// that dies is replaced, and the call that killed it gets a *Failure.
package isolate

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Limits of a worker process.
const (
	// StackLimit bounds one goroutine's stack in a worker. Go's default of
	// 1 GB lets a deep recursion use the whole heap before it fails.
	StackLimit = 128 << 20
	// maxFrame bounds one request or answer on the wire.
	maxFrame = 256 << 20
)

// Func is a function a worker can run: it reads its input and writes its
// output as JSON. An error is returned to the caller as a plain error.
type Func func(in json.RawMessage) (out any, err error)

var (
	funcsMu sync.RWMutex
	funcs   = map[string]Func{}
)

// Register makes fn callable by name in workers. Register from an init
// function, so that the worker, which is the same binary, has it too.
func Register(name string, fn Func) {
	funcsMu.Lock()
	defer funcsMu.Unlock()
	if _, dup := funcs[name]; dup {
		panic(fmt.Sprintf("isolate: %q registered twice", name))
	}
	funcs[name] = fn
}

// Local runs the registered function name in this process, as a worker
// would: for callers that have no binary to re-execute.
func Local(name string, in, out any) error {
	raw, err := json.Marshal(in)
	if err != nil {
		return err
	}
	ans := call(name, raw)
	if ans.Err != "" {
		return errors.New(ans.Err)
	}
	return json.Unmarshal(ans.Out, out)
}

type request struct {
	Fn string          `json:"fn"`
	In json.RawMessage `json:"in"`
}

type answer struct {
	Out json.RawMessage `json:"out,omitempty"`
	Err string          `json:"err,omitempty"`
}

func call(name string, in json.RawMessage) (ans answer) {
	funcsMu.RLock()
	fn := funcs[name]
	funcsMu.RUnlock()
	if fn == nil {
		return answer{Err: fmt.Sprintf("this binary has no function %q to run", name)}
	}
	defer func() {
		if p := recover(); p != nil {
			ans = answer{Err: fmt.Sprintf("panic: %v", p)}
		}
	}()
	out, err := fn(in)
	if err != nil {
		return answer{Err: err.Error()}
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return answer{Err: err.Error()}
	}
	return answer{Out: raw}
}

// Serve is a worker's main: it answers requests on standard input, one at
// a time, until standard input ends. It never returns.
func Serve() {
	debug.SetMaxStack(StackLimit)
	debug.SetMemoryLimit(MemoryLimit / 2)
	lim := unix.Rlimit{Cur: MemoryLimit, Max: MemoryLimit}
	if err := unix.Setrlimit(unix.RLIMIT_DATA, &lim); err != nil {
		fmt.Fprintf(os.Stderr, "isolate: bounding memory: %v\n", err)
		os.Exit(125)
	}
	// A worker has no use for core dumps or for more than a thread or two
	// of parallel work.
	_ = unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{})
	runtime.GOMAXPROCS(min(runtime.GOMAXPROCS(0), 2))
	in, out := os.Stdin, os.Stdout
	for {
		raw, err := readFrame(in)
		if err != nil {
			if err != io.EOF {
				fmt.Fprintf(os.Stderr, "isolate: %v\n", err)
				os.Exit(125)
			}
			os.Exit(0)
		}
		var req request
		var ans answer
		if err := json.Unmarshal(raw, &req); err != nil {
			ans.Err = "bad request: " + err.Error()
		} else {
			ans = call(req.Fn, req.In)
		}
		raw, err = json.Marshal(ans)
		if err == nil && len(raw) > maxFrame {
			raw, err = json.Marshal(answer{Err: fmt.Sprintf("the answer is %d bytes, more than %d", len(raw), maxFrame)})
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "isolate: %v\n", err)
			os.Exit(125)
		}
		if err := writeFrame(out, raw); err != nil {
			os.Exit(0) // the caller is gone
		}
	}
}

func readFrame(r io.Reader) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > maxFrame {
		return nil, fmt.Errorf("a frame of %d bytes is more than %d", size, maxFrame)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(r, b); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return b, nil
}

func writeFrame(w io.Writer, b []byte) error {
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(b)))
	_, err := w.Write(append(n[:], b...))
	return err
}

// Failure is a call whose worker died or ran out of time: the input, not
// the caller, is what went wrong.
type Failure struct {
	// Reason says why, in words: "ran out of stack (the input nests too
	// deeply)", "ran out of memory", "took longer than 10s".
	Reason string
	// Detail is the start of what the worker wrote to its standard error.
	Detail string
}

func (f *Failure) Error() string { return "the parser " + f.Reason }

// Pool is a set of worker processes. Its zero value is not usable; set Path.
type Pool struct {
	// Path and Args start a worker: the binary, and its argv (argv[0]
	// included), which must lead it to Serve.
	Path string
	Args []string
	// Max bounds the workers running at once; callers past it wait. Zero
	// means the number of CPUs, at least 2 and at most 4.
	Max int
	// PerOwner bounds the workers running at once for one owner (see
	// WithOwner); the owner's callers past it wait, and leave the other
	// workers to other owners. Zero means Max-1, at least 1. Calls
	// without an owner are bounded by Max only.
	PerOwner int
	// A call's time is bounded in proportion to its input: Base, plus
	// PerMiB for each MiB of input, at most Timeout. An input that takes
	// far longer than its size would let it is refused sooner the smaller
	// it is, and a worker's time stays proportional to what it was given.
	// Zero means 1 second, 30 seconds per MiB (about 6 seconds for
	// 200,000 bytes) and 10 seconds; built with the race detector, which
	// slows a worker several times, the defaults are 8 times as long.
	Base, PerMiB, Timeout time.Duration
	// Idle is how long an unused worker is kept; zero means a minute.
	Idle time.Duration

	once     sync.Once
	slots    chan struct{}
	perOwner int
	mu       sync.Mutex
	idle     []*worker
	reap     *time.Timer
	owners   map[string]*ownerSlots
}

// ownerSlots are the workers one owner holds; refs counts its callers, so
// that an owner without any is forgotten.
type ownerSlots struct {
	held chan struct{}
	refs int
}

type ownerKey struct{}

// WithOwner returns a context whose calls count against owner's share of
// a Pool's workers (see Pool.PerOwner): the principal a request is made
// for, so that one client's inputs cannot hold every worker.
func WithOwner(ctx context.Context, owner string) context.Context {
	return context.WithValue(ctx, ownerKey{}, owner)
}

func ownerOf(ctx context.Context) string {
	s, _ := ctx.Value(ownerKey{}).(string)
	return s
}

// Budget is how long a call with an input of size bytes (as JSON) may run.
func (p *Pool) Budget(size int) time.Duration {
	base, perMiB, limit := p.Base, p.PerMiB, p.Timeout
	if base <= 0 {
		base = time.Second * slowdown
	}
	if perMiB <= 0 {
		perMiB = 30 * time.Second * slowdown
	}
	if limit <= 0 {
		limit = 10 * time.Second * slowdown
	}
	return min(limit, base+time.Duration(float64(perMiB)*float64(size)/(1<<20))).Round(time.Millisecond)
}

type worker struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.ReadCloser
	stderr *headBuffer
	used   time.Time
}

// Call runs the function name on in, in a worker, and decodes its output
// into out. It returns a *Failure when the worker died or ran out of time,
// ctx's error when ctx ended first, and a plain error when the function
// itself failed or no worker could start.
func (p *Pool) Call(ctx context.Context, name string, in, out any) error {
	p.once.Do(func() {
		n := p.Max
		if n <= 0 {
			n = min(max(runtime.NumCPU(), 2), 4)
		}
		p.slots = make(chan struct{}, n)
		p.perOwner = p.PerOwner
		if p.perOwner <= 0 {
			p.perOwner = max(n-1, 1)
		}
	})
	raw, err := json.Marshal(request{Fn: name, In: mustRaw(in)})
	if err != nil {
		return err
	}
	if len(raw) > maxFrame {
		return fmt.Errorf("the input is %d bytes, more than %d", len(raw), maxFrame)
	}
	if owner := ownerOf(ctx); owner != "" {
		release, err := p.holdForOwner(ctx, owner)
		if err != nil {
			return err
		}
		defer release()
	}
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-p.slots }()
	w, err := p.take()
	if err != nil {
		return err
	}
	timeout := p.Budget(len(raw))
	type result struct {
		raw []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		if err := writeFrame(w.stdin, raw); err != nil {
			done <- result{err: err}
			return
		}
		b, err := readFrame(w.stdout)
		done <- result{b, err}
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var r result
	select {
	case r = <-done:
	case <-timer.C:
		w.kill()
		<-done
		_ = w.cmd.Wait()
		return &Failure{Reason: "took longer than " + timeout.String() + " (the input is too complex to read in time)"}
	case <-ctx.Done():
		w.kill()
		<-done
		_ = w.cmd.Wait()
		return ctx.Err()
	}
	if r.err != nil {
		return w.died()
	}
	p.put(w)
	var ans answer
	if err := json.Unmarshal(r.raw, &ans); err != nil {
		return fmt.Errorf("a bad answer from the worker: %v", err)
	}
	if ans.Err != "" {
		return errors.New(ans.Err)
	}
	return json.Unmarshal(ans.Out, out)
}

// holdForOwner waits for one of owner's share of the workers, and returns
// the function that gives it back.
func (p *Pool) holdForOwner(ctx context.Context, owner string) (release func(), err error) {
	p.mu.Lock()
	if p.owners == nil {
		p.owners = map[string]*ownerSlots{}
	}
	o := p.owners[owner]
	if o == nil {
		o = &ownerSlots{held: make(chan struct{}, p.perOwner)}
		p.owners[owner] = o
	}
	o.refs++
	p.mu.Unlock()
	forget := func() {
		p.mu.Lock()
		if o.refs--; o.refs == 0 {
			delete(p.owners, owner)
		}
		p.mu.Unlock()
	}
	select {
	case o.held <- struct{}{}:
		return func() { <-o.held; forget() }, nil
	case <-ctx.Done():
		forget()
		return nil, ctx.Err()
	}
}

func mustRaw(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(err.Error())
	}
	return b
}

func (p *Pool) take() (*worker, error) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		w := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return w, nil
	}
	p.mu.Unlock()
	cmd := &exec.Cmd{Path: p.Path, Args: p.Args, Env: os.Environ()}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	w := &worker{cmd: cmd, stdin: stdin, stdout: stdout, stderr: &headBuffer{max: 8 << 10}}
	cmd.Stderr = w.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting a parser worker (%s): %v", p.Path, err)
	}
	return w, nil
}

func (p *Pool) put(w *worker) {
	w.used = time.Now()
	idle := p.Idle
	if idle <= 0 {
		idle = time.Minute
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.idle = append(p.idle, w)
	if p.reap == nil {
		p.reap = time.AfterFunc(idle, func() { p.reapIdle(idle) })
	}
}

// reapIdle ends the workers unused for idle, and comes back while some
// remain.
func (p *Pool) reapIdle(idle time.Duration) {
	p.mu.Lock()
	var old []*worker
	keep := p.idle[:0]
	for _, w := range p.idle {
		if time.Since(w.used) >= idle {
			old = append(old, w)
		} else {
			keep = append(keep, w)
		}
	}
	p.idle = keep
	p.reap = nil
	if len(keep) > 0 {
		p.reap = time.AfterFunc(idle, func() { p.reapIdle(idle) })
	}
	p.mu.Unlock()
	for _, w := range old {
		w.close()
	}
}

// Close ends the idle workers; calls under way finish first.
func (p *Pool) Close() {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	if p.reap != nil {
		p.reap.Stop()
		p.reap = nil
	}
	p.mu.Unlock()
	for _, w := range idle {
		w.close()
	}
}

// close ends an idle worker: its standard input ends, and so does it.
func (w *worker) close() {
	w.stdin.Close()
	done := make(chan struct{})
	go func() {
		_ = w.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		w.kill()
		<-done
	}
}

func (w *worker) kill() {
	_ = w.cmd.Process.Kill()
	w.stdin.Close()
}

// died reports why a worker ended in the middle of a call.
func (w *worker) died() *Failure {
	w.kill()
	_ = w.cmd.Wait()
	detail := w.stderr.String()
	f := &Failure{Reason: "ended without answering", Detail: detail}
	switch {
	case strings.Contains(detail, "stack overflow") || strings.Contains(detail, "stack exceeds"):
		f.Reason = "ran out of stack (the input nests too deeply)"
	case strings.Contains(detail, "out of memory") || strings.Contains(detail, "cannot allocate memory") || strings.Contains(detail, "failed to allocate"):
		f.Reason = fmt.Sprintf("ran out of memory (more than %d MiB for one input)", MemoryLimit>>20)
	default:
		if st := w.cmd.ProcessState; st != nil {
			f.Reason = "ended without answering (" + st.String() + ")"
		}
	}
	return f
}

// headBuffer keeps the first max bytes written to it.
type headBuffer struct {
	mu  sync.Mutex
	max int
	buf bytes.Buffer
}

func (b *headBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (b *headBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
