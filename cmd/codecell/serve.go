package main

import (
	"context"
	"crypto/subtle"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/config"
	"github.com/codecell-dev/codecell/mcp"
	"github.com/codecell-dev/codecell/session"
	"github.com/codecell-dev/codecell/tier/native"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// serverFlags are the flags codecell mcp and codecell serve share.
type serverFlags struct {
	config, log string
}

func (f *serverFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.config, "config", "", "the configuration `FILE`: limits, tier, tool policy, upstream MCP servers, tokens")
	fs.StringVar(&f.log, "log", "", "write logs (JSON lines) to `FILE` instead of stderr")
}

// mcpServer builds the MCP server both commands serve, and what ends it.
func (m *Main) mcpServer(f serverFlags) (*mcp.Server, *config.Config, func(), int) {
	eng, mounts, closeFn, code := m.engine(f.config)
	if code != 0 {
		return nil, nil, nil, code
	}
	cfg := &config.Config{}
	if f.config != "" {
		cfg, _ = config.Load(f.config) // already loaded and checked by engine
	}
	logOut := m.Stderr
	if f.log != "" {
		file, err := os.OpenFile(f.log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			fmt.Fprintf(m.Stderr, "codecell: %v\n", err)
			closeFn()
			return nil, nil, nil, exitUsage
		}
		logOut = file
	}
	eng.Logger = slog.New(slog.NewJSONHandler(logOut, nil))
	// A long-running service: sandboxes are built ahead of need.
	eng.Tiers = append([]codecell.Tier{&native.Tier{ExtraMounts: mounts}}, eng.Tiers...)
	dir, err := os.MkdirTemp("", "codecell-sessions-")
	if err != nil {
		fmt.Fprintf(m.Stderr, "codecell: %v\n", err)
		closeFn()
		return nil, nil, nil, exitInternal
	}
	store, err := session.NewStore(dir, 30*time.Minute, 100)
	if err != nil {
		fmt.Fprintf(m.Stderr, "codecell: %v\n", err)
		closeFn()
		return nil, nil, nil, exitInternal
	}
	srv := &mcp.Server{Engine: eng, Sessions: store, Version: version, Logger: eng.Logger}
	return srv, cfg, func() {
		store.Close()
		os.RemoveAll(dir)
		closeFn()
	}, 0
}

// mcpCommand serves MCP over stdin and stdout: what Claude Desktop, Claude
// Code and Cursor start.
func (m *Main) mcpCommand(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("codecell mcp", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	var f serverFlags
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	srv, _, closeFn, code := m.mcpServer(f)
	if code != 0 {
		return code
	}
	defer closeFn()
	if err := srv.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(m.Stderr, "codecell mcp: %v\n", err)
		return exitInternal
	}
	return 0
}

// serve is the HTTP service: MCP over streamable HTTP at /mcp, and its
// counters for Prometheus at /metrics.
func (m *Main) serve(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("codecell serve", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	var f serverFlags
	f.register(fs)
	addr := fs.String("addr", "127.0.0.1:8080", "the address to listen on")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	srv, cfg, closeFn, code := m.mcpServer(f)
	if code != 0 {
		return code
	}
	defer closeFn()
	tokens := append([]string{}, cfg.Auth.Tokens...)
	for _, t := range strings.Split(os.Getenv("CODECELL_TOKENS"), ",") {
		if t = strings.TrimSpace(t); t != "" {
			tokens = append(tokens, t)
		}
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
		srv.Logger.Warn("no token is configured: listening on loopback only, without authentication", "addr", ln.Addr().String())
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", withAuth(tokens, srv.HTTPHandler(ctx)))
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := srv.RegisterMetrics(reg); err != nil {
		fmt.Fprintf(m.Stderr, "codecell serve: %v\n", err)
		return exitInternal
	}
	mux.Handle("/metrics", withAuth(tokens, promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintln(w, "ok")
	})
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	srv.Logger.Info("codecell serve", "addr", ln.Addr().String(), "mcp", "http://"+ln.Addr().String()+"/mcp")
	fmt.Fprintf(m.Stderr, "codecell: serving MCP at http://%s/mcp\n", ln.Addr())
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	select {
	case err := <-done:
		if !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(m.Stderr, "codecell serve: %v\n", err)
			return exitInternal
		}
	case <-ctx.Done():
		shut, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = hs.Shutdown(shut)
	}
	return 0
}

func isLoopback(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// withAuth accepts "Authorization: Bearer TOKEN" for any of tokens; with no
// tokens it lets everything through (the server then listens on loopback
// only).
func withAuth(tokens []string, next http.Handler) http.Handler {
	if len(tokens) == 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if ok {
			for _, t := range tokens {
				if subtle.ConstantTimeCompare([]byte(got), []byte(t)) == 1 {
					next.ServeHTTP(w, r)
					return
				}
			}
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="codecell"`)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		env := codecell.Errorf(codecell.KindValidation, "UNAUTHORIZED", "a bearer token is required").WithHints(
			"send the header Authorization: Bearer <token>, with a token from codecell's configuration")
		fmt.Fprintln(w, env.JSON())
	})
}
