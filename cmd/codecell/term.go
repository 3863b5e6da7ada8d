package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), ioctlReadTermios)
	return err == nil
}

// noteMark begins each of codecell's own lines on a terminal. A program's
// output never shows it (termFilter writes it as "*"), so that no program
// can print a line that passes for codecell's.
const noteMark = '⚙'

// termFilter passes a program's output to a terminal with every control
// sequence made visible, except newline, tab and colour (SGR: ESC [ … m): a
// program cannot move the cursor, clear the screen, set the title, write
// the clipboard (OSC 52) or hide text behind a carriage return. Controls
// are written as ^X (ESC as ^[), a carriage return as ^M unless a newline
// follows it, C1 controls (U+0080–U+009F) as \u0080…, and bytes that are
// not UTF-8 as \xNN. It works on a stream: a sequence split across writes
// is held (at most maxHeld bytes) until it is whole.
type termFilter struct {
	w    io.Writer
	held []byte // an incomplete escape sequence, UTF-8 character or CR
	out  []byte
	line *termLine // shared by the filters on one terminal
}

// termLine is what the writers to one terminal share: the program's
// standard output and error are copied by goroutines of their own, and
// codecell's notes by the CLI.
type termLine struct {
	mu sync.Mutex
	// atStart is true when the last byte written to the terminal was a
	// newline (or nothing was written): codecell's own lines start on a
	// line of their own.
	atStart bool
}

// write writes out to w and records whether it ended a line.
func (l *termLine) write(w io.Writer, out []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.atStart = out[len(out)-1] == '\n'
	_, err := w.Write(out)
	return err
}

const maxHeld = 64

func newTermFilter(w io.Writer, line *termLine) *termFilter {
	return &termFilter{w: w, line: line}
}

func (t *termFilter) Write(p []byte) (int, error) {
	t.out = t.out[:0]
	data := p
	if len(t.held) > 0 {
		data = append(t.held, p...)
		t.held = nil
	}
	i := 0
	for i < len(data) {
		n, done := t.step(data[i:])
		if !done {
			if len(data)-i > maxHeld {
				// Too long to be anything worth waiting for: written as
				// text, one byte at a time.
				t.visible(data[i])
				i++
				continue
			}
			t.held = append([]byte(nil), data[i:]...)
			break
		}
		i += n
	}
	if len(t.out) > 0 {
		if err := t.line.write(t.w, t.out); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// Flush writes what is held, as text: the stream ended in the middle of it.
func (t *termFilter) Flush() error {
	held := t.held
	t.held = nil
	t.out = t.out[:0]
	for _, b := range held {
		t.visible(b)
	}
	if len(t.out) == 0 {
		return nil
	}
	return t.line.write(t.w, t.out)
}

// step consumes what data starts with and says how much, or that more is
// needed to decide.
func (t *termFilter) step(data []byte) (int, bool) {
	c := data[0]
	switch {
	case c == '\n' || c == '\t':
		t.out = append(t.out, c)
		return 1, true
	case c == '\r':
		if len(data) < 2 {
			return 0, false
		}
		if data[1] == '\n' {
			t.out = append(t.out, '\n')
			return 2, true
		}
		t.out = append(t.out, '^', 'M')
		return 1, true
	case c == 0x1b:
		return t.escape(data)
	case c < 0x20 || c == 0x7f:
		t.visible(c)
		return 1, true
	case c < 0x80:
		t.out = append(t.out, c)
		return 1, true
	}
	if !utf8.FullRune(data) {
		return 0, false
	}
	r, size := utf8.DecodeRune(data)
	switch {
	case r == utf8.RuneError && size == 1:
		t.out = fmt.Appendf(t.out, `\x%02x`, c)
	case r >= 0x80 && r <= 0x9f:
		t.out = fmt.Appendf(t.out, `\u%04x`, r)
	case r == noteMark:
		t.out = append(t.out, '*')
	default:
		t.out = append(t.out, data[:size]...)
	}
	return size, true
}

// escape passes an SGR sequence (ESC [ digits ; : … m) and writes any other
// escape as text.
func (t *termFilter) escape(data []byte) (int, bool) {
	if len(data) < 2 {
		return 0, false
	}
	if data[1] != '[' {
		t.visible(0x1b)
		return 1, true
	}
	for i := 2; i < len(data); i++ {
		c := data[i]
		switch {
		case c >= '0' && c <= '9' || c == ';' || c == ':':
			continue
		case c == 'm':
			t.out = append(t.out, data[:i+1]...)
			return i + 1, true
		default:
			// Some other control sequence: shown, not obeyed.
			t.visible(0x1b)
			return 1, true
		}
	}
	return 0, false
}

// visible writes a control byte as ^X.
func (t *termFilter) visible(c byte) {
	switch {
	case c == 0x7f:
		t.out = append(t.out, '^', '?')
	case c < 0x20:
		t.out = append(t.out, '^', c+'@')
	case c >= 0x80:
		t.out = fmt.Appendf(t.out, `\x%02x`, c)
	default:
		t.out = append(t.out, c)
	}
}

// termOut is how a run here shows on a terminal: filters on the program's
// output, and codecell's own lines marked.
type termOut struct {
	stdout, stderr *termFilter // nil where the output is not a terminal, or --raw-output
	mark           bool        // codecell's lines begin with noteMark, in colour
	line           termLine
}

// setupTerminal puts filters on the program's output where it goes to a
// terminal, unless raw, and returns the writers to give the program.
func (m *Main) setupTerminal(raw bool) (stdout, stderr io.Writer) {
	m.tty = &termOut{line: termLine{atStart: true}, mark: isTerminal(m.Stderr)}
	stdout, stderr = m.Stdout, m.Stderr
	if raw {
		return stdout, stderr
	}
	if isTerminal(m.Stdout) {
		m.tty.stdout = newTermFilter(m.Stdout, &m.tty.line)
		stdout = m.tty.stdout
	}
	if m.tty.mark {
		m.tty.stderr = newTermFilter(m.Stderr, &m.tty.line)
		stderr = m.tty.stderr
	}
	return stdout, stderr
}

// flushTerminal writes what the filters hold: the program ended in the
// middle of a sequence.
func (m *Main) flushTerminal() {
	if m.tty == nil {
		return
	}
	for _, f := range []*termFilter{m.tty.stdout, m.tty.stderr} {
		if f != nil {
			_ = f.Flush()
		}
	}
}

// note writes one of codecell's own lines to standard error: on a terminal
// marked with noteMark, which no program's output can show, on a line of
// its own; elsewhere "codecell: …" as always.
func (m *Main) note(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if m.tty != nil && m.tty.mark {
		l := &m.tty.line
		l.mu.Lock()
		defer l.mu.Unlock()
		if !l.atStart {
			io.WriteString(m.Stderr, "\n")
		}
		fmt.Fprintf(m.Stderr, "\x1b[1;36m%c codecell:\x1b[0m %s\n", noteMark, msg)
		l.atStart = true
		return
	}
	fmt.Fprintf(m.Stderr, "codecell: %s\n", msg)
}
