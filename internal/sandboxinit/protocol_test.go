//go:build linux

package sandboxinit

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/codecell-dev/codecell/internal/jsonkeys"
	"golang.org/x/sys/unix"
)

// TestHostConnWaitsInThePoller: the host's end of a control socket does
// not block (its reads wait in Go's network poller and can have a
// deadline), init's end does, and a message, its descriptors and the other
// end's going all reach a reader as before.
func TestHostConnWaitsInThePoller(t *testing.T) {
	hostF, initF, err := SocketPair()
	if err != nil {
		t.Fatal(err)
	}
	host := NewConn(hostF)
	defer host.Close()
	if host.rc == nil {
		t.Fatal("the host's end of the control socket blocks")
	}
	initC := NewConn(initF)
	if initC.rc != nil {
		t.Fatal("init's end of the control socket does not block")
	}
	if fl, err := unix.FcntlInt(uintptr(initC.FD()), unix.F_GETFL, 0); err != nil || fl&unix.O_NONBLOCK != 0 {
		t.Fatalf("init's socket: flags %#x, %v", fl, err)
	}

	var m Message
	if _, err := host.RecvWithin(&m, 20*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a read with nothing to read ended with %v, not its deadline", err)
	}
	// What comes after a deadline passed is read whole, by a read with no
	// deadline, with the descriptor sent along.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	got := make(chan error, 1)
	go func() {
		var m Message
		fds, err := host.Recv(&m)
		if err == nil && (m.Error != "hello" || len(fds) != 1) {
			err = errors.New("the message or its descriptor did not arrive whole")
		}
		CloseAll(fds)
		got <- err
	}()
	if err := initC.Send(Message{Error: "hello"}, int(r.Fd())); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	// A message from the host reaches init's blocking read.
	go func() { got <- host.Send(Message{Error: "back"}) }()
	if _, err := initC.Recv(&m); err != nil || m.Error != "back" {
		t.Fatalf("init read %+v, %v", m, err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	// init's end going ends a host's read that waits.
	go func() {
		var m Message
		_, err := host.RecvWithin(&m, time.Minute)
		got <- err
	}()
	initC.Close()
	if err := <-got; !errors.Is(err, ErrClosed) {
		t.Fatalf("a read after init's end closed ended with %v", err)
	}
}

// FuzzHostConnRecv feeds the host's end of a control socket any packet
// (what a sandbox whose init was subverted could send): Recv returns a
// message or an error, never panics, and leaves the socket usable for the
// next packet.
func FuzzHostConnRecv(f *testing.F) {
	for _, seed := range []string{
		`{"ready":{}}`,
		`{"started":12}`,
		`{"exited":{"exit_code":0,"signal":0}}`,
		`{"error":"x","mount":"/workspace"}`,
		`{"hello":true,"placed":true}`,
		`{"exited":{"exit_code":1e400}}`,
		`[`,
		"",
		"\x00\xff",
		`{"exited":{"exit_code":0,"exit_code":137}}`,
		`{"started":1,"started":2}`,
	} {
		f.Add([]byte(seed))
	}
	hostF, initF, err := SocketPair()
	if err != nil {
		f.Fatal(err)
	}
	host := NewConn(hostF)
	f.Cleanup(func() { host.Close(); initF.Close() })
	init := int(initF.Fd())
	f.Fuzz(func(t *testing.T, packet []byte) {
		if len(packet) > maxMessage {
			packet = packet[:maxMessage]
		}
		if _, err := unix.Write(init, packet); err != nil {
			t.Skip(err)
		}
		var m Message
		fds, err := host.RecvWithin(&m, 10*time.Second)
		CloseAll(fds)
		if len(packet) == 0 && !errors.Is(err, ErrClosed) {
			t.Fatalf("an empty packet read as %+v, %v", m, err)
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatal("a packet sent was not read")
		}
		if _, dup := jsonkeys.IsDuplicate(jsonkeys.Check(packet)); dup && err == nil {
			t.Fatalf("a packet that gives a key twice was taken: %q", packet)
		}
		if _, err := unix.Write(init, []byte(`{"started":1}`)); err != nil {
			t.Fatal(err)
		}
		var next Message
		if _, err := host.RecvWithin(&next, 10*time.Second); err != nil || next.Started != 1 {
			t.Fatalf("the packet after %q read as %+v, %v", packet, next, err)
		}
	})
}

// TestConnRecvSizes: each end reads a packet whatever its length (each is
// read into a buffer of its own length), up to the largest message, and
// refuses a longer one whole, with the packet after it read as sent.
func TestConnRecvSizes(t *testing.T) {
	hostF, initF, err := SocketPair()
	if err != nil {
		t.Fatal(err)
	}
	host, initC := NewConn(hostF), NewConn(initF)
	defer host.Close()
	defer initC.Close()
	big := func(n int) []byte {
		prefix, suffix := `{"error":"`, `"}`
		return []byte(prefix + strings.Repeat("x", n-len(prefix)-len(suffix)) + suffix)
	}
	for _, c := range []struct {
		name     string
		from, to *Conn
		fd       int
	}{
		{"init to host", initC, host, initC.FD()},
		{"host to init", host, initC, host.FD()},
	} {
		for _, packet := range [][]byte{big(maxMessage), []byte(`{"started":3}`), big(maxMessage + 1), big(4096)} {
			if _, err := unix.Write(c.fd, packet); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			var m Message
			_, err := c.to.Recv(&m)
			switch {
			case len(packet) > maxMessage:
				if err == nil || !strings.Contains(err.Error(), "truncated") {
					t.Fatalf("%s: a packet of %d bytes read as %v", c.name, len(packet), err)
				}
			case err != nil:
				t.Fatalf("%s: a packet of %d bytes: %v", c.name, len(packet), err)
			case m.Error == "" && m.Started != 3, len(m.Error) != 0 && len(m.Error) != len(packet)-len(`{"error":""}`):
				t.Fatalf("%s: a packet of %d bytes read as %d bytes of error, started %d", c.name, len(packet), len(m.Error), m.Started)
			}
		}
	}
}
