// Package docker is the tier that runs each program in a container of its
// own, through the Docker Engine API: Docker's daemon, or Podman's
// compatible service. The container is made from a configured image (one
// per language if asked), with the Exec's limits as the engine's resource
// settings, no network, a read-only root, a tmpfs /tmp, no new privileges,
// every capability dropped, the engine's default seccomp profile and an
// unprivileged user.
//
// How one run goes:
//
//  1. The host makes a directory holding one unix socket per descriptor the
//     program inherits (the value channel at 3, the tool bridge at 4) and
//     one for the launcher (ctl.sock), makes a tmpfs volume of the
//     workspace limit's size, and creates the container, labelled
//     codecell=1 with this process's id and instance, with that directory,
//     the runner's files and the codecell binary bind-mounted read-only, and
//     the volume at /workspace.
//  2. The host starts the container. Its first process under the engine's
//     init is the codecell binary's "docker" init stage, the launcher,
//     which connects to ctl.sock and waits for the job.
//  3. The workspace goes in through the archive endpoint, owned by the
//     program's user: the engine mounts the tmpfs for a running container
//     only, so nothing is copied before the start.
//  4. The host attaches to the container's stdin, stdout and stderr and
//     sends the job. The launcher connects the sockets, puts them at
//     descriptors 3, 4, … and starts the program as its child.
//  5. When the program ends (or the context is done, and the host tells the
//     launcher to kill it), the launcher kills what it left running and
//     says how it ended, and what it took out of the workspace for the
//     read-back: the files too long for the workspace limit (an archive
//     carries holes as zeros) and the fifos, sockets and devices. The
//     workspace comes back through the archive endpoint while the container
//     still runs: the archive is read with the same checks as an upload (no
//     path outside the workspace, nothing through a link, a quota of bytes
//     and entries), hard links come back as copies, what cannot come back
//     is left with a warning that names it (and is never taken for
//     deleted), and the rest is compared with what went in, and the
//     changes are brought back to the caller's directory when it is one. The host closes ctl.sock, the launcher exits with the
//     program's status, and the container and its volumes are removed.
//
// A container (or a workspace's volume) whose codecell process died is
// removed by Sweep, which the tier runs once before its first container:
// the labels name the process that made it.
//
// The tier does not keep live sessions (codecell.LiveTier) nor reach hosts
// by a network policy (codecell.NetworkTier): the Engine refuses both with
// a message that says so.
package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/moby/moby/client"

	"github.com/codecell-dev/codecell"
)

// Name is the tier's registered name.
const Name = "docker"

// Paths inside the container.
const (
	workspaceDir = "/workspace"
	runnerDir    = "/run/codecell"
	channelDir   = "/run/codecell-channels"
	shimDir      = "/run/codecell-init"
)

// DefaultSockets are the system's engine sockets tried, in order, when
// neither Tier.Host nor DOCKER_HOST names one (after a rootless engine's,
// for a user who is not root: see socketsFor).
var DefaultSockets = []string{"/var/run/docker.sock", "/run/podman/podman.sock"}

// DefaultUser is who programs run as when Tier.User is empty: nobody.
const DefaultUser = "65534:65534"

func init() {
	codecell.RegisterTier(Default)
	registerInit()
}

// Default is the registered docker tier; its image comes from the
// configuration (docker.image) or CODECELL_DOCKER_IMAGE.
var Default = &Tier{}

// Tier runs programs in containers. Set its fields before the first run.
type Tier struct {
	// Host is the engine's address ("unix:///run/podman/podman.sock",
	// "tcp://…"); empty means DOCKER_HOST, else the first of DefaultSockets
	// that exists.
	Host string
	// Image is the image programs run in; Images overrides it per
	// language. Empty means CODECELL_DOCKER_IMAGE. The image must hold each
	// language's interpreter at the path codecell is configured with (the
	// host's, by default) and run the codecell binary: a static build
	// (CGO_ENABLED=0) runs in any image.
	Image  string
	Images map[string]string
	// User is the container's user, "uid:gid"; empty means DefaultUser.
	// Root ("0", "root") is refused.
	User string
	// Tmp is the size of the container's /tmp; 0 means 128 MiB.
	Tmp int64
	// Pool is how many containers to keep ready (created and started,
	// waiting for a job); 0 means DefaultPool, a negative value none.
	Pool int

	mu       sync.Mutex
	cli      *client.Client
	cliHost  string
	runtime  string   // "podman 4.3.1", learned once
	cgroup   string   // "v1" or "v2", learned with it
	security []string // the engine's security options: "name=seccomp,profile=default", "name=userns", …
	probed   time.Time
	probeErr error
	swept    bool
	pool     pool
}

func (t *Tier) Name() string    { return Name }
func (t *Tier) Isolating() bool { return true }

