package docker

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// A user who is not root finds a rootless engine of its own, in its
// runtime directory, before the system's; told that there is none, it is
// told to start one of its own, not a service on /run/podman, which only
// root may make; an engine's socket that refuses it says how to get in.
func TestEngineForAUser(t *testing.T) {
	got := socketsFor(1001, "/run/user/1001")
	if !slices.Equal(got[:2], []string{"/run/user/1001/docker.sock", "/run/user/1001/podman/podman.sock"}) || !slices.Equal(got[2:], DefaultSockets) {
		t.Errorf("sockets for uid 1001: %v", got)
	}
	if got := socketsFor(1001, ""); got[1] != "/run/user/1001/podman/podman.sock" {
		t.Errorf("sockets for uid 1001 without XDG_RUNTIME_DIR: %v", got)
	}
	if got := socketsFor(0, "/run/user/0"); !slices.Equal(got, DefaultSockets) {
		t.Errorf("sockets for root: %v", got)
	}
	msg := noEngine(1001, "/run/user/1001").Error()
	for _, want := range []string{"/run/user/1001/podman/podman.sock", "systemctl --user start podman.socket", "docker group"} {
		if !strings.Contains(msg, want) {
			t.Errorf("no engine, for uid 1001: %q lacks %q", msg, want)
		}
	}
	refused := fmt.Errorf("connecting: %w", syscall.EACCES)
	msg = engineRefused("unix:///var/run/docker.sock", 1001, refused).Error()
	if !strings.Contains(msg, "docker group") || !strings.Contains(msg, "rootless") || !errors.Is(engineRefused("h", 1001, refused), syscall.EACCES) {
		t.Errorf("a refused socket, for uid 1001: %q", msg)
	}
	if msg := engineRefused("h", 0, refused).Error(); strings.Contains(msg, "group") {
		t.Errorf("a refused socket, for root: %q", msg)
	}
}

// A socket that no engine listens on says what to start: Podman's service
// at that very socket, or an engine in general for another address.
func TestEngineNotListening(t *testing.T) {
	refused := fmt.Errorf("dial unix: %w", syscall.ECONNREFUSED)
	msg := engineRefused("unix:///run/podman/podman.sock", 0, refused).Error()
	if !strings.Contains(msg, "podman system service --time=0 unix:///run/podman/podman.sock") || !errors.Is(engineRefused("h", 0, refused), syscall.ECONNREFUSED) {
		t.Errorf("podman's socket, not listening: %q", msg)
	}
	msg = engineRefused("unix:///var/run/docker.sock", 0, refused).Error()
	if !strings.Contains(msg, "systemctl start docker") || !strings.Contains(msg, "DOCKER_HOST") {
		t.Errorf("docker's socket, not listening: %q", msg)
	}
	if msg := engineRefused("h", 0, fmt.Errorf("an engine's own error")).Error(); strings.Contains(msg, "start") {
		t.Errorf("an engine that answered with an error is told to start: %q", msg)
	}
}
