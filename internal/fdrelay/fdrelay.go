// Package fdrelay joins a socket whose other end a sandboxed program holds
// to the file the job gave for that descriptor: the way a program that was
// started before its job (a warm interpreter, a pooled container) gets the
// job's descriptors.
package fdrelay

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// Relay copies both ways between sock and file: what the program writes
// reaches the file, and what the file gives (when it is read from, as a
// socket is) reaches the program. done is closed when the program's side
// has ended (all it wrote has reached the file); stop then cuts the other
// direction.
func Relay(sock, file *os.File) (done <-chan struct{}, stop func(), err error) {
	fd, err := unix.FcntlInt(file.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	_ = unix.SetNonblock(fd, true)
	dup := os.NewFile(uintptr(fd), file.Name())
	fromProgram := make(chan struct{})
	toProgram := make(chan struct{})
	go func() {
		defer close(fromProgram)
		_, _ = io.Copy(dup, sock)
	}()
	go func() {
		defer close(toProgram)
		_, _ = io.Copy(sock, dup)
	}()
	return fromProgram, func() {
		dup.Close()
		sock.Close()
		<-toProgram
	}, nil
}
