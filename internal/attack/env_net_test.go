//go:build linux

package attack_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codecell-dev/codecell"
)

// envProgram returns everything it can find of environments: its own, its
// init's, every visible process's (SCAN_ALL=1, never in a local control),
// and the host helper's (SLEEPER_PID, a host pid). The test looks for the secrets in what comes back, so the
// program need not know them.
const envProgram = `
R['os.environ'] = json.dumps(dict(os.environ))
R['proc-self-environ'] = attempt(lambda: read_all('/proc/self/environ').decode(errors='replace'))
if os.environ.get('SCAN_ALL') == '1':
    # Only in the sandbox: on the host this would collect other programs'
    # environments, which are none of the test's business.
    R['proc-1-environ'] = attempt(lambda: read_all('/proc/1/environ').decode(errors='replace'))
    for pid in [d for d in os.listdir('/proc') if d.isdigit()]:
        R['proc-%s-environ' % pid] = attempt(lambda: read_all('/proc/%s/environ' % pid).decode(errors='replace'))
R['sleeper-environ'] = attempt(lambda: read_all('/proc/%s/environ' % os.environ['SLEEPER_PID']).decode(errors='replace'))
print(json.dumps(R))
`

// startHostSleeper starts a host process tagged with a marker in argv, with
// env in its (real, /proc-visible) environment. It is killed when the test
// ends.
func startHostSleeper(t *testing.T, tag string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("/bin/sleep", "300")
	cmd.Args[0] = marker(tag)
	cmd.Env = env
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting a host sleeper: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	return cmd
}

func attackEnv(t *testing.T) {
	t.Parallel()
	sleeperSecret := "sleeper-secret-" + randHex(12)

	t.Run("host-environment", func(t *testing.T) {
		t.Parallel()
		if os.Getenv(hostSecretVar) != hostSecret {
			t.Fatalf("TestMain did not set the host secret")
		}
		sleeper := startHostSleeper(t, "env", "CODECELL_ATTACK_SLEEPER_SECRET="+sleeperSecret)
		env := map[string]string{"SLEEPER_PID": strconv.Itoa(sleeper.Process.Pid), "SCAN_ALL": "1"}
		r, res := probes(t, codecell.Exec{Env: env}, envProgram)
		for _, k := range sortedKeys(r) {
			for _, s := range []string{hostSecret, sleeperSecret, hostSecretVar} {
				if strings.Contains(r[k], s) {
					t.Errorf("%s holds the host's secret %q", k, s)
				}
			}
		}
		noSecret(t, res, hostSecret, sleeperSecret, hostSecretVar)
		t.Run("proc-1-environ", func(t *testing.T) { expectErrno(t, r, "proc-1-environ", "EACCES", "EPERM") })
		t.Run("host-pid-environ", func(t *testing.T) { expectErrno(t, r, "sleeper-environ", "ENOENT", "EACCES") })
		t.Run("os-environ", func(t *testing.T) {
			var vars map[string]string
			if err := jsonUnmarshal(r["os.environ"], &vars); err != nil {
				t.Fatal(err)
			}
			if _, ok := vars[hostSecretVar]; ok {
				t.Errorf("the program's environment holds %s", hostSecretVar)
			}
		})
	})

	// With no isolation, the same program finds the helper's secret in its
	// /proc/<pid>/environ: the search works.
	t.Run("local-control", func(t *testing.T) {
		t.Parallel()
		sleeper := startHostSleeper(t, "env", "CODECELL_ATTACK_SLEEPER_SECRET="+sleeperSecret)
		env := map[string]string{"SLEEPER_PID": strconv.Itoa(sleeper.Process.Pid)}
		r, res := probes(t, codecell.Exec{Tier: "local", Env: env}, envProgram)
		if !strings.Contains(r["sleeper-environ"], sleeperSecret) {
			t.Errorf("local control: the helper's secret was not found (%q): the search would miss a leak", clip(r["sleeper-environ"], 200))
		}
		if !strings.Contains(res.Stdout, sleeperSecret) {
			t.Errorf("local control: the secret is not in stdout")
		}
	})
}

