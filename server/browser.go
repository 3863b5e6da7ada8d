package server

import (
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/codecell-dev/codecell"
)

// A web page the user opens can send requests to a server on the user's own
// machine: a cross-site form or fetch with a "simple" content type
// (text/plain) is sent without asking first, and a page whose name the
// attacker points at 127.0.0.1 (DNS rebinding) is, to the browser, the same
// origin as the server and may read what it answers. A token the page does
// not have stops both; codecell serve without a token, on loopback, relies on
// the checks here instead, and they hold with tokens too:
//
//   - On a loopback listener, the Host must be a loopback name or address
//     (or one configured): a rebinding page's requests carry its own name.
//   - A request that carries an Origin must come from the server's own
//     origin or one configured; one without an Origin that a browser marks
//     as cross-site (Sec-Fetch-Site) may only read.
//   - JSON bodies must say application/json, which no page can send to
//     another origin without a CORS preflight, which only configured origins
//     pass.

// Error codes of the browser checks.
const (
	CodeHostNotAllowed   = "HOST_NOT_ALLOWED"
	CodeOriginNotAllowed = "ORIGIN_NOT_ALLOWED"
	CodeMediaType        = "UNSUPPORTED_MEDIA_TYPE"
)

// corsHeaders are the request headers a configured origin's page may send,
// and corsExposed the response headers it may read.
const (
	corsMethods = "GET, POST, PUT, DELETE"
	corsHeaders = "Authorization, Content-Type, Accept, Last-Event-ID, X-Request-Id, Mcp-Session-Id, Mcp-Protocol-Version"
	corsExposed = "Location, Retry-After, X-Request-Id, WWW-Authenticate, Mcp-Session-Id"
)

// browserChecks applies the checks above to every request, before anything
// else reads it.
func (s *Server) browserChecks(next http.Handler) http.Handler {
	allowed := map[string]bool{}
	for _, o := range s.AllowedOrigins {
		allowed[normalOrigin(o)] = true
	}
	hosts := map[string]bool{}
	for _, h := range s.AllowedHosts {
		hosts[strings.ToLower(h)] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if onLoopback(r) && !loopbackHost(r.Host, hosts) {
			writeError(w, codecell.Errorf(codecell.KindValidation, CodeHostNotAllowed,
				"this server listens on loopback and does not answer to the host %q", r.Host).WithHints(
				"connect to it as localhost or 127.0.0.1",
				"behind a reverse proxy that keeps the Host header, list the name in server.allowed_hosts"))
			return
		}
		origin := r.Header.Get("Origin")
		listed := origin != "" && allowed[normalOrigin(origin)]
		if origin != "" && !listed && !sameOrigin(origin, r.Host) {
			writeError(w, codecell.Errorf(codecell.KindValidation, CodeOriginNotAllowed,
				"requests from web pages of %q are not accepted", origin).WithHints(
				"to let a web application of your own call this server, list its origin in server.allowed_origins"))
			return
		}
		if origin == "" && !safeMethod(r.Method) {
			// A browser that sends no Origin still says where the request
			// comes from; other clients send neither.
			switch r.Header.Get("Sec-Fetch-Site") {
			case "", "same-origin", "none":
			default:
				writeError(w, codecell.Errorf(codecell.KindValidation, CodeOriginNotAllowed,
					"cross-site requests that change something are not accepted").WithHints(
					"send the request from a program, or from a page of an origin listed in server.allowed_origins"))
				return
			}
		}
		if listed {
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Add("Vary", "Origin")
			if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
				h.Set("Access-Control-Allow-Methods", corsMethods)
				h.Set("Access-Control-Allow-Headers", corsHeaders)
				h.Set("Access-Control-Max-Age", "600")
				w.WriteHeader(http.StatusNoContent)
				return
			}
			h.Set("Access-Control-Expose-Headers", corsExposed)
		}
		next.ServeHTTP(w, r)
	})
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// onLoopback reports whether the request came in on a loopback address.
func onLoopback(r *http.Request) bool {
	addr, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return false
	}
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// loopbackHost reports whether a Host header names this machine's loopback:
// localhost, a name under .localhost, a loopback address, or a name
// configured.
func loopbackHost(hostport string, configured map[string]bool) bool {
	if hostport == "" {
		return true // HTTP/1.0 without a Host: not a browser's request
	}
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if host == "localhost" || strings.HasSuffix(host, ".localhost") || configured[host] || configured[strings.ToLower(hostport)] {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// sameOrigin reports whether an Origin is the server's own: an http or
// https origin whose host and port are the request's Host.
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return false
	}
	return strings.EqualFold(u.Host, host)
}

// normalOrigin writes an origin as browsers send it: lower case, no
// trailing slash.
func normalOrigin(o string) string { return strings.ToLower(strings.TrimSuffix(o, "/")) }

// requireJSON refuses a request body that does not say it is JSON.
func requireJSON(r *http.Request) *codecell.Envelope {
	if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json")) {
		return nil
	}
	return codecell.Errorf(codecell.KindValidation, CodeMediaType,
		"the request body's Content-Type is %q; this route takes JSON", r.Header.Get("Content-Type")).WithHints(
		"send the header Content-Type: application/json")
}
