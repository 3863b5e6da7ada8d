package docker

import (
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
//	codecell-init docker N -- ARGV…
//
// It connects to the N sockets the host listens on in channelDir (3.sock,
// 4.sock, …), puts them at descriptors 3, 4, …, takes its own directory
// off PATH and executes ARGV in its place: the program is then the
// container's first process, and its exit status the container's.
func registerInit() {
	codecell.RegisterInitStage(Name, shim)
}

func shim() {
	if err := shimExec(os.Args[2:]); err != nil {
		fmt.Fprintf(os.Stderr, "codecell: starting the program in the container: %v\n", err)
		os.Exit(125)
	}
}

func shimExec(args []string) error {
	if len(args) < 3 || args[1] != "--" {
		return fmt.Errorf("usage: %s %s N -- ARGV…", codecell.InitArg0, Name)
	}
	n, err := strconv.Atoi(args[0])
	if err != nil || n < 0 || n > 16 {
		return fmt.Errorf("bad descriptor count %q", args[0])
	}
	argv := args[2:]
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
	env := os.Environ()
	for i, kv := range env {
		if rest, ok := strings.CutPrefix(kv, "PATH="+shimDir+":"); ok {
			env[i] = "PATH=" + rest
		}
	}
	return unix.Exec(argv[0], argv, env)
}
