package server_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/api"
	"github.com/codecell-dev/codecell/server"
)

// stalledClient opens a connection to the fixture whose receive buffer is
// small, sends one request and never reads: what a client that does not
// read its answers does to a server.
func stalledClient(t *testing.T, f *fixture, method, path, body string, header ...string) net.Conn {
	t.Helper()
	u, _ := url.Parse(f.http.URL)
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		if err != nil {
			return err
		}
		return serr
	}}
	conn, err := d.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	var req strings.Builder
	fmt.Fprintf(&req, "%s %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", method, path, u.Host, token, len(body))
	for i := 0; i+1 < len(header); i += 2 {
		fmt.Fprintf(&req, "%s: %s\r\n", header[i], header[i+1])
	}
	req.WriteString("\r\n" + body)
	if _, err := conn.Write([]byte(req.String())); err != nil {
		t.Fatal(err)
	}
	return conn
}

// waitIdle waits until no execution runs, as /healthz reports it.
func waitIdle(t *testing.T, f *fixture, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		h, err := f.c.Health(context.Background())
		if err == nil && h["running"] == 0.0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("an execution still holds its slot after %v: %v %v", within, h, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// executionsEnded is how many executions the server has counted as ended,
// in all, from its metrics.
func executionsEnded(t *testing.T, f *fixture) float64 {
	t.Helper()
	status, _, body := f.raw(t, "GET", "/metrics", nil)
	if status != 200 {
		t.Fatalf("/metrics: %d", status)
	}
	var n float64
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "codecell_executions_total{") {
			var v float64
			if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err == nil {
				n += v
			}
		}
	}
	return n
}

// A client that never reads its answer holds no execution slot once its
// program has ended: with one slot, the next client runs at once, while
// the first answer, 8 MiB of output, still waits to be written. The same
// for a client that asked for Server-Sent Events.
func TestStalledReaderFreesItsSlot(t *testing.T) {
	f := newLocalFixture(t, func(s *server.Server) { s.MaxRunning = 1 })
	flood := `{"language":"python","code":"import sys\nsys.stdout.write('x' * (8 << 20))\n'done'","limits":{"stdout":8388608}}`
	for _, events := range []bool{false, true} {
		t.Run(fmt.Sprintf("events=%v", events), func(t *testing.T) {
			var header []string
			if events {
				header = []string{"Accept", "text/event-stream"}
			}
			before := executionsEnded(t, f)
			stalledClient(t, f, "POST", "/v1/executions", flood, header...)
			// The program runs, prints, and ends; the answer is not read.
			for executionsEnded(t, f) == before {
				time.Sleep(10 * time.Millisecond) // polls the server's own count
			}
			waitIdle(t, f, 60*time.Second)
			res, err := f.c.Execute(context.Background(), "", api.Execution{Language: "python", Code: "'next'"})
			if err != nil || string(res.Value) != `"next"` {
				t.Fatalf("the next client: %v %+v", err, res)
			}
		})
	}
}

// A client that stops reading its stream while its program still runs
// loses the stream after WriteIdle, and its program is ended: its slot is
// free long before the program's own timeout.
func TestStalledStreamEndsItsProgram(t *testing.T) {
	f := newLocalFixture(t, func(s *server.Server) { s.MaxRunning = 1; s.WriteIdle = time.Second })
	code := `{"language":"python","code":"import sys, time\nsys.stdout.write('x' * (8 << 20))\nsys.stdout.flush()\ntime.sleep(600)","limits":{"stdout":8388608,"timeout":"10m"}}`
	stalledClient(t, f, "POST", "/v1/executions", code, "Accept", "text/event-stream")
	// Its program runs first (idle before that would say nothing), then
	// ends once the stream has stalled for WriteIdle.
	waitRunning(t, f, 1)
	waitIdle(t, f, 60*time.Second)
	if res, err := f.c.Execute(context.Background(), "", api.Execution{Language: "python", Code: "'next'"}); err != nil || string(res.Value) != `"next"` {
		t.Fatalf("the next client: %v %+v", err, res)
	}
}

// A request body that stops coming is refused after BodyIdle with
// INCOMPLETE_BODY, and holds nothing after: not the execution slot it
// took, not the session it uploads into.
func TestStalledBody(t *testing.T) {
	f := newLocalFixture(t, func(s *server.Server) { s.MaxRunning = 1; s.BodyIdle = time.Second })
	ses := f.session(t, api.SessionSpec{})
	for _, c := range []struct{ name, method, path string }{
		{"execution", "POST", "/v1/executions"},
		{"upload", "PUT", "/v1/sessions/" + ses.ID + "/files/big.bin"},
		{"archive", "POST", "/v1/sessions/" + ses.ID + "/files"},
	} {
		t.Run(c.name, func(t *testing.T) {
			u, _ := url.Parse(f.http.URL)
			conn, err := net.Dial("tcp", u.Host)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"language\"", c.method, c.path, u.Host, token)
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			var body bytes.Buffer
			body.ReadFrom(resp.Body)
			if resp.StatusCode != http.StatusBadRequest || envelopeOf(t, body.Bytes()).Code != server.CodeIncompleteBody {
				t.Fatalf("%s %s", resp.Status, body.String())
			}
			// Neither the slot nor the session is held.
			res, err := f.c.Execute(context.Background(), ses.ID, api.Execution{Language: "python", Code: "'next'"})
			if err != nil || string(res.Value) != `"next"` {
				t.Fatalf("after the stalled body: %v %+v", err, res)
			}
		})
	}
}

