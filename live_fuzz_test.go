package codecell

import (
	"bufio"
	"bytes"
	"io"
	"strings"
	"testing"
)

// What a live interpreter, or the copy a fork makes of it, sends the host
// is the program's to write: readDone and readLine take any bytes without
// a panic, within their bounds.
func FuzzLiveAnswers(f *testing.F) {
	for _, seed := range []string{
		"done 1 0 2\nok",
		"done 1 0 0\n",
		"done 1 0 18446744073709551615\n",
		"done 1 0 -1\n",
		"done 7 3 5\nabc",
		"{\"copied\":[\"x\"],\"bytes\":3}\n3\nabc",
		strings.Repeat("x", 5000),
		"done\x001 0 1\n\x00",
	} {
		f.Add([]byte(seed), 1, int64(64))
	}
	f.Fuzz(func(t *testing.T, data []byte, id int, max int64) {
		if max < 0 || max > 1<<20 {
			max = 1 << 20
		}
		if _, raw, err := readDone(bufio.NewReader(bytes.NewReader(data)), id, int(max)); err == nil && len(raw) > int(max)+64<<10 {
			t.Fatalf("%d bytes past a limit of %d", len(raw), max)
		}
		if line, err := readLine(bufio.NewReader(bytes.NewReader(data)), max); err == nil && (int64(len(line)) > max || line[len(line)-1] != '\n') {
			t.Fatalf("line %q, limit %d", line, max)
		}
	})
}

// endless is a control socket that never ends a line: it counts what is
// read of it, and fails past a bound, so that a reader that would hold it
// all stops.
type endless struct{ n int }

func (e *endless) Read(p []byte) (int, error) {
	if e.n >= 8<<20 {
		return 0, io.ErrUnexpectedEOF
	}
	for i := range p {
		p[i] = 'x'
	}
	e.n += len(p)
	return len(p), nil
}

// An interpreter that writes on its control socket without a line end is
// refused within a few bytes: the host does not hold what it writes.
func TestLiveAnswerLineBounded(t *testing.T) {
	src := &endless{}
	if _, _, err := readDone(bufio.NewReaderSize(src, 4096), 1, 64); err == nil {
		t.Fatal("no error")
	}
	if src.n > 4096 {
		t.Fatalf("read %d bytes of an answer line", src.n)
	}
}

// What an interpreter writes on its control socket between requests makes
// it stale: it is not trusted with the next.
func TestLiveStale(t *testing.T) {
	host, child, err := filePair("control")
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	defer child.Close()
	p := &liveProc{ctl: host, ctlR: bufio.NewReader(host)}
	if p.stale() {
		t.Fatal("stale with nothing written")
	}
	if _, err := child.Write([]byte("done 3 0 0\n")); err != nil {
		t.Fatal(err)
	}
	if !p.stale() {
		t.Fatal("not stale with a line waiting")
	}
	// What the reader holds counts too.
	if _, err := p.ctlR.ReadByte(); err != nil {
		t.Fatal(err)
	}
	if !p.stale() {
		t.Fatal("not stale with a line held")
	}
}
