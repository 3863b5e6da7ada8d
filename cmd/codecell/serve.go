package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/config"
	"github.com/codecell-dev/codecell/internal/instdir"
	"github.com/codecell-dev/codecell/mcp"
	"github.com/codecell-dev/codecell/server"
	"github.com/codecell-dev/codecell/session"
	"github.com/codecell-dev/codecell/tier/docker"
	"github.com/codecell-dev/codecell/tier/native"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// serverFlags are the flags codecell mcp and codecell serve share.
type serverFlags struct {
	config, log, state string
	maxSessions        int
}

func (f *serverFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.config, "config", "", "the configuration `FILE`: limits, tier, tool policy, upstream MCP servers, tokens")
	fs.StringVar(&f.log, "log", "", "write logs (JSON lines) to `FILE` instead of stderr")
	fs.StringVar(&f.state, "state", "", "the state `DIR` for sessions' workspaces (default: the configuration's, /var/lib/codecell as root, else ~/.local/state/codecell)")
}

// service is what codecell mcp and codecell serve run on: an engine from
// the configuration, and a session store in an instance directory of the
// state directory.
type service struct {
	eng    *codecell.Engine
	cfg    *config.Config
	store  *session.Store
	logger *slog.Logger
	close  func()
}

// service builds the engine and the session store, and first clears what a
// killed codecell left: its instance directories (sessions' workspaces,
// runner directories) and its sandboxes' cgroups and processes.
func (m *Main) service(f serverFlags) (*service, int) {
	logOut := m.Stderr
	var logFile *os.File
	if f.log != "" {
		file, err := os.OpenFile(f.log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			fmt.Fprintf(m.Stderr, "codecell: %v\n", err)
			return nil, exitUsage
		}
		logFile, logOut = file, file
	}
	// Lines logged with a principal's context say whose they are.
	logger := slog.New(session.LogHandler(slog.NewJSONHandler(logOut, nil)))
	eng, mounts, closeEngine, code := m.engine(f.config, logger)
	if code != 0 {
		if logFile != nil {
			logFile.Close()
		}
		return nil, code
	}
	cfg := &config.Config{}
	if f.config != "" {
		cfg, _ = config.Load(f.config) // already loaded and checked by engine
	}
	var closers []func()
	// The upstream servers log as they stop: the log is closed last.
	closeEngineAndLog := func() {
		closeEngine()
		if logFile != nil {
			logFile.Close()
		}
	}
	fail := func(code int, format string, args ...any) (*service, int) {
		fmt.Fprintf(m.Stderr, "codecell: "+format+"\n", args...)
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
		closeEngineAndLog()
		return nil, code
	}
	eng.Logger = logger
	// A long-running service: sandboxes are built ahead of need.
	nativeTier := &native.Tier{ExtraMounts: mounts}
	eng.Tiers = append([]codecell.Tier{nativeTier}, eng.Tiers...)

	stateDir := f.state
	if stateDir == "" {
		stateDir = cfg.Server.StateDir
	}
	if stateDir == "" {
		var err error
		if stateDir, err = defaultStateDir(); err != nil {
			return fail(exitUsage, "%v; give a state directory with --state", err)
		}
	}
	inst, removed, err := instdir.Claim(stateDir, "serve-")
	if err != nil {
		return fail(exitInternal, "state directory: %v; give one this user may write with --state DIR (or server.state_dir in the configuration)", err)
	}
	closers = append(closers, func() { inst.Release() })
	// Runner directories: a few small files per run, on a tmpfs when there
	// is one (see Engine.TempDir).
	tmpBase := filepath.Join(inst.Path, "tmp")
	if shm := instdir.TmpfsBase(); shm != "" {
		tmp, more, err := instdir.Claim(shm, "serve-")
		if err == nil {
			closers = append(closers, func() { tmp.Release() })
			tmpBase, removed = tmp.Path, append(removed, more...)
		}
	}
	if err := os.MkdirAll(tmpBase, 0o700); err != nil {
		return fail(exitInternal, "%v", err)
	}
	eng.TempDir = tmpBase
	rec, err := native.Recover()
	if err != nil {
		logger.Warn("clearing what a stopped codecell left", "error", err.Error())
	}
	if len(removed) > 0 || rec.Groups > 0 || rec.Processes > 0 {
		logger.Info("cleared what a stopped codecell left", "directories", len(removed), "cgroups", rec.Groups, "processes", rec.Processes)
	}

	idle, maxSessions := 30*time.Minute, 100
	if cfg.Server.IdleTimeout > 0 {
		idle = time.Duration(cfg.Server.IdleTimeout)
	}
	if cfg.Server.MaxSessions > 0 {
		maxSessions = cfg.Server.MaxSessions
	}
	if f.maxSessions > 0 {
		maxSessions = f.maxSessions
	}
	store, err := session.NewStore(filepath.Join(inst.Path, "sessions"), idle, maxSessions)
	if err != nil {
		return fail(exitInternal, "%v", err)
	}
	// Closed in reverse: the sessions (ending their programs), then the
	// pools of sandboxes and of ready containers, then the directories.
	closers = append(closers, func() { _ = docker.Default.Close() }, func() { nativeTier.Close() }, store.Close)
	return &service{eng: eng, cfg: cfg, store: store, logger: logger, close: func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
		closeEngineAndLog()
	}}, 0
}