// netTarget is one host listener the program tries to reach.
type netTarget struct {
	Name string `json:"name"`
	Kind string `json:"kind"` // tcp4, tcp6, udp4, udp6, unix
	Host string `json:"host"` // IP, or for unix the socket's path ("@name" abstract)
	Port int    `json:"port"`
}

// hostListeners are listeners the test runs on the host. None may hear from
// a sandboxed program.
type hostListeners struct {
	targets []netTarget
	stream  map[string]net.Listener
	packet  map[string]net.PacketConn
}

// startListeners listens on TCP and UDP on the host's loopback and, with
// all, on its other addresses too, and on an abstract and a filesystem
// unix socket.
func startListeners(t *testing.T, all bool) *hostListeners {
	t.Helper()
	l := &hostListeners{stream: map[string]net.Listener{}, packet: map[string]net.PacketConn{}}
	addrs := []string{"127.0.0.1"}
	if ln, err := net.Listen("tcp6", "[::1]:0"); err == nil {
		ln.Close()
		addrs = append(addrs, "::1")
	}
	if all {
		addrs = append(addrs, hostAddresses()...)
	}
	for _, a := range addrs {
		v := "4"
		if strings.Contains(a, ":") {
			v = "6"
		}
		name := strings.NewReplacer(".", "-", ":", "-").Replace(a)
		ln, err := net.Listen("tcp"+v, net.JoinHostPort(a, "0"))
		if err != nil {
			t.Fatalf("listening on %s: %v", a, err)
		}
		t.Cleanup(func() { ln.Close() })
		n := "tcp-" + name
		l.stream[n] = ln
		l.targets = append(l.targets, netTarget{n, "tcp" + v, a, ln.Addr().(*net.TCPAddr).Port})
		pc, err := net.ListenPacket("udp"+v, net.JoinHostPort(a, "0"))
		if err != nil {
			t.Fatalf("listening on udp %s: %v", a, err)
		}
		t.Cleanup(func() { pc.Close() })
		n = "udp-" + name
		l.packet[n] = pc
		l.targets = append(l.targets, netTarget{n, "udp" + v, a, pc.LocalAddr().(*net.UDPAddr).Port})
	}
	abstract := "@" + marker("abstract")
	ln, err := net.Listen("unix", abstract)
	if err != nil {
		t.Fatalf("listening on %s: %v", abstract, err)
	}
	t.Cleanup(func() { ln.Close() })
	l.stream["unix-abstract"] = ln
	l.targets = append(l.targets, netTarget{"unix-abstract", "unix", abstract, 0})

	path := filepath.Join(hostTempDir(t), "attack.sock")
	ln, err = net.Listen("unix", path)
	if err != nil {
		t.Fatalf("listening on %s: %v", path, err)
	}
	t.Cleanup(func() { ln.Close() })
	// Anyone may connect: only the sandbox, not the socket's mode, stops it.
	if err := os.Chmod(path, 0o777); err != nil {
		t.Fatal(err)
	}
	l.stream["unix-path"] = ln
	l.targets = append(l.targets, netTarget{"unix-path", "unix", path, 0})
	return l
}

// hostAddresses returns the host's addresses other than loopback and
// link-local ones.
func hostAddresses() []string {
	var out []string
	ifaces, _ := net.Interfaces()
	for _, iface := range ifaces {
		if iface.Flags&net.FlagUp == 0 || iface.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := iface.Addrs()
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok || ipn.IP.IsLoopback() || ipn.IP.IsLinkLocalUnicast() {
				continue
			}
			out = append(out, ipn.IP.String())
		}
	}
	return out
}

