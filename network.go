package codecell

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/codecell-dev/codecell/internal/egress"
)

// NetworkPolicy says which hosts a program may reach, by name: every TCP
// connection it opens goes through codecell's proxy on the host, which
// lets through those to a name the policy allows, on a port it allows,
// whose TLS server name or HTTP Host is that name. Each layer (the
// configuration's, the session's, the Exec's) only narrows the ones above.
//
// In JSON it is "none" (no network: the default), an object
// {"allow": [...], "deny": [...]}, or a list, which is the allow list.
// Entries are names ("api.github.com", reached on ports 80 and 443),
// names with a port ("example.com:8443"), wildcards for the names under a
// domain ("*.example.com"), and address ranges ("10.0.0.0/8"): a name that
// resolves to a loopback, private, link-local or reserved address is
// reached only when a range holds it.
//
// Secrets, in the configuration's policy only, are values the program
// never holds: its sandbox gets a placeholder, and codecell's proxy puts
// the value in the requests to the secret's hosts (see Secret).
type NetworkPolicy struct {
	Allow   []string `json:"allow,omitempty"`
	Deny    []string `json:"deny,omitempty"`
	Secrets []Secret `json:"secrets,omitempty"`
}

// Secret is a value, such as an API key, that the proxy adds to a
// program's requests to some hosts, so that the program never holds it.
// The sandbox's environment has CODECELL_SECRET_<NAME> (and SandboxEnv,
// if set) holding a placeholder, "codecell-secret:<name>:<random>", new
// for each run. In the requests to the secret's hosts, the proxy puts the
// value in place of the placeholder wherever it appears in a header, and
// sets Header if there is one; for HTTPS it ends the program's TLS with a
// certificate of its own, which only such a sandbox trusts, and opens its
// own TLS to the server, verifying it. A placeholder sent to any other
// host refuses the connection, and the Result says so.
type Secret struct {
	// Name is a letter, then letters, digits or '_'.
	Name string `json:"name"`
	// Env is the variable of codecell's environment holding the value;
	// File, instead, a file of the host holding it (one final line break
	// dropped).
	Env  string `json:"env,omitempty"`
	File string `json:"file,omitempty"`
	// Hosts are the names the value may go to, written as the policy's
	// entries: "api.github.com" (ports 80 and 443), "example.com:8443",
	// "*.example.com".
	Hosts []string `json:"hosts"`
	// Header, when set, is a header set on every request to the hosts,
	// such as "Authorization: Bearer {value}".
	Header string `json:"header,omitempty"`
	// SandboxEnv, when set, is another variable of the program's
	// environment that holds the placeholder, such as "OPENAI_API_KEY".
	SandboxEnv string `json:"sandbox_env,omitempty"`
}

// UnmarshalJSON reads a secret, refusing a field it does not have.
func (s *Secret) UnmarshalJSON(b []byte) error {
	type plain Secret
	var p plain
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return &secretError{fmt.Errorf(`%v: a secret is {"name", "env" or "file", "hosts", "header", "sandbox_env"}`, err)}
	}
	*s = Secret(p)
	return nil
}

// secretError is a secret that does not decode.
type secretError struct{ err error }

func (e *secretError) Error() string { return e.err.Error() }

// Spec is the secret as the proxy reads it.
func (s Secret) Spec() egress.SecretSpec {
	return egress.SecretSpec{Name: s.Name, Env: s.Env, File: s.File, Hosts: s.Hosts, Header: s.Header, SandboxEnv: s.SandboxEnv}
}

// CheckSecrets checks the secrets' declarations (not their values).
func (n *NetworkPolicy) CheckSecrets() error {
	if n == nil || len(n.Secrets) == 0 {
		return nil
	}
	specs := make([]egress.SecretSpec, len(n.Secrets))
	for i, s := range n.Secrets {
		specs[i] = s.Spec()
	}
	return egress.CheckSecrets(specs)
}

// UnmarshalJSON reads "none", an object or a list.
func (n *NetworkPolicy) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		if s != "none" {
			return fmt.Errorf(`network %q: write "none", or {"allow": [...], "deny": [...]}`, s)
		}
		*n = NetworkPolicy{}
		return nil
	case len(b) > 0 && b[0] == '[':
		var allow []string
		if err := json.Unmarshal(b, &allow); err != nil {
			return err
		}
		*n = NetworkPolicy{Allow: allow}
		return nil
	}
	type plain NetworkPolicy
	var p plain
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		var se *secretError
		if errors.As(err, &se) {
			return fmt.Errorf("network.secrets: %v", se.err)
		}
		return fmt.Errorf(`network: %v (write "none", or {"allow": [...], "deny": [...], "secrets": [...]})`, err)
	}
	*n = NetworkPolicy(p)
	return nil
}

