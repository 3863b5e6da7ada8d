//go:build linux

package docker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/codecell-dev/codecell"
)

// The container's first process is the codecell binary, re-executed as
// the "docker" init stage:
//
//	codecell-init docker N NAMES -- ARGV…
//
// It connects to the N sockets the host listens on in channelDir (3.sock,
// 4.sock, …), puts them at descriptors 3, 4, …, keeps only the variables
// NAMES lists (joined by "=", which no name holds), takes its own directory
// off PATH and executes ARGV in its place: the program's exit status is
// the container's.
func registerInit() {
	codecell.RegisterInitStage(Name, shim)
}

func shim() {
	exec := shimExec
	if len(os.Args) == 3 && os.Args[2] == "wait" {
		exec = shimWait
	}
	if err := exec(os.Args[2:]); err != nil {
		fmt.Fprintf(os.Stderr, "codecell: starting the program in the container: %v\n", err)
		os.Exit(125)
	}
}

// shimWait is a ready container's launcher: it connects to ctl.sock, reads
// the job (one line of JSON), and starts it as shimExec does.
func shimWait(_ []string) error {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: channelDir + "/ctl.sock"}); err != nil {
		return fmt.Errorf("connecting to the host: %w", err)
	}
	// Read with plain system calls, byte runs until the newline: nothing
	// of the runtime's poller is opened at a descriptor the job needs.
	var line []byte
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Read(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			// The host let the container go without a job.
			os.Exit(0)
		}
		line = append(line, buf[:n]...)
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			line = line[:i]
			break
		}
		if len(line) > 16<<20 {
			return errors.New("the job is over 16 MiB")
		}
	}
	var msg jobMessage
	if err := json.Unmarshal(line, &msg); err != nil {
		return fmt.Errorf("reading the job: %w", err)
	}
	if len(msg.Argv) == 0 || msg.Files < 0 || msg.Files > 16 {
		return errors.New("a job without a command")
	}
	if err := connectChannels(msg.Files); err != nil {
		return err
	}
	return unix.Exec(msg.Argv[0], msg.Argv, msg.Env)
}

func shimExec(args []string) error {
	if len(args) < 4 || args[2] != "--" {
		return fmt.Errorf("usage: %s %s N NAMES -- ARGV…", codecell.InitArg0, Name)
	}
	n, err := strconv.Atoi(args[0])
	if err != nil || n < 0 || n > 16 {
		return fmt.Errorf("bad descriptor count %q", args[0])
	}
	argv := args[3:]
	keep := map[string]bool{}
	for _, name := range strings.Split(args[1], "=") {
		keep[name] = true
	}
	if err := connectChannels(n); err != nil {
		return err
	}
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !keep[name] {
			continue
		}
		if rest, ok := strings.CutPrefix(kv, "PATH="+shimDir+":"); ok {
			kv = "PATH=" + rest
		}
		env = append(env, kv)
	}
	return unix.Exec(argv[0], argv, env)
}

// connectChannels connects the n sockets of channelDir and puts them at
// descriptors 3, 4, ….
func connectChannels(n int) error {
	// Each socket is connected first, at whatever descriptor it gets, and
	// moved above every target before any target is filled: a socket
	// opened at 4 must not be overwritten by the one for 4.
	high := make([]int, n)
	for i := range n {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		path := fmt.Sprintf("%s/%d.sock", channelDir, 3+i)
		if err := unix.Connect(fd, &unix.SockaddrUnix{Name: path}); err != nil {
			return fmt.Errorf("connecting %s: %w", path, err)
		}
		if high[i], err = unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 100); err != nil {
			return err
		}
		unix.Close(fd)
	}
	for i, fd := range high {
		// Without O_CLOEXEC: the program inherits these.
		if err := unix.Dup3(fd, 3+i, 0); err != nil {
			return err
		}
		unix.Close(fd)
	}
	return nil
}
