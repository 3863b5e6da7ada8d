package codecell

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/codecell-dev/codecell/internal/jsonkeys"
	"golang.org/x/sys/unix"
)

// A fork of a live session is a new session that starts where the other
// stands: a copy of its workspace (the session store's part) and of what
// its Python cells left in __main__, so that an agent can try two
// approaches from one point. The state is copied, not the process: the
// fork's interpreter is a fresh one in a sandbox of its own (its own
// namespaces and cgroup, as every live session's), which loads the copy
// before its first cell. A process cannot be moved into new namespaces
// once confined (the sandbox's seccomp filter, which its children inherit,
// refuses them), and giving live interpreters that power would give it to
// every program they run.
//
// Copied: values pickle can copy (numbers, strings, containers, numpy
// arrays and pandas frames, with what they share still shared), functions
// and classes the cells defined (their code, defaults, closures and
// attributes), modules (imported again by name). Left out, and listed with
// the reason: what cannot be pickled (open files, sockets, threads,
// generators, objects of C types without pickle support). JavaScript's
// interpreters are not copied: a fork's first JavaScript cell starts
// afresh, in the copied workspace.

// ForkReport says what a fork copied of one interpreter.
type ForkReport struct {
	Language string     `json:"language"`
	Copied   []string   `json:"copied"`
	Skipped  []ForkSkip `json:"skipped,omitempty"`
	Bytes    int64      `json:"bytes"`
	// Note says why nothing was copied, when nothing was.
	Note string `json:"note,omitempty"`
}

// ForkSkip is a name a fork left out.
type ForkSkip struct {
	Name   string `json:"name"`
	Type   string `json:"type"`
	Reason string `json:"reason"`
}

// ErrForkTooLarge is returned by Fork when the interpreter's state, pickled,
// is more than the fork may copy.
var ErrForkTooLarge = errors.New("the interpreter's state is too large to copy")

// maxForkReport bounds the report line an interpreter sends before its state.
const maxForkReport = 4 << 20

// Fork makes a Live that starts from l's state: what its Python
// interpreter's cells left, as it is now. The interpreter forks a copy of
// itself that pickles that state and sends it (at most max bytes) while
// the interpreter goes on; Fork returns once the copy has said what it
// holds, and the new Live's first Python cell waits for the state, loads
// it into a fresh interpreter in a sandbox of its own, and then runs.
// Fork returns ErrLiveBusy while a cell of l runs. ctx bounds the fork.
func (l *Live) Fork(ctx context.Context, max int64) (*Live, []ForkReport, error) {
	if !l.mu.TryLock() {
		return nil, nil, ErrLiveBusy
	}
	defer l.mu.Unlock()
	l.pmu.Lock()
	if l.closed {
		l.pmu.Unlock()
		return nil, nil, errors.New("the live session has ended")
	}
	procs := make(map[string]*liveProc, len(l.procs))
	for k, p := range l.procs {
		procs[k] = p
	}
	pending := make(map[string]*forkState, len(l.pending))
	for k, st := range l.pending {
		pending[k] = st
	}
	l.pmu.Unlock()
	child := l.e.NewLive()
	var reports []ForkReport
	// A fork of a fork whose state is not loaded yet gets that state too.
	for runtime, st := range pending {
		if _, ok := procs[runtime]; ok {
			continue
		}
		cp, err := st.share(ctx)
		if err != nil {
			child.Close()
			return nil, nil, err
		}
		child.setPending(runtime, cp)
		reports = append(reports, st.report)
	}
	for runtime, p := range procs {
		if p.prog.Exit() != nil {
			continue
		}
		if runtime != "python" {
			reports = append(reports, ForkReport{Language: runtime, Copied: []string{},
				Note: "a fork copies the state of Python's interpreter only: the fork's first " + runtime + " cell starts a fresh interpreter, in the copied workspace"})
			continue
		}
		st, rep, err := p.snapshot(ctx, max, l.e.forkTempDir())
		if err != nil {
			if p.prog.Exit() != nil {
				l.drop(runtime, p)
			}
			child.Close()
			return nil, nil, err
		}
		rep.Language = runtime
		st.report = rep
		reports = append(reports, rep)
		child.setPending(runtime, st)
	}
	if reports == nil {
		reports = []ForkReport{}
	}
	return child, reports, nil
}

// forkTempDir is where fork states wait for their first cell: the
// Engine's TempDir, or the system's, on disk where that is one. States are
// as large as the sessions' memory limits, and sit there until the fork's
// first cell: page cache the kernel can write out, not a tmpfs's memory.
func (e *Engine) forkTempDir() string {
	if e.TempDir != "" {
		return e.TempDir
	}
	return os.TempDir()
}