// heard returns, per listener, what reached it: a connection and its first
// bytes, or a datagram. It waits up to d in all.
func (l *hostListeners) heard(d time.Duration) map[string]string {
	deadline := time.Now().Add(d)
	out := map[string]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, ln := range l.stream {
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch ln := ln.(type) {
			case *net.TCPListener:
				_ = ln.SetDeadline(deadline)
			case *net.UnixListener:
				_ = ln.SetDeadline(deadline)
			}
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			_ = c.SetReadDeadline(time.Now().Add(time.Second))
			data, _ := io.ReadAll(io.LimitReader(c, 1024))
			mu.Lock()
			out[name] = fmt.Sprintf("connection from %v: %q", c.RemoteAddr(), data)
			mu.Unlock()
		}()
	}
	for name, pc := range l.packet {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = pc.SetReadDeadline(deadline)
			buf := make([]byte, 1024)
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			mu.Lock()
			out[name] = fmt.Sprintf("datagram from %v: %q", from, buf[:n])
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

// netProgram sends PAYLOAD to every target of TARGETS, and with SELF=1
// probes what the network namespace and Landlock leave it.
const netProgram = `
payload = os.environ['PAYLOAD'].encode()
for tgt in json.loads(os.environ['TARGETS']):
    kind, host, port = tgt['kind'], tgt['host'], tgt['port']
    fam = socket.AF_INET6 if kind.endswith('6') else socket.AF_INET
    def send():
        if kind.startswith('tcp'):
            s = socket.socket(fam, socket.SOCK_STREAM)
            s.settimeout(2)
            s.connect((host, port))
            s.sendall(payload)
            s.close()
        elif kind.startswith('udp'):
            s = socket.socket(fam, socket.SOCK_DGRAM)
            s.sendto(payload, (host, port))
            s.close()
        else:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(2)
            s.connect('\0' + host[1:] if host.startswith('@') else host)
            s.sendall(payload)
            s.close()
    R['send/' + tgt['name']] = attempt(send)

if os.environ.get('SELF') == '1':
    R['dns/example.com'] = attempt(lambda: socket.getaddrinfo('example.com', 80))
    R['dns/host-hostname'] = attempt(lambda: socket.getaddrinfo(os.environ['HOST_HOSTNAME'], 80))
    R['vsock-stream'] = attempt(lambda: socket.socket(40, socket.SOCK_STREAM, 0).close())
    R['vsock-dgram'] = attempt(lambda: socket.socket(40, socket.SOCK_DGRAM, 0).close())
    R['raw-icmp'] = attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP).close())
    R['packet'] = attempt(lambda: socket.socket(17, socket.SOCK_RAW, 0).close())
    R['interfaces'] = attempt(lambda: ','.join(n for _, n in socket.if_nameindex()))
    R['default-route'] = attempt(lambda: [l for l in read_all('/proc/net/route').decode().splitlines()[1:] if l.split()[1] == '00000000'] or None)
    R['bind-tcp-loopback'] = attempt(lambda: socket.socket().bind(('127.0.0.1', 0)))
    R['bind-tcp-any'] = attempt(lambda: socket.socket().bind(('0.0.0.0', 8080)))
    R['bind-tcp6-loopback'] = attempt(lambda: socket.socket(socket.AF_INET6).bind(('::1', 0)))
    # listen() on an unbound socket binds an ephemeral port without a bind
    # call, which Landlock does not see; connecting to it must still fail.
    srv = socket.socket()
    R['listen-unbound'] = attempt(lambda: srv.listen(1) or srv.getsockname()[1])
    port = srv.getsockname()[1]
    def connect_self():
        c = socket.socket()
        c.settimeout(2)
        c.connect(('127.0.0.1', port))
        c.close()
    R['connect-self'] = attempt(connect_self) if port else 'ENOTCONN'
    def connect_low():
        c = socket.socket()
        c.settimeout(2)
        c.connect(('127.0.0.1', 1))
    R['connect-loopback-port-1'] = attempt(connect_low)
`

func attackNetwork(t *testing.T) {
	t.Parallel()
	t.Run("host-listeners", func(t *testing.T) {
		t.Parallel()
		l := startListeners(t, true)
		payload := marker("payload")
		hostname, _ := os.Hostname()
		env := map[string]string{"TARGETS": mustJSON(l.targets), "PAYLOAD": payload, "SELF": "1", "HOST_HOSTNAME": hostname}
		r, _ := probes(t, codecell.Exec{Env: env}, netProgram)
		heard := l.heard(500 * time.Millisecond)
		for _, tgt := range l.targets {
			t.Run(tgt.Name, func(t *testing.T) {
				if got, ok := heard[tgt.Name]; ok {
					t.Errorf("the host's %s listener on %s:%d heard from the sandbox: %s", tgt.Kind, tgt.Host, tgt.Port, got)
				}
				// Inside, UDP to 127.0.0.1 is sent into the sandbox's own
				// loopback and "succeeds"; the listener above is what counts.
				if !strings.HasPrefix(tgt.Kind, "udp") || tgt.Host != "127.0.0.1" && tgt.Host != "::1" {
					expectRefused(t, r, "send/"+tgt.Name)
				}
			})
		}
		t.Run("dns", func(t *testing.T) {
			expectRefused(t, r, "dns/example.com")
			expectRefused(t, r, "dns/host-hostname")
		})
		t.Run("vsock", func(t *testing.T) {
			expectErrno(t, r, "vsock-stream", "EPERM")
			expectErrno(t, r, "vsock-dgram", "EPERM")
		})
		t.Run("raw-sockets", func(t *testing.T) {
			expectErrno(t, r, "raw-icmp", "EPERM")
			expectErrno(t, r, "packet", "EPERM", "EAFNOSUPPORT")
		})
		t.Run("only-loopback", func(t *testing.T) {
			if r["interfaces"] != "ok:lo" {
				t.Errorf("interfaces: got %q, want only lo", r["interfaces"])
			}
			if r["default-route"] != "ok" {
				t.Errorf("the sandbox has a default route: %q", r["default-route"])
			}
		})
		t.Run("tcp-bind-landlock", func(t *testing.T) {
			expectErrno(t, r, "bind-tcp-loopback", "EACCES")
			expectErrno(t, r, "bind-tcp-any", "EACCES")
			expectErrno(t, r, "bind-tcp6-loopback", "EACCES", "EADDRNOTAVAIL")
		})
		t.Run("tcp-connect-self-landlock", func(t *testing.T) {
			// listen() without bind is not a Landlock-controlled operation
			// (the kernel picks a port); the connection is what is refused.
			t.Logf("listen on an unbound socket: %s", r["listen-unbound"])
			expectErrno(t, r, "connect-self", "EACCES")
			expectErrno(t, r, "connect-loopback-port-1", "EACCES")
		})
	})

	// With no isolation the same program reaches the host's loopback
	// listeners: the host-side check hears a connection that gets through.
	t.Run("local-control", func(t *testing.T) {
		t.Parallel()
		l := startListeners(t, false)
		payload := marker("payload")
		env := map[string]string{"TARGETS": mustJSON(l.targets), "PAYLOAD": payload}
		r, _ := probes(t, codecell.Exec{Tier: "local", Env: env}, netProgram)
		heard := l.heard(2 * time.Second)
		for _, name := range []string{"tcp-127-0-0-1", "udp-127-0-0-1", "unix-abstract", "unix-path"} {
			expectOK(t, r, "send/"+name)
			if !strings.Contains(heard[name], payload) {
				t.Errorf("local control: the host's %s listener did not hear the payload (%q): the check would miss a connection", name, heard[name])
			}
		}
	})
}

func jsonUnmarshal(s string, v any) error {
	s = strings.TrimPrefix(s, "ok:")
	if s == "" {
		return errors.New("empty")
	}
	return json.Unmarshal([]byte(s), v)
}
