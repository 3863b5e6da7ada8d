//go:build linux

package sandboxinit

import (
	"errors"
	"os"
	"testing"
	"time"

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
