package server

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/codecell-dev/codecell/internal/lazyre"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/session"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// metrics are the service's Prometheus series, all named codecell_*. The
// principal label is a principal's name, never its token; its values are
// as many as the configured tokens.
type metrics struct {
	gatherer prometheus.Gatherer
	logger   *slog.Logger

	requests        *prometheus.CounterVec   // by route, status code and principal
	requestSeconds  *prometheus.HistogramVec // by route
	executions      *prometheus.CounterVec   // by status, tier and principal
	execSeconds     *prometheus.HistogramVec // by status
	toolCalls       prometheus.Counter
	connections     *prometheus.CounterVec
	running         prometheus.Gauge
	rejected        prometheus.Counter
	principalRun    *prometheus.GaugeVec   // executions running, by principal
	principalRefuse *prometheus.CounterVec // by principal and limit
	abandoned       prometheus.Counter
	sessionsCreated prometheus.Counter
	sessionsEnded   *prometheus.CounterVec // by reason
	uploaded        prometheus.Counter
	downloaded      prometheus.Counter
}

func newMetrics(reg *prometheus.Registry, s *Server) *metrics {
	m := &metrics{
		gatherer: reg,
		logger:   s.Logger,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "codecell", Subsystem: "http",
			Name: "requests_total", Help: "HTTP requests by route, status code and principal."}, []string{"route", "code", "principal"}),
		requestSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "codecell", Subsystem: "http",
			Name: "request_duration_seconds", Help: "Time to answer an HTTP request, by route.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}, []string{"route"}),
		executions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "codecell",
			Name: "executions_total", Help: "Executions that produced a Result, by status, tier and principal."}, []string{"status", "tier", "principal"}),
		execSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "codecell",
			Name: "execution_duration_seconds", Help: "Wall-clock time of executions, by status.",
			Buckets: prometheus.ExponentialBuckets(0.005, 3, 10)}, []string{"status"}),
		connections: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "codecell",
			Name: "network_connections_total", Help: "Connections programs opened under a network policy, by whether the policy allowed them."}, []string{"allowed"}),
		toolCalls: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "codecell",
			Name: "tool_calls_total", Help: "Tool calls made by programs run over REST."}),
		running: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "codecell",
			Name: "executions_running", Help: "Executions running now."}),
		rejected: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "codecell",
			Name: "executions_rejected_total", Help: "Executions refused with 429 because the server, or their principal, ran its maximum."}),
		principalRun: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "codecell", Subsystem: "principal",
			Name: "executions_running", Help: "Executions running now, REST and MCP, by principal."}, []string{"principal"}),
		principalRefuse: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "codecell", Subsystem: "principal",
			Name: "limit_refusals_total", Help: "Requests refused with 429 because their principal held its maximum of executions or of sessions, by principal and limit."},
			[]string{"principal", "limit"}),
		abandoned: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "codecell",
			Name: "executions_abandoned_total", Help: "Executions ended because their client went away."}),
		sessionsCreated: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "codecell",
			Name: "sessions_created_total", Help: "Sessions created over REST."}),
		sessionsEnded: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "codecell",
			Name: "sessions_ended_total", Help: "Sessions ended, by reason: deleted, expired or closed."}, []string{"reason"}),
		uploaded: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "codecell",
			Name: "upload_bytes_total", Help: "Bytes written into workspaces by uploads."}),
		downloaded: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "codecell",
			Name: "download_bytes_total", Help: "Bytes of files downloaded from workspaces."}),
	}
	reg.MustRegister(m.requests, m.requestSeconds, m.executions, m.execSeconds, m.toolCalls, m.connections, m.running, m.rejected,
		m.principalRun, m.principalRefuse, m.abandoned, m.sessionsCreated, m.sessionsEnded, m.uploaded, m.downloaded,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "codecell", Name: "sessions",
			Help: "Sessions that exist now."}, func() float64 {
			if s.Sessions == nil {
				return 0
			}
			return float64(s.Sessions.Len())
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "codecell", Name: "live_sessions",
			Help: "Live sessions that exist now (sessions that keep interpreters)."}, func() float64 {
			if s.Sessions == nil {
				return 0
			}
			n, _ := s.Sessions.LiveStats()
			return float64(n)
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "codecell", Name: "live_session_memory_bytes",
			Help: "Memory the live sessions' interpreters hold, with their sandboxes, as their cgroups count it."}, func() float64 {
			if s.Sessions == nil {
				return 0
			}
			_, m := s.Sessions.LiveStats()
			return float64(m)
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "codecell", Name: "executions_max_running",
			Help: "Executions the server runs at once before it answers 429."}, func() float64 { return float64(s.runs.Max()) }),
	)
	return m
}

