package egress

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/codecell-dev/codecell/internal/lazyre"
)

// A secret is a value the program never holds: its sandbox is given a
// placeholder ("codecell-secret:NAME:RANDOM"), and the proxy puts the value
// in the place of the placeholder, or in a header of its own, in the
// requests to the secret's hosts only. A placeholder sent anywhere else is
// refused.

// PlaceholderPrefix starts every placeholder.
const PlaceholderPrefix = "codecell-secret:"

// SecretSpec is a secret as the configuration declares it.
type SecretSpec struct {
	Name string
	// Env or File (one of them) is where the host holds the value.
	Env, File string
	// Hosts are the names the value may be sent to, written as a network
	// policy's entries (names, names with a port, wildcards).
	Hosts []string
	// Header, when set, is a header the proxy sets on every request to the
	// hosts, "Name: text {value} text".
	Header string
	// SandboxEnv, when set, is a variable of the program's environment
	// that holds the placeholder besides CODECELL_SECRET_<NAME>.
	SandboxEnv string
}

var (
	secretName = lazyre.New(`^[A-Za-z][A-Za-z0-9_]{0,62}$`)
	envName    = lazyre.New(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
)

// EnvVar is the program's environment variable that holds a secret's
// placeholder.
func EnvVar(name string) string { return "CODECELL_SECRET_" + strings.ToUpper(name) }

// maxSecrets bounds a configuration's secrets.
const maxSecrets = 100

// Check says what is wrong with a secret's declaration, without reading
// its value.
func (s SecretSpec) Check() error {
	if !secretName().MatchString(s.Name) {
		return fmt.Errorf("secret %q: a name is a letter, then letters, digits or '_' (up to 63): it names the variable %s", s.Name, "CODECELL_SECRET_<NAME>")
	}
	switch {
	case s.Env == "" && s.File == "":
		return fmt.Errorf("secret %s: say where its value is: \"env\" (a variable of codecell's environment) or \"file\" (a file of the host)", s.Name)
	case s.Env != "" && s.File != "":
		return fmt.Errorf("secret %s: give \"env\" or \"file\", not both", s.Name)
	case s.Env != "" && !envName().MatchString(s.Env):
		return fmt.Errorf("secret %s: %q is not an environment variable's name", s.Name, s.Env)
	case s.File != "" && !strings.HasPrefix(s.File, "/"):
		return fmt.Errorf("secret %s: the file %q is not an absolute path", s.Name, s.File)
	}
	if len(s.Hosts) == 0 {
		return fmt.Errorf("secret %s: list the hosts its value may be sent to (\"hosts\": [\"api.example.com\"])", s.Name)
	}
	for _, h := range s.Hosts {
		r, err := ParseRule(h)
		if err != nil {
			return fmt.Errorf("secret %s: hosts: %v", s.Name, err)
		}
		if r.Host == "" {
			return fmt.Errorf("secret %s: hosts: %q is an address range; a secret goes to names only", s.Name, h)
		}
	}
	if s.Header != "" {
		if _, _, err := parseHeaderTemplate(s.Header); err != nil {
			return fmt.Errorf("secret %s: header: %v", s.Name, err)
		}
	}
	if s.SandboxEnv != "" {
		if !envName().MatchString(s.SandboxEnv) {
			return fmt.Errorf("secret %s: sandbox_env %q is not an environment variable's name", s.Name, s.SandboxEnv)
		}
		if strings.HasPrefix(strings.ToUpper(s.SandboxEnv), "CODECELL_") || reservedEnv[s.SandboxEnv] {
			return fmt.Errorf("secret %s: sandbox_env %q is a variable codecell sets itself; choose another name", s.Name, s.SandboxEnv)
		}
	}
	return nil
}

// reservedEnv are variables a sandbox with secrets gets from codecell.
var reservedEnv = map[string]bool{"PATH": true, "HOME": true, "SSL_CERT_FILE": true, "REQUESTS_CA_BUNDLE": true,
	"CURL_CA_BUNDLE": true, "NODE_EXTRA_CA_CERTS": true, "PIP_CERT": true, "GIT_SSL_CAINFO": true}

// CheckSecrets checks a list of secrets: each, and that no two share a
// name or a sandbox variable.
func CheckSecrets(specs []SecretSpec) error {
	if len(specs) > maxSecrets {
		return fmt.Errorf("%d secrets; at most %d", len(specs), maxSecrets)
	}
	seen := map[string]bool{}
	for _, s := range specs {
		if err := s.Check(); err != nil {
			return err
		}
		for _, v := range []string{EnvVar(s.Name), s.SandboxEnv} {
			if v != "" && seen[v] {
				return fmt.Errorf("secret %s: another secret already sets %s in the sandbox", s.Name, v)
			}
			seen[v] = true
		}
	}
	return nil
}

// parseHeaderTemplate reads "Name: text {value} text".
func parseHeaderTemplate(h string) (name, template string, err error) {
	name, template, ok := strings.Cut(h, ":")
	if !ok {
		return "", "", fmt.Errorf("%q: write it as \"Name: text {value}\", such as \"Authorization: Bearer {value}\"", h)
	}
	name, template = strings.TrimSpace(name), strings.TrimSpace(template)
	if !validHeaderName(name) {
		return "", "", fmt.Errorf("%q is not a header's name", name)
	}
	if !strings.Contains(template, "{value}") {
		return "", "", fmt.Errorf("%q holds no {value}: write where the value goes, as in \"Bearer {value}\"", h)
	}
	if !validHeaderValue(template) {
		return "", "", fmt.Errorf("%q holds a character a header's value cannot", h)
	}
	switch http.CanonicalHeaderKey(name) {
	case "Host", "Content-Length", "Transfer-Encoding", "Connection", "Upgrade", "Te", "Trailer":
		return "", "", fmt.Errorf("%s is a header the request's delivery depends on; a secret goes in another one", name)
	}
	return http.CanonicalHeaderKey(name), template, nil
}

// Secret is a secret as one run's proxy holds it: its value and the
// run's placeholder for it.
type Secret struct {
	Name        string
	Hosts       []Rule
	Header      string // canonical header name, or ""
	Template    string // the header's value, with {value}
	Placeholder string
	value       string
	// tlsOnly, in a copy inTheClear made, are the host entries it left
	// out: those the secret goes to over TLS alone.
	tlsOnly []Rule
}

// inTheClear is secrets as they go over plain HTTP: only to the host
// entries that name a port other than 443. An entry without a port (80
// and 443) sends a secret over TLS alone, whose server the proxy verifies:
// in the clear, a program's request on port 80 (or plain HTTP on 443)
// would hand the value to whoever answers for the name, or watches the
// way there.
func inTheClear(secrets []*Secret) []*Secret {
	out := make([]*Secret, len(secrets))
	for i, s := range secrets {
		c := *s
		c.Hosts, c.tlsOnly = nil, nil
		for _, r := range s.Hosts {
			if r.Port != 0 && r.Port != 443 {
				c.Hosts = append(c.Hosts, r)
			} else {
				c.tlsOnly = append(c.tlsOnly, r)
			}
		}
		out[i] = &c
	}
	return out
}

// LoadSecret reads a secret's value (lookupEnv and readFile: nil for the
// host's) and makes a new placeholder for it.
func LoadSecret(s SecretSpec, lookupEnv func(string) (string, bool), readFile func(string) ([]byte, error)) (*Secret, error) {
	if err := s.Check(); err != nil {
		return nil, err
	}
	v, err := s.Value(lookupEnv, readFile)
	if err != nil {
		return nil, err
	}
	out := &Secret{Name: s.Name, value: v}
	for _, h := range s.Hosts {
		r, _ := ParseRule(h)
		out.Hosts = append(out.Hosts, r)
	}
	if s.Header != "" {
		out.Header, out.Template, _ = parseHeaderTemplate(s.Header)
	}
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	out.Placeholder = PlaceholderPrefix + strings.ToLower(s.Name) + ":" + hex.EncodeToString(b[:])
	return out, nil
}

// maxSecretValue bounds a value: it goes in a header.
const maxSecretValue = 16 << 10

// Value reads the secret's value from where the host holds it: one final
// line break of a file is dropped.
func (s SecretSpec) Value(lookupEnv func(string) (string, bool), readFile func(string) ([]byte, error)) (string, error) {
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	if readFile == nil {
		readFile = os.ReadFile
	}
	var v string
	if s.Env != "" {
		got, ok := lookupEnv(s.Env)
		if !ok || got == "" {
			return "", fmt.Errorf("secret %s: the environment variable %s is not set; set it in codecell's environment, or read the value from a file (\"file\")", s.Name, s.Env)
		}
		v = got
	} else {
		b, err := readFile(s.File)
		if err != nil {
			return "", fmt.Errorf("secret %s: %v", s.Name, err)
		}
		v = strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
		if v == "" {
			return "", fmt.Errorf("secret %s: the file %s is empty", s.Name, s.File)
		}
	}
	if len(v) > maxSecretValue {
		return "", fmt.Errorf("secret %s: the value has %d bytes; at most %d", s.Name, len(v), maxSecretValue)
	}
	if !validHeaderValue(v) || strings.TrimSpace(v) != v {
		return "", fmt.Errorf("secret %s: the value holds a line break, a control character or spaces around it, which a header cannot carry", s.Name)
	}
	return v, nil
}

// For says whether the secret may be sent to host:port.
func (s *Secret) For(host string, port int) bool {
	for _, r := range s.Hosts {
		if r.matchesName(host, port) {
			return true
		}
	}
	return false
}

// headerValue is the value of the secret's header.
func (s *Secret) headerValue() string { return strings.ReplaceAll(s.Template, "{value}", s.value) }

// errStray is a placeholder sent where its secret may not go.
type errStray struct {
	secret, host string
	port         int
	where        string
	clear        bool // the secret goes to host:port over TLS only
}

func (e *errStray) Error() string {
	if e.clear {
		return fmt.Sprintf("the placeholder of secret %s was sent to %s:%d (in %s) over plain HTTP, and the secret goes there over HTTPS only; use https://, or name the port in the secret's hosts to send it in the clear", e.secret, e.host, e.port, e.where)
	}
	return fmt.Sprintf("the placeholder of secret %s was sent to %s:%d (in %s), where the secret does not go", e.secret, e.host, e.port, e.where)
}

// stray returns the first secret whose placeholder b holds that may not
// go to host:port.
func stray(secrets []*Secret, b []byte, host string, port int, where string) error {
	if !bytes.Contains(b, []byte(PlaceholderPrefix)) {
		return nil
	}
	for _, s := range secrets {
		if bytes.Contains(b, []byte(s.Placeholder)) && !s.For(host, port) {
			clear := false
			for _, r := range s.tlsOnly {
				clear = clear || r.matchesName(host, port)
			}
			return &errStray{secret: s.Name, host: host, port: port, where: where, clear: clear}
		}
	}
	return nil
}

// errHostChanged is a request on a connection for one name that names
// another.
var errHostChanged = errors.New("a request's Host is not the name the connection was opened for")

// rewrite checks one request the program sends to host:port and puts the
// secrets that go there in it: in place of their placeholders in the
// header values, and in their own headers. A placeholder of a secret that
// does not go there, in the request line or a header, refuses the request.
// The names of the secrets it puts in are set in added, when not nil.
func rewrite(req *http.Request, secrets []*Secret, host string, port int, added map[string]bool) error {
	h := req.Host
	if hh, _, err := splitHostPort(h); err == nil {
		h = hh
	}
	if strings.TrimSuffix(strings.ToLower(h), ".") != host {
		return fmt.Errorf("%w: the connection was opened for %s, and a request on it names %q", errHostChanged, host, req.Host)
	}
	if err := stray(secrets, []byte(req.RequestURI), host, port, "the request line"); err != nil {
		return err
	}
	for name, values := range req.Header {
		for i, v := range values {
			if err := stray(secrets, []byte(name+": "+v), host, port, "the header "+name); err != nil {
				return err
			}
			if !strings.Contains(v, PlaceholderPrefix) {
				continue
			}
			for _, s := range secrets {
				if s.For(host, port) && strings.Contains(v, s.Placeholder) {
					v = strings.ReplaceAll(v, s.Placeholder, s.value)
					mark(added, s.Name)
				}
			}
			values[i] = v
		}
	}
	for _, s := range secrets {
		if s.Header != "" && s.For(host, port) {
			req.Header[s.Header] = []string{s.headerValue()}
			mark(added, s.Name)
		}
	}
	return nil
}

func mark(set map[string]bool, name string) {
	if set != nil {
		set[name] = true
	}
}

// splitHostPort splits "host:port", and tells a bare host by an error.
func splitHostPort(hp string) (string, string, error) {
	i := strings.LastIndexByte(hp, ':')
	if i < 0 || strings.Contains(hp[i:], "]") {
		return "", "", errors.New("no port")
	}
	return strings.TrimSuffix(strings.TrimPrefix(hp[:i], "["), "]"), hp[i+1:], nil
}

// validHeaderName: a token (RFC 9110, 5.1).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// validHeaderValue: no control character but a tab.
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// Reaches reports whether the policy lets a program reach some name a
// secret's host entry covers: the name itself on one of its ports, or,
// for a wildcard, a name under it that the narrowest layer lists (or the
// wildcard's own names, when every layer allows them).
func (p *Policy) Reaches(r Rule) bool {
	if p == nil || len(p.Layers) == 0 || r.Host == "" {
		return false
	}
	ports := []int{r.Port}
	if r.Port == 0 {
		ports = DefaultPorts
	}
	var names []string
	if sub, ok := strings.CutPrefix(r.Host, "*."); ok {
		names = append(names, "codecell-probe."+sub)
		for _, a := range p.Layers[len(p.Layers)-1].Allow {
			if h := strings.TrimPrefix(a.Host, "*."); a.Host != "" && strings.HasSuffix(h, "."+sub) {
				names = append(names, strings.ReplaceAll(a.Host, "*", "codecell-probe"))
			}
		}
	} else {
		names = append(names, r.Host)
	}
	for _, n := range names {
		for _, port := range ports {
			if p.Allows(n, port).Allowed {
				return true
			}
		}
	}
	return false
}
