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
	if err := shimExec(os.Args[2:]); err != nil {
		fmt.Fprintf(os.Stderr, "codecell: starting the program in the container: %v\n", err)
		os.Exit(125)
	}
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
