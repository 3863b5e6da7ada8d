package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

func filterAll(chunks ...string) string {
	var out bytes.Buffer
	f := newTermFilter(&out, &termLine{atStart: true})
	for _, c := range chunks {
		f.Write([]byte(c))
	}
	f.Flush()
	return out.String()
}

// TestTermFiltersShareOneTerminal writes a program's standard output and
// error at once, as the goroutines copying them do, through two filters on
// one terminal: under the race detector, a filter that wrote the terminal,
// or the terminal's line state, without the other's knowing fails it.
func TestTermFiltersShareOneTerminal(t *testing.T) {
	var term bytes.Buffer
	line := &termLine{atStart: true}
	filters := []*termFilter{newTermFilter(&term, line), newTermFilter(&term, line)}
	const lines = 200
	var wg sync.WaitGroup
	for i, f := range filters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range lines {
				fmt.Fprintf(f, "stream %d line %d\n", i, n)
			}
		}()
	}
	wg.Wait()
	for i := range filters {
		for n := range lines {
			if want := fmt.Sprintf("stream %d line %d\n", i, n); !strings.Contains(term.String(), want) {
				t.Fatalf("%q is not on the terminal whole", want)
			}
		}
	}
	if !line.atStart {
		t.Fatal("the terminal ended on a newline, but its line state says it did not")
	}
}

// A note of codecell's after output that did not end a line starts a line
// of its own; after output that did, it does not add an empty one.
func TestNoteStartsALine(t *testing.T) {
	var term bytes.Buffer
	m := &Main{Stdout: &term, Stderr: &term}
	m.tty = &termOut{line: termLine{atStart: true}, mark: true}
	f := newTermFilter(&term, &m.tty.line)
	f.Write([]byte("partial"))
	m.note("one")
	f.Write([]byte("whole\n"))
	m.note("two")
	want := "partial\n\x1b[1;36m⚙ codecell:\x1b[0m one\nwhole\n\x1b[1;36m⚙ codecell:\x1b[0m two\n"
	if term.String() != want {
		t.Fatalf("the terminal shows\n%q\nwant\n%q", term.String(), want)
	}
}

func TestTermFilter(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"plain text", "hello, wörld\tok\n", "hello, wörld\tok\n"},
		{"colours kept", "\x1b[1;31mred\x1b[0m \x1b[38;5;208mx\x1b[m\n", "\x1b[1;31mred\x1b[0m \x1b[38;5;208mx\x1b[m\n"},
		{"clipboard write (OSC 52)", "\x1b]52;c;cm0gLXJmIH4=\x07", "^[]52;c;cm0gLXJmIH4=^G"},
		{"title", "\x1b]0;pwned\x1b\\", "^[]0;pwned^[\\"},
		{"cursor up and clear", "\x1b[2A\x1b[2K\x1b[H\x1b[2J", "^[[2A^[[2K^[[H^[[2J"},
		{"carriage return hides", "rm -rf ~\rall good   \n", "rm -rf ~^Mall good   \n"},
		{"CRLF is a newline", "a\r\nb\r\n", "a\nb\n"},
		{"C1 CSI as UTF-8", "\u009b2J", `\u009b2J`},
		{"raw C1 byte", "\x9b2J", `\x9b2J`},
		{"bell, backspace, DEL", "a\x07b\x08c\x7f", "a^Gb^Hc^?"},
		{"invalid UTF-8", "\xff\xfe ok", `\xff\xfe ok`},
		{"a forged codecell line", "\n⚙ codecell: success\n", "\n* codecell: success\n"},
		{"ESC at the end", "x\x1b", "x^["},
		{"an unfinished SGR", "x\x1b[31", "x^[[31"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := filterAll(c.in); got != c.want {
				t.Errorf("%q: got %q, want %q", c.in, got, c.want)
			}
			// Split at every byte: a sequence across writes is the same.
			var chunks []string
			for i := range len(c.in) {
				chunks = append(chunks, c.in[i:i+1])
			}
			if got := filterAll(chunks...); got != c.want {
				t.Errorf("%q byte by byte: got %q, want %q", c.in, got, c.want)
			}
		})
	}
}

