package codecell

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
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

// Fork makes a Live that starts from l's state: its Python interpreter's
// names, copied now (into a file under the Engine's temporary directory,
// at most max bytes), which the new Live's first Python cell loads into a
// fresh interpreter before it runs. Fork returns ErrLiveBusy while a cell
// of l runs. ctx bounds the copy; past it, the interpreter is interrupted, and killed if it does
// not stop within LiveInterruptGrace (l then loses it).
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
	l.pmu.Unlock()
	child := l.e.NewLive()
	var reports []ForkReport
	for runtime, p := range procs {
		if p.prog.Exit() != nil {
			continue
		}
		if runtime != "python" {
			reports = append(reports, ForkReport{Language: runtime, Copied: []string{},
				Note: "a fork copies the state of Python's interpreter only: the fork's first " + runtime + " cell starts a fresh interpreter, in the copied workspace"})
			continue
		}
		path, rep, err := p.snapshot(ctx, max, l.e.runnerTempDir())
		if err != nil {
			if p.prog.Exit() != nil {
				l.drop(runtime, p)
			}
			child.Close()
			return nil, nil, err
		}
		rep.Language = runtime
		reports = append(reports, rep)
		child.pmu.Lock()
		if child.pending == nil {
			child.pending = map[string]string{}
		}
		child.pending[runtime] = path
		child.pmu.Unlock()
	}
	if reports == nil {
		reports = []ForkReport{}
	}
	return child, reports, nil
}

// takePending returns the state the first interpreter of runtime is to
// load, a file the caller removes, or "".
func (l *Live) takePending(runtime string) string {
	l.pmu.Lock()
	defer l.pmu.Unlock()
	path := l.pending[runtime]
	delete(l.pending, runtime)
	return path
}

func removePending(pending map[string]string) {
	for _, path := range pending {
		os.Remove(path)
	}
}

// snapshot asks the interpreter for its state and writes it to a new file
// in dir: what _restore in the runner reads.
func (p *liveProc) snapshot(ctx context.Context, max int64, dir string) (path string, rep ForkReport, err error) {
	f, err := os.CreateTemp(dir, "codecell-fork-")
	if err != nil {
		return "", rep, err
	}
	defer func() {
		f.Close()
		if err != nil {
			os.Remove(f.Name())
		}
	}()
	p.seq++
	id := p.seq
	req, _ := json.Marshal(map[string]any{"id": id, "snapshot": true, "max": max})
	var head []byte
	read := func(rd *bufio.Reader) error {
		n, err := readDoneHead(rd, id, max+maxForkReport)
		if err != nil {
			return err
		}
		head, err = readLine(rd, min(n, maxForkReport))
		if err != nil {
			return err
		}
		if _, err := io.CopyN(f, rd, n-int64(len(head))); err != nil {
			return fmt.Errorf("reading the interpreter's state: %w", err)
		}
		return nil
	}
	stopped, err := p.exchange(ctx, func() error { _, err := p.ctl.Write(append(req, '\n')); return err }, read)
	if err != nil {
		if stopped {
			return "", rep, fmt.Errorf("copying the interpreter's state took too long: %w", err)
		}
		return "", rep, fmt.Errorf("the session's interpreter ended while its state was copied: %w", err)
	}
	var got struct {
		ForkReport
		Error string `json:"error"`
	}
	if err := json.Unmarshal(head, &got); err != nil {
		return "", rep, fmt.Errorf("the interpreter's report of its state is not JSON: %w", err)
	}
	if got.Error != "" {
		if strings.Contains(got.Error, "more than the") {
			return "", rep, fmt.Errorf("%w: %s", ErrForkTooLarge, got.Error)
		}
		return "", rep, fmt.Errorf("copying the interpreter's state: %s", got.Error)
	}
	if got.Copied == nil {
		got.Copied = []string{}
	}
	if err := f.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return "", rep, err
	}
	return f.Name(), got.ForkReport, nil
}

// restore has a fresh interpreter load the state in the file at path, and
// says what went wrong, if anything, as a warning for the cell that
// started it.
func (p *liveProc) restore(ctx context.Context, path string) string {
	defer os.Remove(path)
	f, err := os.Open(path)
	if err != nil {
		return "the copied interpreter state could not be read: " + err.Error()
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "the copied interpreter state could not be read: " + err.Error()
	}
	p.seq++
	id := p.seq
	req, _ := json.Marshal(map[string]any{"id": id, "restore": st.Size()})
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
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if _, err := p.exchange(rctx, write, read); err != nil {
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

// exchange writes a request to the interpreter and reads its answer, as
// ask does: once ctx ends, the interpreter is interrupted, and killed if
// the answer does not come within LiveInterruptGrace.
func (p *liveProc) exchange(ctx context.Context, write func() error, read func(*bufio.Reader) error) (stopped bool, err error) {
	answers := make(chan error, 1)
	go func() { answers <- read(p.ctlR) }()
	if err := write(); err != nil {
		p.prog.Kill()
	}
	var grace <-chan time.Time
	done := ctx.Done()
	for {
		select {
		case err := <-answers:
			return stopped, err
		case <-done:
			done = nil
			stopped = true
			_ = p.prog.Interrupt()
			grace = time.After(LiveInterruptGrace)
		case <-grace:
			grace = nil
			p.prog.Kill()
		}
	}
}

// readDoneHead reads "done ID 0 LENGTH\n" and returns LENGTH, at most max.
func readDoneHead(rd *bufio.Reader, id int, max int64) (int64, error) {
	line, err := readLine(rd, 128)
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(line))
	if len(f) != 4 || f[0] != "done" || f[1] != strconv.Itoa(id) {
		return 0, fmt.Errorf("the interpreter answered %q", line)
	}
	n, err := strconv.ParseInt(f[3], 10, 64)
	if err != nil || n < 0 || n > max {
		return 0, fmt.Errorf("the interpreter answered %q", line)
	}
	return n, nil
}

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
