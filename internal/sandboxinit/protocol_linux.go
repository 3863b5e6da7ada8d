//go:build linux

package sandboxinit

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/codecell-dev/codecell/internal/jsonkeys"
	"golang.org/x/sys/unix"
)

// The host and the sandbox's init talk over a SOCK_SEQPACKET socket pair:
// one JSON message per packet, so that a job's file descriptors travel with
// the job itself (SCM_RIGHTS) and no framing is needed.
//
//	host → init   SpawnSpec          build the sandbox; answer ready
//	init → host   Message{Ready}
//	host → init   Message{Warm}      (optional) start the interpreter ahead of its job
//	init → host   Message{Warmed} + fds  its pid, and the host's ends of its descriptors
//	host → init   Message{Job} + fds  run the program with these stdio fds
//	init → host   Message{Started}
//	host → init   Message{Interrupt} (a live session's cell over its time)
//	host → init   Message{Kill}      (on timeout or cancellation)
//	init → host   Message{Conn} + fd  a connection the program opened (a network's sandbox)
//	init → host   Message{Exited}    the program ended, nothing it started is left
//	host → init   Message{Exit}      the host has read the workspace; end
//
// A template sandbox (SpawnSpec.Template) answers ready before confining
// itself, and its init then becomes a fork server (tier/native's zygote_linux.go, whose
// runs speak the job's part of this protocol).
//
// When either side's end closes, the other treats it as Kill and Exit.

// maxMessage bounds one packet: a job carries argv and the environment.
const maxMessage = 1 << 20

// SpawnSpec is what init needs to build the sandbox, before any job.
type SpawnSpec struct {
	RootDir     string   `json:"root_dir"`     // an empty host directory to mount the new root on
	SystemDirs  []string `json:"system_dirs"`  // host directories to show read-only, at the same path
	EtcEntries  []string `json:"etc_entries"`  // names under /etc to show read-only
	ExtraMounts []string `json:"extra_mounts"` // more host directories to show read-only
	// Binds are host directories shown read-only elsewhere: a job's
	// packages (codecell.Job.Mounts).
	Binds      []BindSpec `json:"binds,omitempty"`
	Hostname   string     `json:"hostname"`
	ProgramUID int        `json:"program_uid"`
	Workspace  int64      `json:"workspace"` // bytes
	Tmp        int64      `json:"tmp"`       // bytes
	Shm        int64      `json:"shm"`       // bytes
	// Template: init builds the sandbox, answers ready unconfined, and
	// becomes the fork server a Template message starts (tier/native's zygote_linux.go).
	Template bool `json:"template,omitempty"`
	// Network, when set, gives the program the names a network policy
	// allows (network_linux.go).
	Network *NetSpec `json:"network,omitempty"`
	// Placing: the host puts init into its cgroup while init builds the
	// root (cgroup v1, which has no CLONE_INTO_CGROUP), and says so with
	// a Placed message, which init waits for before it makes its cgroup
	// namespace or runs anything but its own set-up.
	Placing bool `json:"placing,omitempty"`
}

// NetSpec is a sandbox's network: the names its /etc/hosts gives, each an
// address of the range its loopback holds, and the ports init listens on
// there. Every connection init accepts goes to the host (Message.Conn).
type NetSpec struct {
	Hosts []HostAddr `json:"hosts"`
	Ports []int      `json:"ports"`
	// Wildcards are the allowed domains' suffixes (".example.com"): the
	// sandbox's own resolver answers names under them (resolver_linux.go).
	Wildcards []string `json:"wildcards,omitempty"`
	// Secrets name the network secrets the proxy adds for the program
	// (their values stay on the host), and CA is the certificate, PEM, of
	// the authority it shows their hosts' certificates from: the
	// sandbox's CA bundle holds it besides the host's roots.
	Secrets []string `json:"secrets,omitempty"`
	CA      string   `json:"ca,omitempty"`
}

// BindSpec is a host directory (Src) shown read-only at Dst.
type BindSpec struct {
	Src string `json:"src"`
	Dst string `json:"dst"`
}

type HostAddr struct {
	Name string `json:"name"`
	Addr string `json:"addr"`
}

// ConnInfo is a connection the program opened, to a name of the sandbox's
// hosts, on a port: its socket comes with the message.
type ConnInfo struct {
	Name string `json:"name"`
	Port int    `json:"port"`
}

// JobSpec is one program to run. Its stdin, stdout, stderr and extra files
// arrive with it as file descriptors, in that order.
type JobSpec struct {
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
	Dir  string   `json:"dir"`
	// Rlimits apply when no cgroup could; RLIMIT_CORE is always 0.
	Rlimits []Rlimit `json:"rlimits"`
	// Warm: the program is the interpreter started by the Warm message,
	// already running; no descriptors come with the job.
	Warm bool `json:"warm,omitempty"`
	// Forked: the program is the fork server's interpreter, forked for the
	// job, which reads Message (codecell.WarmStart's) instead of starting
	// Argv.
	Forked  bool   `json:"forked,omitempty"`
	Message []byte `json:"message,omitempty"`
}