// forkState is the state a fork's first interpreter loads, on its way
// from the interpreter forked into a file.
type forkState struct {
	done   chan struct{} // closed once the state is in the file, or failed
	path   string
	err    error
	sock   *os.File // the socket it comes on
	report ForkReport
}

// setPending records the state the first interpreter of runtime loads.
func (l *Live) setPending(runtime string, st *forkState) {
	l.pmu.Lock()
	defer l.pmu.Unlock()
	if l.pending == nil {
		l.pending = map[string]*forkState{}
	}
	l.pending[runtime] = st
}

// share waits for the state and returns another forkState of the same
// content: a second link to its file, which each removes on its own.
func (st *forkState) share(ctx context.Context) (*forkState, error) {
	select {
	case <-st.done:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	if st.err != nil {
		return nil, st.err
	}
	f, err := os.CreateTemp(filepath.Dir(st.path), "codecell-fork-")
	if err != nil {
		return nil, err
	}
	path := f.Name()
	f.Close()
	os.Remove(path)
	if err := os.Link(st.path, path); err != nil {
		return nil, fmt.Errorf("sharing the state of the session forked: %w", err)
	}
	done := make(chan struct{})
	close(done)
	return &forkState{done: done, path: path, sock: st.sock, report: st.report}, nil
}

// wait waits for the state, within ctx, and returns its file.
func (st *forkState) wait(ctx context.Context) (string, error) {
	select {
	case <-st.done:
		return st.path, st.err
	case <-ctx.Done():
		st.discard()
		return "", context.Cause(ctx)
	}
}

// discard stops the copy, if it goes on, and removes its file.
func (st *forkState) discard() {
	st.sock.Close()
	<-st.done
	os.Remove(st.path)
}

// takePending returns the state the first interpreter of runtime is to
// load, or nil.
func (l *Live) takePending(runtime string) *forkState {
	l.pmu.Lock()
	defer l.pmu.Unlock()
	st := l.pending[runtime]
	delete(l.pending, runtime)
	return st
}

func removePending(pending map[string]*forkState) {
	for _, st := range pending {
		st.discard()
	}
}

// snapshot asks the interpreter to fork a copy of itself that sends its
// state on a socket of the fork's, and returns once the copy has said what
// it holds; the state itself goes on into a new file in dir.
func (p *liveProc) snapshot(ctx context.Context, max int64, dir string) (*forkState, ForkReport, error) {
	var rep ForkReport
	sock, theirs, err := filePair("fork")
	if err != nil {
		return nil, rep, err
	}
	f, err := os.CreateTemp(dir, "codecell-fork-")
	if err != nil {
		sock.Close()
		theirs.Close()
		return nil, rep, err
	}
	st := &forkState{done: make(chan struct{}), path: f.Name(), sock: sock}
	fail := func(err error) (*forkState, ForkReport, error) {
		sock.Close()
		f.Close()
		os.Remove(st.path)
		return nil, rep, err
	}
	id := p.nextID()
	req, _ := json.Marshal(map[string]any{"id": id, "snapshot": true, "max": max})
	send := func() error {
		defer theirs.Close()
		rc, err := p.ctl.SyscallConn()
		if err != nil {
			return err
		}
		var serr error
		werr := rc.Write(func(fd uintptr) bool {
			serr = unix.Sendmsg(int(fd), append(req, '\n'), unix.UnixRights(int(theirs.Fd())), nil, 0)
			return serr != unix.EAGAIN
		})
		return errors.Join(werr, serr)
	}
	var raw []byte
	read := func(rd *bufio.Reader) error {
		var err error
		_, raw, err = readDone(rd, id, maxForkReport)
		return err
	}
	if stopped, err := p.exchange(ctx, send, read); err != nil {
		if stopped {
			return fail(fmt.Errorf("the session's interpreter did not answer in time: %w", err))
		}
		return fail(fmt.Errorf("the session's interpreter ended while it forked: %w", err))
	}
	var failed struct{ Error string }
	if len(raw) > 0 && json.Unmarshal(raw, &failed) == nil && failed.Error != "" {
		return fail(fmt.Errorf("forking the interpreter: %s", failed.Error))
	}
	// What the copy holds, then its size: lines of its own.
	if deadline, ok := ctx.Deadline(); ok {
		_ = sock.SetReadDeadline(deadline)
	} else {
		_ = sock.SetReadDeadline(time.Now().Add(time.Minute))
	}
	rd := bufio.NewReaderSize(sock, 64<<10)
	head, err := readLine(rd, maxForkReport)
	if err != nil {
		return fail(fmt.Errorf("the copy of the session's interpreter sent no account of its state: %w", err))
	}
	var got struct {
		ForkReport
		Error    string `json:"error"`
		TooLarge bool   `json:"too_large"`
	}
	if err := json.Unmarshal(head, &got); err != nil {
		return fail(fmt.Errorf("the interpreter's report of its state is not JSON: %w", err))
	}
	if d, ok := jsonkeys.IsDuplicate(jsonkeys.Check(head)); ok {
		// The interpreter never writes one: the program in it did.
		return fail(fmt.Errorf("the interpreter's report of its state gives the key %q twice, which it never writes: it is not trusted", d.Key))
	}
	if got.Error != "" {
		if got.TooLarge {
			return fail(fmt.Errorf("%w: %s", ErrForkTooLarge, got.Error))
		}
		return fail(fmt.Errorf("copying the interpreter's state: %s", got.Error))
	}
	if got.Copied == nil {
		got.Copied = []string{}
	}
	_ = sock.SetReadDeadline(time.Time{})
	go func() {
		defer close(st.done)
		defer f.Close()
		st.err = func() error {
			line, err := readLine(rd, 32)
			if err != nil {
				return err
			}
			n, err := strconv.ParseInt(strings.TrimSpace(string(line)), 10, 64)
			if err != nil || n < 0 || n > max+maxForkReport {
				return fmt.Errorf("the state's length is %q", line)
			}
			return copyState(f, rd, sock, n)
		}()
		if st.err != nil {
			st.err = fmt.Errorf("the state copied from the session forked did not all come: %w", st.err)
		}
		sock.Close()
	}()
	return st, got.ForkReport, nil
}

// restore has a fresh interpreter load the state in the file at path, and
// says what went wrong, if anything, as a warning for the cell that
// started it.
func (p *liveProc) restore(ctx context.Context, st *forkState) string {
	// The wait for the state and its load are bounded together: the copy
	// comes from the other session's sandbox, where what stops it is not
	// this session's to undo.
	ctx, cancel := context.WithTimeout(ctx, restoreWithin)
	defer cancel()
	path, err := st.wait(ctx)
	defer os.Remove(path)
	if err != nil {
		return "this session's interpreter starts without the state of the session it was forked from: " + err.Error()
	}
	f, err := os.Open(path)
	if err != nil {
		return "the copied interpreter state could not be read: " + err.Error()
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "the copied interpreter state could not be read: " + err.Error()
	}
	id := p.nextID()
	req, _ := json.Marshal(map[string]any{"id": id, "restore": fi.Size()})
	var raw []byte
	write := func() error {
		if _, err := p.ctl.Write(append(req, '\n')); err != nil {
			return err
		}
		_, err := io.Copy(p.ctl, f)
		return err
	}
	read := func(rd *bufio.Reader) error {
		var err error
		_, raw, err = readDone(rd, id, maxForkReport)
		return err
	}
	if _, err := p.exchange(ctx, write, read); err != nil {
		return "this session's interpreter could not load the state copied from the session it was forked from: " + err.Error()
	}
	var got struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(raw, &got) == nil && got.Error != "" {
		return "this session's interpreter could not load the state copied from the session it was forked from: " + got.Error
	}
	return ""
}

// restoreWithin bounds a fork's wait for the state copied and its load.
var restoreWithin = 2 * time.Minute

// readLine reads up to and including '\n', at most max bytes.
func readLine(rd *bufio.Reader, max int64) ([]byte, error) {
	var line []byte
	for int64(len(line)) < max {
		b, err := rd.ReadByte()
		if err != nil {
			return nil, err
		}
		line = append(line, b)
		if b == '\n' {
			return line, nil
		}
	}
	return nil, fmt.Errorf("the interpreter's answer has no line end within %d bytes", max)
}

// copyState copies n bytes of an interpreter's state to f: what rd holds
// of it, then the rest straight from the socket under rd, in large reads.
func copyState(f *os.File, rd *bufio.Reader, sock *os.File, n int64) error {
	if k := min(int64(rd.Buffered()), n); k > 0 {
		if _, err := io.CopyN(f, rd, k); err != nil {
			return err
		}
		n -= k
	}
	buf := make([]byte, min(n, 4<<20))
	for n > 0 {
		k, err := sock.Read(buf[:min(n, int64(len(buf)))])
		if k > 0 {
			if _, werr := f.Write(buf[:k]); werr != nil {
				return werr
			}
			n -= int64(k)
		}
		if err != nil && n > 0 {
			if err == io.EOF {
				return io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}
