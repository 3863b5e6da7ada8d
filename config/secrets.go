package config

import (
	"fmt"
	"os"

	"github.com/codecell-dev/codecell/internal/egress"
)

// checkSecrets checks network.secrets' declarations.
func (c *Config) checkSecrets() error {
	if c.Network == nil || len(c.Network.Secrets) == 0 {
		return nil
	}
	if err := c.Network.CheckSecrets(); err != nil {
		return fmt.Errorf("network.secrets: %w", err)
	}
	return nil
}

// CheckSecretValues reads each secret's value (lookupEnv and readFile: nil
// for the host's), so that a variable that is not set or a file that
// cannot be read is found when codecell starts. Values are read again as
// each run starts: a changed file is a changed value.
func (c *Config) CheckSecretValues(lookupEnv func(string) (string, bool), readFile func(string) ([]byte, error)) error {
	if c.Network == nil {
		return nil
	}
	if readFile == nil {
		readFile = os.ReadFile
	}
	for _, s := range c.Network.Secrets {
		if _, err := s.Spec().Value(lookupEnv, readFile); err != nil {
			return fmt.Errorf("network.secrets: %w", err)
		}
	}
	return nil
}

// Notes are what in the configuration is allowed but probably not meant:
// a secret whose hosts the network policy does not reach is never sent.
func (c *Config) Notes() []string {
	if c.Network == nil || len(c.Network.Secrets) == 0 {
		return nil
	}
	l, err := egress.ParseLayer("config", c.Network.Allow, c.Network.Deny)
	if err != nil {
		return nil
	}
	p := &egress.Policy{Layers: []egress.Layer{l}}
	var notes []string
	for _, s := range c.Network.Secrets {
		for _, h := range s.Hosts {
			r, err := egress.ParseRule(h)
			if err == nil && !p.Reaches(r) {
				notes = append(notes, fmt.Sprintf("network.secrets: secret %s goes to %s, which network.allow does not let programs reach: it is sent only where a policy allows the host", s.Name, h))
			}
		}
	}
	return notes
}