// NeedsInit: the codecell binary is the container's first process, which
// hands the program its descriptors.
func (t *Tier) NeedsInit() bool { return true }

// CopiesWorkspace: the program works on a copy in the container's volume,
// a tmpfs of the workspace limit's size.
func (t *Tier) CopiesWorkspace() bool { return true }

// View: the program sees its workspace and runner at fixed paths.
func (t *Tier) View(workspace, runner string) codecell.View {
	return codecell.View{Workspace: workspaceDir, Runner: runnerDir}
}

func (t *Tier) tmpSize() int64 {
	if t.Tmp > 0 {
		return t.Tmp
	}
	return 128 << 20
}

func (t *Tier) user() string {
	if t.User != "" {
		return t.User
	}
	return DefaultUser
}

// ImageFor is the image programs in language run in, or "" when none is
// configured.
func (t *Tier) ImageFor(language string) string { return t.image(language) }

// image is the image for a language, or "" when none is configured.
func (t *Tier) image(language string) string {
	if img := t.Images[language]; img != "" {
		return img
	}
	if t.Image != "" {
		return t.Image
	}
	return os.Getenv("CODECELL_DOCKER_IMAGE")
}

// MountsReadOnly: a program can see host directories (its packages),
// bound read-only into its container, when the engine runs on this host
// (a unix socket): an engine elsewhere has other directories.
func (t *Tier) MountsReadOnly() bool {
	h, ok := t.EngineHost()
	return ok && strings.HasPrefix(h, "unix://")
}

var _ codecell.MountTier = (*Tier)(nil)

// EngineHost is the engine address the tier uses, and whether one was
// found.
func (t *Tier) EngineHost() (string, bool) {
	if t.Host != "" {
		return t.Host, true
	}
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		return h, true
	}
	for _, s := range socketsFor(os.Geteuid(), os.Getenv("XDG_RUNTIME_DIR")) {
		if info, err := os.Stat(s); err == nil && info.Mode()&os.ModeSocket != 0 {
			return "unix://" + s, true
		}
	}
	return "", false
}

// socketsFor are the engine sockets EngineHost tries for the user uid
// whose runtime directory ($XDG_RUNTIME_DIR) is runtimeDir: a user who is
// not root first has the rootless engines' of its own, Docker's and
// Podman's, in its runtime directory (/run/user/<uid> when the variable
// is not set); then DefaultSockets, which a user reaches only through
// their group.
func socketsFor(uid int, runtimeDir string) []string {
	if uid == 0 {
		return DefaultSockets
	}
	dir := userRuntimeDir(uid, runtimeDir)
	return append([]string{filepath.Join(dir, "docker.sock"), filepath.Join(dir, "podman", "podman.sock")}, DefaultSockets...)
}

func userRuntimeDir(uid int, runtimeDir string) string {
	if runtimeDir != "" && filepath.IsAbs(runtimeDir) {
		return runtimeDir
	}
	return fmt.Sprintf("/run/user/%d", uid)
}

// noEngine says that no engine was found, and what to start: a user who
// is not root starts a rootless one.
func noEngine(uid int, runtimeDir string) error {
	tried := strings.Join(socketsFor(uid, runtimeDir), ", ")
	if uid == 0 {
		return fmt.Errorf("no container engine: DOCKER_HOST is not set and none of %s exists; start Docker, or Podman's service (podman system service --time=0 unix:///run/podman/podman.sock)", tried)
	}
	return fmt.Errorf("no container engine: DOCKER_HOST is not set and none of %s exists; start a rootless engine of your own (systemctl --user start podman.socket, or podman system service --time=0 unix://%s/podman/podman.sock; or rootless Docker), or, for the system's Docker, join the docker group", tried, userRuntimeDir(uid, runtimeDir))
}

// engineRefused is err, an engine's that did not answer at host, with what
// to do when its socket let this user in: it belongs to another user (the
// system's engine, root's), who lets others in only through its group.
func engineRefused(host string, uid int, err error) error {
	err = fmt.Errorf("the container engine at %s does not answer: %w", host, err)
	if uid != 0 && (errors.Is(err, syscall.EACCES) || strings.Contains(err.Error(), "permission denied")) {
		return fmt.Errorf("%w; its socket lets uid %d in only through its group: join that group (for Docker, the docker group: sudo usermod -aG docker $USER, then log in again), or start a rootless engine of your own (systemctl --user start podman.socket) and set DOCKER_HOST to its socket", err, uid)
	}
	// A socket that no engine listens on (left by one that stopped): say
	// what to start, as noEngine does when there is no socket at all.
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) || client.IsErrConnectionFailed(err) {
		if path, ok := strings.CutPrefix(host, "unix://"); ok && strings.Contains(path, "podman") {
			return fmt.Errorf("%w; nothing listens on it: start Podman's service (podman system service --time=0 %s), or set DOCKER_HOST to an engine that runs", err, host)
		}
		return fmt.Errorf("%w; nothing listens there: start the engine (Docker: systemctl start docker; Podman: podman system service --time=0 unix:///run/podman/podman.sock), or set DOCKER_HOST to an engine that runs", err)
	}
	return err
}