// An archive that cannot be read is the client's bad input: 400
// INVALID_ARCHIVE, never a failure of the server.
func TestBadArchiveUpload(t *testing.T) {
	f := newLocalFixture(t, nil)
	ses := f.session(t, api.SessionSpec{})
	var tarBuf bytes.Buffer
	tw := tar.NewWriter(&tarBuf)
	tw.WriteHeader(&tar.Header{Name: "a.txt", Mode: 0o644, Size: 5000, Typeflag: tar.TypeReg})
	tw.Write(bytes.Repeat([]byte("a"), 5000))
	tw.Close()
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(tarBuf.Bytes())
	zw.Close()
	for name, data := range map[string][]byte{
		"truncated tar":  tarBuf.Bytes()[:3000],
		"truncated gzip": gz.Bytes()[:gz.Len()/2],
		"gzip header":    gz.Bytes()[:10],
		"garbage":        bytes.Repeat([]byte("garbage!"), 200),
	} {
		t.Run(name, func(t *testing.T) {
			status, _, body := f.raw(t, "POST", "/v1/sessions/"+ses.ID+"/files", bytes.NewReader(data), "Content-Type", "application/x-tar")
			if env := envelopeOf(t, body); status != http.StatusBadRequest || env.Code != server.CodeInvalidArchive || len(env.Hints) == 0 {
				t.Fatalf("%d %s", status, body)
			}
		})
	}
}

// An upload whose path is taken by a directory, or goes through a file as
// if it were one, is the client's bad input: 400 NOT_A_REGULAR_FILE, with a
// hint that says what to do about the path, not about downloads.
func TestUploadOverDirectory(t *testing.T) {
	f := newLocalFixture(t, nil)
	ses := f.session(t, api.SessionSpec{})
	files := "/v1/sessions/" + ses.ID + "/files"
	if status, _, body := f.raw(t, "PUT", files+"/d/f", strings.NewReader("x"), "Content-Type", "application/octet-stream"); status != http.StatusCreated {
		t.Fatalf("%d %s", status, body)
	}
	var tarBuf bytes.Buffer
	tw := tar.NewWriter(&tarBuf)
	tw.WriteHeader(&tar.Header{Name: "d", Mode: 0o644, Size: 1, Typeflag: tar.TypeReg})
	tw.Write([]byte("x"))
	tw.Close()
	for _, c := range []struct {
		name, method, path string
		body               []byte
		header             []string
	}{
		{"a file over a directory", "PUT", files + "/d", []byte("x"), []string{"Content-Type", "application/octet-stream"}},
		{"a file through a file", "PUT", files + "/d/f/g", []byte("x"), []string{"Content-Type", "application/octet-stream"}},
		{"an archive's file over a directory", "POST", files, tarBuf.Bytes(), []string{"Content-Type", "application/x-tar"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, _, body := f.raw(t, c.method, c.path, bytes.NewReader(c.body), c.header...)
			env := envelopeOf(t, body)
			if status != http.StatusBadRequest || env.Code != server.CodeNotRegular {
				t.Fatalf("%d %s", status, body)
			}
			if hints := strings.Join(env.Hints, " "); strings.Contains(hints, "download") || !strings.Contains(hints, "recursive=true") {
				t.Errorf("hints %q do not say what to do about the path", env.Hints)
			}
		})
	}
}

// The code a client may ask to run is bounded by what a model writes.
func TestCodeSizeCeiling(t *testing.T) {
	f := newLocalFixture(t, nil)
	status, _, body := f.raw(t, "POST", "/v1/executions", strings.NewReader(fmt.Sprintf(`{"language":"python","code":"1","limits":{"code_size":%d}}`, server.MaxCodeSize+1)), "Content-Type", "application/json")
	if status != http.StatusBadRequest || envelopeOf(t, body).Code != server.CodeLimitTooHigh {
		t.Fatalf("%d %s", status, body)
	}
	res, err := f.c.Execute(context.Background(), "", api.Execution{Language: "python", Code: "1\n" + strings.Repeat("#", 20_000), Limits: &api.Limits{CodeSize: 30_000}})
	if err != nil || res.Status != codecell.StatusSuccess {
		t.Fatalf("a program under the ceiling: %v %+v", err, res)
	}
}

// Programs made to break the host's parsers are refused within the code-size
// ceiling, over REST, and the server goes on serving.
func TestParserAttacksOverREST(t *testing.T) {
	f := newFixture(t, nil)
	for _, c := range []struct {
		lang, code, want string
	}{
		{"javascript", strings.Repeat("!", server.MaxCodeSize-1) + "1", codecell.CodeTooDeep},
		{"typescript", strings.Repeat("a=", server.MaxCodeSize/2-1) + "1", codecell.CodeTooDeep},
		{"bash", strings.Repeat("$(", server.MaxCodeSize/4) + "true" + strings.Repeat(")", server.MaxCodeSize/4), codecell.CodeTooDeep},
	} {
		res, err := f.c.Execute(context.Background(), "", api.Execution{Language: c.lang, Code: c.code, Limits: &api.Limits{CodeSize: server.MaxCodeSize}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != codecell.StatusBlocked || res.Error == nil || res.Error.Code != c.want {
			t.Fatalf("%s: %s %+v", c.lang, res.Status, res.Error)
		}
	}
	res, err := f.c.Execute(context.Background(), "", api.Execution{Language: "javascript", Code: "6 * 7"})
	if err != nil || res.Status != codecell.StatusSuccess || string(res.Value) != "42" {
		t.Fatalf("after the attacks: %v %+v", err, res)
	}
}