// defaultStateDir is /var/lib/codecell for root, and the XDG state
// directory for anyone else.
func defaultStateDir() (string, error) {
	if os.Geteuid() == 0 {
		return "/var/lib/codecell", nil
	}
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "codecell"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, ".local", "state", "codecell"), nil
}

// mcpServer is the MCP server on a service.
func (svc *service) mcpServer() *mcp.Server {
	return &mcp.Server{Engine: svc.eng, Sessions: svc.store, Version: version, Logger: svc.logger,
		MaxRunning: svc.cfg.Server.MaxRunning, PromptBudgetTokens: svc.cfg.MCP.PromptBudgetTokens}
}

// mcpCommand serves MCP over stdin and stdout: what Claude Desktop, Claude
// Code and Cursor start.
func (m *Main) mcpCommand(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("codecell mcp", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	var f serverFlags
	f.register(fs)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	svc, code := m.service(f)
	if code != 0 {
		return code
	}
	defer svc.close()
	// Typed at a terminal, it would wait in silence for JSON-RPC.
	if in, ok := m.Stdin.(*os.File); ok && isTerminal(in) {
		fmt.Fprintln(m.Stderr, "codecell mcp: serving MCP on standard input and output, for an MCP client to start (claude mcp add, or the mcpServers of Claude Desktop or Cursor): it reads JSON-RPC, not commands. Ctrl-D ends it; codecell run runs a program by hand.")
	}
	if err := svc.mcpServer().Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(m.Stderr, "codecell mcp: %v\n", err)
		return exitInternal
	}
	return 0
}