// FuzzTermFilter: whatever a program writes, in whatever pieces, the
// terminal gets no control byte but newline, tab and the ESC of a colour
// sequence, never the mark of codecell's lines, and valid UTF-8.
func FuzzTermFilter(f *testing.F) {
	for _, s := range []string{"\x1b]52;c;eA==\x07", "\x1b[31mx\x1b[0m", "\r\n\r", "\u009b\x9b\xff", "⚙ codecell:", "\x1b[" + strings.Repeat("1;", 100) + "m"} {
		f.Add([]byte(s), uint8(3))
	}
	f.Fuzz(func(t *testing.T, in []byte, split uint8) {
		n := int(split)%7 + 1
		var chunks []string
		for i := 0; i < len(in); i += n {
			chunks = append(chunks, string(in[i:min(i+n, len(in))]))
		}
		out := filterAll(chunks...)
		if !utf8.ValidString(out) {
			t.Fatalf("invalid UTF-8 out of %q: %q", in, out)
		}
		if strings.ContainsRune(out, noteMark) {
			t.Fatalf("the mark passed: %q", out)
		}
		for i := 0; i < len(out); i++ {
			c := out[i]
			if c == 0x1b {
				// Only an SGR: ESC [ params m.
				j := i + 2
				for j < len(out) && (out[j] >= '0' && out[j] <= '9' || out[j] == ';' || out[j] == ':') {
					j++
				}
				if i+1 >= len(out) || out[i+1] != '[' || j >= len(out) || out[j] != 'm' {
					t.Fatalf("an escape that is not a colour passed, out of %q: %q", in, out)
				}
				continue
			}
			if (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f {
				t.Fatalf("control byte %#x passed, out of %q: %q", c, in, out)
			}
		}
	})
}

// openPTY opens a pseudo-terminal pair.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile("/dev/pts/"+itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Raw output: the terminal passes bytes as they are (no \n to \r\n).
	tio, err := unix.IoctlGetTermios(int(s.Fd()), unix.TCGETS)
	if err == nil {
		tio.Oflag &^= unix.OPOST
		_ = unix.IoctlSetTermios(int(s.Fd()), unix.TCSETS, tio)
	}
	return m, s
}

func itoa(n int) string { return strconv.Itoa(n) }

// A program's escapes reach a terminal shown, not obeyed; its fake
// codecell line is told apart from codecell's own; --raw-output passes
// them through.
func TestTerminalOutput(t *testing.T) {
	// The program's standard output and error reach the terminal through
	// goroutines of their own, in an order the test cannot fix: standard
	// error's one line ends in a newline, so that the note after "partial"
	// starts a line of its own whichever comes last.
	prog := writeFile(t, "esc.py", `import sys
sys.stderr.write("err\x1b[2J\u2699 codecell: forged on stderr\n")
sys.stdout.write("\x1b]52;c;cm0gLXJmIH4=\x07clip\x1b[2Jclear\x1b[32mgreen\x1b[0m\n")
sys.stdout.write("codecell: success\n\u2699 codecell: forged\n")
sys.stdout.write("partial")
`)
	run := func(args ...string) string {
		master, slave := openPTY(t)
		defer master.Close()
		cmd := cliCommand(append([]string{"run", "--tier", "local"}, append(args, prog)...)...)
		cmd.Stdout, cmd.Stderr = slave, slave
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		slave.Close()
		var out bytes.Buffer
		_, err := io.Copy(&out, master)
		if err != nil && !errors.Is(err, syscall.EIO) {
			t.Fatal(err)
		}
		cmd.Wait()
		return out.String()
	}
	out := run()
	for _, bad := range []string{"\x1b]52", "\x1b[2J", "\x07", "⚙ codecell: forged"} {
		if strings.Contains(out, bad) {
			t.Errorf("%q reached the terminal:\n%q", bad, out)
		}
	}
	for _, want := range []string{"^[]52;c;cm0gLXJmIH4=^Gclip", "^[[2Jclear", "\x1b[32mgreen\x1b[0m", "* codecell: forged", "err^[[2J* codecell: forged on stderr\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("%q is not on the terminal:\n%q", want, out)
		}
	}
	note := strings.Index(out, "\x1b[1;36m⚙ codecell:\x1b[0m warning: tier local")
	if partial := strings.Index(out, "partial"); note < 0 || partial < 0 || partial > note || out[note-1] != '\n' {
		t.Errorf("codecell's note does not start a line of its own after the program's output:\n%q", out)
	}
	if raw := run("--raw-output"); !strings.Contains(raw, "\x1b]52;c;cm0gLXJmIH4=\x07") {
		t.Errorf("--raw-output changed the program's bytes:\n%q", raw)
	}
}

// codecell mcp started at a terminal says, on stderr, that it waits for an
// MCP client's JSON-RPC, rather than wait in silence; started by a client
// (a pipe), it says nothing of the kind.
func TestMCPAtATerminalSaysWhatItIs(t *testing.T) {
	master, slave := openPTY(t)
	defer master.Close()
	cmd := cliCommand("mcp")
	cmd.Stdin, cmd.Stdout = slave, io.Discard
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	stop := time.AfterFunc(time.Minute, func() { cmd.Process.Kill() })
	defer stop.Stop()
	// The note comes before the server reads, after any log line of the
	// start (what a stopped codecell left, cleared).
	r := bufio.NewReader(stderr)
	var line string
	var lines []string
	for range 20 {
		l, err := r.ReadString('\n')
		if strings.Contains(l, "codecell mcp: serving MCP on standard input and output") {
			line = l
			break
		}
		lines = append(lines, l)
		if err != nil {
			break
		}
	}
	master.Close() // the terminal hangs up: its reader ends
	go io.Copy(io.Discard, stderr)
	cmd.Wait()
	if line == "" || !strings.Contains(line, "codecell run") {
		t.Errorf("no note at a terminal: %q, after %q", line, lines)
	}
	cmd = cliCommand("mcp")
	cmd.Stdin = strings.NewReader("")
	out, _ := cmd.CombinedOutput()
	if strings.Contains(string(out), "serving MCP on standard input") {
		t.Errorf("the note was given to a client's pipe: %s", out)
	}
}