// NetworkLayer is one layer of a run's network policy, as a tier gets it
// (Job.Network), widest first.
type NetworkLayer struct {
	Name  string   `json:"name"`
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
	// Secrets are the configuration layer's secrets (declarations, not
	// values: a tier reads each value on the host as a run starts).
	Secrets []Secret `json:"secrets,omitempty"`
}

// NetworkTier is implemented by tiers that can let a program reach some
// hosts and not others (Job.Network). Other tiers are refused an Exec
// whose policy allows any host.
type NetworkTier interface {
	ReachesHosts() bool
}

// NetworkConnection is one connection a program opened, as the Result
// lists it.
type NetworkConnection struct {
	Host    string `json:"host"`
	Port    int    `json:"port"`
	Allowed bool   `json:"allowed"`
	// Rule is the policy entry that allowed or refused it; Reason, for a
	// refused one, says why.
	Rule     string `json:"rule,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Address  string `json:"address,omitempty"` // the server's address, once connected
	BytesOut int64  `json:"bytes_out"`
	BytesIn  int64  `json:"bytes_in"`
	// Secrets are the network secrets codecell's proxy put in the
	// connection's requests (their names).
	Secrets []string `json:"secrets,omitempty"`
}

// networkLayers checks each layer's network policy and returns the layers
// of those that set one.
func networkLayers(layers []namedPolicy) ([]NetworkLayer, *Envelope) {
	var out []NetworkLayer
	for _, l := range layers {
		if l.p == nil || l.p.Network == nil {
			continue
		}
		n := l.p.Network
		if _, err := egress.ParseLayer(l.name, n.Allow, n.Deny); err != nil {
			return nil, Errorf(KindValidation, CodeInvalidRequest, "%v", err).WithHints(
				`allow names ("api.github.com"), names with a port ("example.com:8443") and address ranges ("10.0.0.0/8")`)
		}
		if len(n.Secrets) > 0 && l.name != "config" {
			// A secret's value is read from the host's environment or
			// files: only who configures codecell may name one.
			return nil, Errorf(KindValidation, CodeInvalidRequest, "the %s network policy declares secrets, which only codecell's configuration may", l.name).WithHints(
				"leave \"secrets\" out of the session's or execution's policy: the configuration's secrets apply to every run whose policy reaches their hosts")
		}
		if err := n.CheckSecrets(); err != nil {
			return nil, Errorf(KindValidation, CodeInvalidRequest, "the %s network policy: %v", l.name, err)
		}
		out = append(out, NetworkLayer{Name: l.name, Allow: n.Allow, Deny: n.Deny, Secrets: n.Secrets})
	}
	return out, nil
}

// allowsHosts reports whether a run's network layers let a program reach
// any host.
func allowsHosts(layers []NetworkLayer) bool {
	if len(layers) == 0 {
		return false
	}
	p := &egress.Policy{}
	for _, l := range layers {
		layer, err := egress.ParseLayer(l.Name, l.Allow, l.Deny)
		if err != nil {
			return false
		}
		p.Layers = append(p.Layers, layer)
	}
	return !p.Empty()
}

// networkRefusal refuses an Exec whose policy lets it reach hosts where
// that cannot be done: on a tier that cannot confine a program to some
// hosts.
func networkRefusal(x *Exec, tier Tier, layers []NetworkLayer) *Envelope {
	if tier == nil || !allowsHosts(layers) {
		return nil
	}
	if nt, ok := tier.(NetworkTier); !ok || !nt.ReachesHosts() {
		return Errorf(KindValidation, CodePolicyUnsupported, "tier %s cannot let a program reach some hosts and not others, which the network policy asks", tier.Name()).WithHints(
			"run on the native tier, which sends every connection through codecell's proxy",
			"or leave the network policy out: programs run with no network")
	}
	return nil
}

// withoutSecretSources is the policy as a Result shows it: a secret's name,
// hosts and header, not where codecell reads its value (a variable of its
// environment, a file of the host), which is the operator's business, not
// the client's. The tier has read the sources already: the copy leaves
// them be.
func (p *AppliedPolicy) withoutSecretSources() *AppliedPolicy {
	if p == nil {
		return nil
	}
	strip := func(in []Secret) []Secret {
		if len(in) == 0 {
			return in
		}
		out := make([]Secret, len(in))
		for i, s := range in {
			s.Env, s.File = "", ""
			out[i] = s
		}
		return out
	}
	q := *p
	if len(p.Network) > 0 {
		q.Network = make([]NetworkLayer, len(p.Network))
		for i, l := range p.Network {
			l.Secrets = strip(l.Secrets)
			q.Network[i] = l
		}
	}
	q.Layers = make([]PolicyLayer, len(p.Layers))
	for i, l := range p.Layers {
		if l.Network != nil && len(l.Network.Secrets) > 0 {
			n := *l.Network
			n.Secrets = strip(n.Secrets)
			l.Network = &n
		}
		q.Layers[i] = l
	}
	return &q
}