// serve is the HTTP service: the REST API of sessions, files and
// executions, MCP over streamable HTTP at /mcp, /metrics for Prometheus.
func (m *Main) serve(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("codecell serve", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	var f serverFlags
	f.register(fs)
	addr := fs.String("addr", "127.0.0.1:8080", "the address to listen on")
	maxRunning := fs.Int("max-running", 0, "executions that run at once; one more gets 429 (default: the configuration's, or twice the CPUs)")
	grace := fs.Duration("grace", 10*time.Second, "on SIGTERM, how long running executions may go on before they are ended")
	fs.IntVar(&f.maxSessions, "max-sessions", 0, "sessions that exist at once (default: the configuration's, or 100)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(m.Stderr, "codecell serve: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	svc, code := m.service(f)
	if code != 0 {
		return code
	}
	defer svc.close()
	cfg := svc.cfg
	tokens, err := serveTokens(cfg)
	if err != nil {
		fmt.Fprintf(m.Stderr, "codecell serve: %v\n", err)
		return exitUsage
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(m.Stderr, "codecell serve: %v\n", err)
		return exitUsage
	}
	defer ln.Close()
	if len(tokens) == 0 {
		if !isLoopback(ln.Addr()) {
			fmt.Fprintf(m.Stderr, "codecell serve: no token is configured, so codecell listens on loopback only, not %s: set tokens under \"auth\" in the configuration or in CODECELL_TOKENS\n", ln.Addr())
			return exitUsage
		}
		// Other users reach loopback too: the server refuses them (server/peer.go).
		fmt.Fprintf(m.Stderr, "codecell: no token is configured: listening on loopback only, for uid %d's processes only, without authentication\n", os.Geteuid())
		svc.logger.Warn("no token is configured: listening on loopback only, for this user's processes only, without authentication", "addr", ln.Addr().String(), "uid", os.Geteuid())
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mcpSrv := svc.mcpServer()
	// The REST server's checks of Host and Origin stand in front of /mcp.
	mcpSrv.HostChecked = true
	// No one token takes every MCP session while the others get none.
	principals := map[string]bool{}
	for _, t := range tokens {
		principals[t.Principal.Name] = true
	}
	mcpSrv.MaxHTTPSessionsPerPrincipal = session.DefaultShare(mcp.DefaultMaxHTTPSessions, len(principals))
	if err := mcpSrv.RegisterMetrics(reg); err != nil {
		fmt.Fprintf(m.Stderr, "codecell serve: %v\n", err)
		return exitInternal
	}
	rest := &server.Server{
		Engine: svc.eng, Sessions: svc.store, MCP: mcpSrv.HTTPHandler(ctx), Tokens: tokens,
		MaxRunning: cfg.Server.MaxRunning, MaxLimits: cfg.Server.MaxLimits.Codecell(),
		SessionTTL: time.Duration(cfg.Server.SessionTTL), MaxSessionTTL: time.Duration(cfg.Server.MaxSessionTTL),
		Tiers: cfg.Server.Tiers, Registry: reg, Logger: svc.logger, Version: version,
		AllowedOrigins: cfg.Server.AllowedOrigins, AllowedHosts: cfg.Server.AllowedHosts,
	}
	if *maxRunning > 0 {
		rest.MaxRunning = *maxRunning
	}
	// Programs run over /mcp take the REST API's execution slots: one
	// count of what runs, the server's and each principal's.
	mcpSrv.Admit = rest.Admit
	// Requests' contexts end when this one does: on shutdown, executions
	// still running after a grace period are ended, not abandoned.
	base, cancelRequests := context.WithCancelCause(context.Background())
	defer cancelRequests(server.ErrStopping)
	// No ReadTimeout or WriteTimeout: they bound a whole request and a whole
	// answer, and an execution answers when its program ends (up to the
	// longest timeout a client may ask for), an upload or a download may be
	// gigabytes. The server package gives each body and each answer idle
	// deadlines instead, renewed as bytes move. Headers must come at once,
	// small; a connection with nothing to do is closed; and the number of
	// connections open at once is bounded, so that no client runs the
	// process out of file descriptors.
	limited := server.LimitListener(ln, maxConnections)
	ln = limited
	hs := &http.Server{Handler: rest.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		MaxHeaderBytes: 64 << 10, ConnState: limited.ConnState,
		BaseContext: func(net.Listener) context.Context { return base }}
	url := "http://" + ln.Addr().String()
	svc.logger.Info("codecell serve", "addr", ln.Addr().String(), "rest", url+"/v1", "mcp", url+"/mcp")
	fmt.Fprintf(m.Stderr, "codecell: serving the REST API at %s/v1\n", url)
	fmt.Fprintf(m.Stderr, "codecell: serving MCP at %s/mcp\n", url)
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	select {
	case err := <-done:
		if !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(m.Stderr, "codecell serve: %v\n", err)
			return exitInternal
		}
	case <-ctx.Done():
		shut, cancel := context.WithTimeout(context.Background(), *grace)
		defer cancel()
		if err := hs.Shutdown(shut); err != nil {
			// The grace period is over: end what still runs, and wait
			// for its cleanup.
			cancelRequests(server.ErrStopping)
			shut, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = hs.Shutdown(shut)
		}
	}
	return 0
}

// serveTokens are the tokens codecell serve accepts: the configuration's,
// then CODECELL_TOKENS's (named env-1, env-2, …), checked together.
func serveTokens(cfg *config.Config) ([]server.Token, error) {
	all := append(append([]config.Token{}, cfg.Auth.Tokens...), config.EnvTokens(os.Getenv("CODECELL_TOKENS"))...)
	if err := config.CheckTokens(all); err != nil {
		return nil, fmt.Errorf("the tokens of auth.tokens and CODECELL_TOKENS: %w", err)
	}
	out := make([]server.Token, len(all))
	for i, t := range all {
		out[i] = server.Token{Token: t.Token, Principal: session.Principal{
			Name: t.Name, Admin: t.Admin(), MaxSessions: t.MaxSessions, MaxRunning: t.MaxRunning}}
	}
	return out, nil
}

// maxConnections bounds the connections codecell serve holds open at once;
// past it, new ones wait in the kernel's backlog until one closes, or one
// kept alive between requests is closed to make room (server.Listener).
const maxConnections = 4096

func isLoopback(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}
