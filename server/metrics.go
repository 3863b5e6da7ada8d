package server

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/codecell-dev/codecell"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the service's Prometheus series, all named codecell_*.
type metrics struct {
	gatherer prometheus.Gatherer
	logger   *slog.Logger

	requests        *prometheus.CounterVec   // by route and status code
	requestSeconds  *prometheus.HistogramVec // by route
	executions      *prometheus.CounterVec   // by status and tier
	execSeconds     *prometheus.HistogramVec // by status
	toolCalls       prometheus.Counter
	running         prometheus.Gauge
	rejected        prometheus.Counter
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
			Name: "requests_total", Help: "HTTP requests by route and status code."}, []string{"route", "code"}),
		requestSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "codecell", Subsystem: "http",
			Name: "request_duration_seconds", Help: "Time to answer an HTTP request, by route.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}, []string{"route"}),
		executions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "codecell",
			Name: "executions_total", Help: "Executions that produced a Result, by status and tier."}, []string{"status", "tier"}),
		execSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "codecell",
			Name: "execution_duration_seconds", Help: "Wall-clock time of executions, by status.",
			Buckets: prometheus.ExponentialBuckets(0.005, 3, 10)}, []string{"status"}),
		toolCalls: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "codecell",
			Name: "tool_calls_total", Help: "Tool calls made by programs run over REST."}),
		running: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "codecell",
			Name: "executions_running", Help: "Executions running now."}),
		rejected: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "codecell",
			Name: "executions_rejected_total", Help: "Executions refused with 429 because the server ran its maximum."}),
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
	reg.MustRegister(m.requests, m.requestSeconds, m.executions, m.execSeconds, m.toolCalls, m.running, m.rejected,
		m.abandoned, m.sessionsCreated, m.sessionsEnded, m.uploaded, m.downloaded,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "codecell", Name: "sessions",
			Help: "Sessions that exist now."}, func() float64 {
			if s.Sessions == nil {
				return 0
			}
			return float64(s.Sessions.Len())
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "codecell", Name: "executions_max_running",
			Help: "Executions the server runs at once before it answers 429."}, func() float64 { return float64(cap(s.slots)) }),
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
		// The client's request id, or one of ours: in the answer's
		// headers and in the log line, to tie the two together.
		reqID := r.Header.Get("X-Request-Id")
		if !validRequestID.MatchString(reqID) {
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
		m.requests.WithLabelValues(route, strconv.Itoa(sw.status)).Inc()
		m.requestSeconds.WithLabelValues(route).Observe(d.Seconds())
		attrs := []any{"method", r.Method, "route", route, "status", sw.status, "duration_ms", d.Milliseconds(),
			"remote", r.RemoteAddr, "request_id", reqID}
		if id := r.PathValue("id"); id != "" {
			attrs = append(attrs, "session_id", id)
		}
		m.logger.Log(r.Context(), level, "http", attrs...)
	})
}

func (m *metrics) observe(res *codecell.Result, d time.Duration) {
	m.executions.WithLabelValues(string(res.Status), res.Tier).Inc()
	m.execSeconds.WithLabelValues(string(res.Status)).Observe(d.Seconds())
	m.toolCalls.Add(float64(len(res.ToolCalls)))
}

var validRequestID = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

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