// client returns the engine's client, made on first use.
func (t *Tier) client() (*client.Client, error) {
	host, ok := t.EngineHost()
	if !ok {
		return nil, noEngine(os.Geteuid(), os.Getenv("XDG_RUNTIME_DIR"))
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cli != nil && t.cliHost == host {
		return t.cli, nil
	}
	c, err := client.New(client.WithHost(host), client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("container engine at %s: %w", host, err)
	}
	if t.cli != nil {
		t.cli.Close()
	}
	t.cli, t.cliHost, t.runtime = c, host, ""
	return c, nil
}

// Probe says whether the engine answers. Its answer is kept for a few
// seconds: the Engine probes a tier before each run.
func (t *Tier) Probe() error {
	t.mu.Lock()
	if !t.probed.IsZero() && time.Since(t.probed) < 5*time.Second {
		err := t.probeErr
		t.mu.Unlock()
		return err
	}
	t.mu.Unlock()
	_, err := t.Runtime(context.Background())
	t.mu.Lock()
	t.probed, t.probeErr = time.Now(), err
	t.mu.Unlock()
	return err
}

// Runtime names the engine that answers, and its version: "docker 27.1.1"
// or "podman 4.3.1".
func (t *Tier) Runtime(ctx context.Context) (string, error) {
	c, err := t.client()
	if err != nil {
		return "", err
	}
	t.mu.Lock()
	rt := t.runtime
	t.mu.Unlock()
	if rt != "" {
		return rt, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	v, err := c.ServerVersion(ctx, client.ServerVersionOptions{})
	if err != nil {
		return "", engineRefused(t.cliHost, os.Geteuid(), err)
	}
	rt = "docker " + v.Version
	for _, comp := range v.Components {
		if strings.Contains(strings.ToLower(comp.Name), "podman") {
			rt = "podman " + comp.Version
		}
	}
	if strings.Contains(strings.ToLower(v.Platform.Name), "podman") && !strings.HasPrefix(rt, "podman") {
		rt = "podman " + v.Version
	}
	cg := ""
	var sec []string
	if info, err := c.Info(ctx, client.InfoOptions{}); err == nil {
		if info.Info.CgroupVersion != "" {
			cg = "v" + info.Info.CgroupVersion
		}
		sec = info.Info.SecurityOptions
	}
	t.mu.Lock()
	t.runtime, t.cgroup, t.security = rt, cg, sec
	t.mu.Unlock()
	return rt, nil
}

// securityOption returns the engine's security option name ("seccomp",
// "userns", "rootless") with its settings, and whether the engine has it.
func (t *Tier) securityOption(name string) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, o := range t.security {
		if o == "name="+name || strings.HasPrefix(o, "name="+name+",") {
			return o, true
		}
	}
	return "", false
}

func (t *Tier) cgroupVersion() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cgroup
}

// Close removes the ready containers and closes the tier's connection to
// the engine.
func (t *Tier) Close() error {
	t.closePool()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cli != nil {
		err := t.cli.Close()
		t.cli = nil
		return err
	}
	return nil
}

// instance tells this process's containers from those of an earlier
// process that had the same pid.
var instance = func() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}()

// Labels on every container the tier makes.
const (
	labelMark     = "codecell"
	labelPID      = "codecell.owner.pid"
	labelInstance = "codecell.owner.instance"
	labelStarted  = "codecell.owner.started"
)

// errNoImage is the refusal of a run with no image configured.
func errNoImage(language string) error {
	return codecell.Errorf(codecell.KindValidation, codecell.CodeTierUnavailable,
		"the docker tier has no image for %s", language).WithHints(
		`set "docker": {"image": "…"} in the configuration (or "images": {"`+language+`": "…"}), or CODECELL_DOCKER_IMAGE`,
		"the image must hold the interpreter at the path codecell is configured with")
}

var errRootUser = errors.New(`the docker tier does not run programs as root: set docker.user to an unprivileged "uid:gid"`)

// Containers lists the containers this process has made that still exist.
func (t *Tier) Containers(ctx context.Context) ([]string, error) {
	c, err := t.client()
	if err != nil {
		return nil, err
	}
	list, err := c.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", labelInstance+"="+instance)})
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(list.Items))
	for _, ct := range list.Items {
		ids = append(ids, ct.ID)
	}
	return ids, nil
}