// WarmSpec starts an interpreter before its job: as the program would be
// started, with pipes for its stdin, stdout and stderr, Extra sockets at
// descriptors 3, 4, …, and a pipe it reads its job from at 3+Extra. The
// host gets the other end of each (Warmed).
type WarmSpec struct {
	Argv    []string `json:"argv"`
	Env     []string `json:"env"`
	Dir     string   `json:"dir"`
	Extra   int      `json:"extra"`
	Rlimits []Rlimit `json:"rlimits"`
}

type Rlimit struct {
	Resource int    `json:"resource"`
	Value    uint64 `json:"value"`
}

// Message is every other packet.
type Message struct {
	Ready  *ReadyInfo `json:"ready,omitempty"`
	Job    *JobSpec   `json:"job,omitempty"`
	Warm   *WarmSpec  `json:"warm,omitempty"`
	Warmed int        `json:"warmed,omitempty"` // the warm interpreter's pid inside

	// The fork server's (tier/native's zygote_linux.go).
	Template *TemplateSpec `json:"template,omitempty"`
	Config   *ForkConfig   `json:"config,omitempty"`
	Fork     *ForkSpec     `json:"fork,omitempty"`
	Hello    bool          `json:"hello,omitempty"`
	Go       *ForkSpec     `json:"go,omitempty"`

	Conn    *ConnInfo `json:"conn,omitempty"`
	Started int       `json:"started,omitempty"` // the program's pid inside
	Kill    bool      `json:"kill,omitempty"`
	// Interrupt: send the program SIGINT (a live session's cell over its
	// time); the program decides what it does with it.
	Interrupt bool      `json:"interrupt,omitempty"`
	Exited    *ExitInfo `json:"exited,omitempty"`
	Exit      bool      `json:"exit,omitempty"`
	Placed    bool      `json:"placed,omitempty"` // init is in its cgroup (SpawnSpec.Placing)
	Error     string    `json:"error,omitempty"`
	// Mount is the directory of SpawnSpec.ExtraMounts that init could not
	// show, when that is why Error came: the caller's to change.
	Mount string `json:"mount,omitempty"`
	// Refused: what init could not do, the kernel refused it (EPERM,
	// EACCES), which no retry changes.
	Refused bool `json:"refused,omitempty"`
}

// The fork server's messages (tier/native's zygote_linux.go and zygote.py).

// TemplateSpec starts the fork server in init's place.
type TemplateSpec struct {
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
	Dir  string   `json:"dir"`
}

// ForkConfig is how every run of a fork server confines itself.
type ForkConfig struct {
	ProgramUID int `json:"program_uid"`
	CapLast    int `json:"cap_last"`
	// SupervisorCaps are what each run's supervisor keeps, as init does.
	SupervisorCaps uint64        `json:"supervisor_caps"`
	Seccomp        []byte        `json:"seccomp"` // classic BPF, struct sock_filter after struct sock_filter
	Landlock       *LandlockPlan `json:"landlock,omitempty"`
	Proc           ProcMasks     `json:"proc"`
}

// ProcMasks are the files and directories of /proc a run hides or makes
// read-only, as init does (buildProc).
type ProcMasks struct {
	MaskedFiles []string `json:"masked_files"`
	MaskedDirs  []string `json:"masked_dirs"`
	ReadOnly    []string `json:"read_only"`
}

// ForkSpec is one run's filesystems (Go), or how the run is forked (Fork).
type ForkSpec struct {
	Mounts []MountSpec `json:"mounts"`
	// Enter, in Fork: of the descriptors after the run's socket, the first
	// Enter are the v1 cgroup "tasks" files of the run's cgroup, and the
	// rest those of the fork server's own. The server moves its thread
	// into the run's, forks the run, and moves back, so that the run is
	// born in its cgroup (cgroup.Group.EnterThread's way); the run's Hello
	// says Placed when it was.
	Enter int `json:"enter,omitempty"`
}

// MountSpec is one mount(2), with no source.
type MountSpec struct {
	Target string  `json:"target"`
	FSType string  `json:"fstype"`
	Flags  uintptr `json:"flags"`
	Data   string  `json:"data"`
}

// ReadyInfo says the sandbox is built and init confined.
type ReadyInfo struct {
	Landlock string `json:"landlock"` // what Landlock applied
	Seccomp  string `json:"seccomp"`
}

type ExitInfo struct {
	ExitCode int `json:"exit_code"`
	Signal   int `json:"signal"`
}

// Conn is one end of the control socket. Inside the sandbox the socket
// blocks: readers wait in recvmsg, and the owner closes the file only after
// the other end is gone (so every reader has returned). The host's end
// (SocketPair's host) does not block: its readers and writers wait in Go's
// network poller, as a net.Conn's do, not each in a thread of its own held
// in a system call, and a read can have a deadline (RecvWithin).
type Conn struct {
	f  *os.File
	fd int
	rc syscall.RawConn // the host's end; nil for a blocking socket
}