// instrument counts a route's requests, times them and logs one line for
// each (probes of /healthz and /metrics at debug level). The route label is
// the pattern, never the path, so that ids do not make new series.
func (m *metrics) instrument(route string, next http.Handler) http.Handler {
	level := slog.LevelInfo
	if route == "GET /healthz" || route == "GET /metrics" {
		level = slog.LevelDebug
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ctx, info := withRequestInfo(r.Context())
		r = r.WithContext(ctx)
		// The client's request id, or one of ours: in the answer's
		// headers and in the log line, to tie the two together.
		reqID := r.Header.Get("X-Request-Id")
		if !validRequestID().MatchString(reqID) {
			var b [8]byte
			_, _ = rand.Read(b[:])
			reqID = hex.EncodeToString(b[:])
		}
		w.Header().Set("X-Request-Id", reqID)
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		if sw.status == 0 {
			sw.status = http.StatusOK
		}
		d := time.Since(start)
		m.requests.WithLabelValues(route, strconv.Itoa(sw.status), info.principal).Inc()
		m.requestSeconds.WithLabelValues(route).Observe(d.Seconds())
		attrs := []any{"method", r.Method, "route", route, "status", sw.status, "duration_ms", d.Milliseconds(),
			"remote", r.RemoteAddr, "request_id", reqID}
		if info.principal != "" {
			attrs = append(attrs, "principal", info.principal)
		}
		if id := r.PathValue("id"); id != "" {
			attrs = append(attrs, "session_id", id)
		}
		m.logger.Log(r.Context(), level, "http", attrs...)
	})
}

func (m *metrics) observe(res *codecell.Result, d time.Duration, p *session.Principal) {
	name := ""
	if p != nil {
		name = p.Name
	}
	m.executions.WithLabelValues(string(res.Status), res.Tier, name).Inc()
	m.execSeconds.WithLabelValues(string(res.Status)).Observe(d.Seconds())
	m.toolCalls.Add(float64(len(res.ToolCalls)))
	for _, c := range res.Network {
		m.connections.WithLabelValues(strconv.FormatBool(c.Allowed)).Inc()
	}
}

// started and ended count an execution of a principal's that runs.
func (m *metrics) started(principal string) {
	m.running.Inc()
	m.principalRun.WithLabelValues(principal).Inc()
}

func (m *metrics) ended(principal string) {
	m.running.Dec()
	m.principalRun.WithLabelValues(principal).Dec()
}

// refused counts a request refused with 429 for a limit ("executions" or
// "sessions"): the server's when principal is "", else the principal's.
func (m *metrics) refused(principal, limit string) {
	if limit == "executions" {
		m.rejected.Inc()
	}
	if principal != "" {
		m.principalRefuse.WithLabelValues(principal, limit).Inc()
	}
}

var validRequestID = lazyre.New(`^[A-Za-z0-9._-]{1,64}$`)

// statusWriter remembers the status a handler sent. It passes Flush on
// (through Unwrap), which Server-Sent Events need.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// onlyPrincipal is g without the series of principals other than name:
// a series labelled with a principal is kept only when it is name's.
func onlyPrincipal(g prometheus.Gatherer, name string) prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		families, err := g.Gather()
		for _, f := range families {
			kept := f.Metric[:0]
			for _, m := range f.Metric {
				if principalOf(m) == "" || principalOf(m) == name {
					kept = append(kept, m)
				}
			}
			f.Metric = kept
		}
		return families, err
	})
}

func principalOf(m *dto.Metric) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == "principal" {
			return l.GetValue()
		}
	}
	return ""
}