func NewConn(f *os.File) *Conn {
	c := &Conn{f: f, fd: -1}
	// f.Fd() would make the socket block: the descriptor is read through
	// the file's RawConn instead.
	if rc, err := f.SyscallConn(); err == nil {
		nonblocking := false
		_ = rc.Control(func(fd uintptr) {
			c.fd = int(fd)
			flags, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
			nonblocking = err == nil && flags&unix.O_NONBLOCK != 0
		})
		if nonblocking {
			c.rc = rc
			return c
		}
	}
	c.fd = int(f.Fd())
	return c
}

// FD is the socket's descriptor, for shutdown(2).
func (c *Conn) FD() int { return c.fd }

// Close closes the socket, once the other end is gone.
func (c *Conn) Close() error { return c.f.Close() }

func (c *Conn) Send(v any, fds ...int) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if len(data) > maxMessage {
		return fmt.Errorf("control message of %d bytes is over the %d limit", len(data), maxMessage)
	}
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	if c.rc == nil {
		return unix.Sendmsg(c.fd, data, oob, nil, 0)
	}
	var serr error
	err = c.rc.Write(func(fd uintptr) bool {
		for {
			serr = unix.Sendmsg(int(fd), data, oob, nil, 0)
			if serr != unix.EINTR {
				return serr != unix.EAGAIN
			}
		}
	})
	return errors.Join(err, serr)
}

// Recv reads one packet into v and returns the file descriptors that came
// with it.
func (c *Conn) Recv(v any) ([]int, error) {
	return c.recv(v, 0)
}

// RecvWithin is Recv that gives up after d (os.ErrDeadlineExceeded), on
// the host's end; d <= 0 waits as long as it takes. The deadline is the
// socket's, not the call's: a Conn has one reader at a time, as the
// protocol has one message in flight each way.
func (c *Conn) RecvWithin(v any, d time.Duration) ([]int, error) {
	if c.rc == nil && d > 0 {
		return nil, errors.New("control socket: a deadline needs the host's end of SocketPair")
	}
	return c.recv(v, d)
}

func (c *Conn) recv(v any, d time.Duration) ([]int, error) {
	var buf []byte
	oob := make([]byte, unix.CmsgSpace(16*4))
	var n, oobn, flags int
	// Each packet is read twice: its length first (MSG_PEEK|MSG_TRUNC
	// gives the whole packet's, and takes nothing, descriptors included),
	// then the packet into a buffer of that length. No reader holds a
	// buffer of the largest message while it waits.
	read := func(fd int) error {
		size, _, _, _, err := unix.Recvmsg(fd, nil, nil, unix.MSG_PEEK|unix.MSG_TRUNC)
		if err != nil {
			return err
		}
		buf = make([]byte, min(size, maxMessage))
		n, oobn, flags, _, err = unix.Recvmsg(fd, buf, oob, unix.MSG_CMSG_CLOEXEC)
		return err
	}
	var err error
	if c.rc == nil {
		err = read(c.fd)
	} else {
		var deadline time.Time
		if d > 0 {
			deadline = time.Now().Add(d)
		}
		if err := c.f.SetReadDeadline(deadline); err != nil {
			return nil, err
		}
		var rerr error
		err = c.rc.Read(func(fd uintptr) bool {
			for {
				rerr = read(int(fd))
				if rerr != unix.EINTR {
					return rerr != unix.EAGAIN
				}
			}
		})
		if err == nil {
			err = rerr
		}
	}
	if err != nil {
		return nil, err
	}
	var fds []int
	if oobn > 0 {
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			got, err := unix.ParseUnixRights(&m)
			if err != nil {
				return nil, err
			}
			fds = append(fds, got...)
		}
	}
	if n == 0 {
		CloseAll(fds)
		return nil, ErrClosed
	}
	if flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 {
		CloseAll(fds)
		return nil, errors.New("control message truncated")
	}
	if err := json.Unmarshal(buf[:n], v); err != nil {
		CloseAll(fds)
		return nil, fmt.Errorf("control message: %w", err)
	}
	// A subverted init could give a key twice ({"exited": ..., "exited":
	// ...}), of which encoding/json keeps the last: no message does.
	if d, ok := jsonkeys.IsDuplicate(jsonkeys.Check(buf[:n])); ok {
		CloseAll(fds)
		return nil, fmt.Errorf("control message: %w", d)
	}
	return fds, nil
}

var ErrClosed = errors.New("the other end closed the control socket")

func CloseAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// SocketPair returns the host's and init's ends of a control socket.
func SocketPair() (host, init *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	// A packet must fit the socket's buffers whole; the default (about
	// 200 KiB) is smaller than the largest job. Root may exceed the
	// system's maximum; others get what it allows.
	for _, fd := range fds {
		for _, opt := range [][2]int{{unix.SO_SNDBUFFORCE, unix.SO_SNDBUF}, {unix.SO_RCVBUFFORCE, unix.SO_RCVBUF}} {
			if unix.SetsockoptInt(fd, unix.SOL_SOCKET, opt[0], 2*maxMessage) != nil {
				_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, opt[1], 2*maxMessage)
			}
		}
	}
	// The host's end does not block (see Conn); O_NONBLOCK is the open
	// file's, so init's end still does.
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, nil, err
	}
	return os.NewFile(uintptr(fds[0]), "control"), os.NewFile(uintptr(fds[1]), "control"), nil
}
