package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A key given twice is refused, at any depth, naming the file, the line
// and column of the second, and the key's path: encoding/json would keep
// the last, where a person or another tool reading the file may take the
// first.
func TestDuplicateKeys(t *testing.T) {
	for _, c := range []struct{ name, json, want string }{
		{"tier", "{\n  \"tier\": \"native\",\n  \"tier\": \"local\"\n}\n", "line 3, column 3: tier is given twice: give each key once"},
		{"a limit", `{"limits": {"timeout": "5s", "memory": "1G", "timeout": "1h"}}`, "line 1, column 46: limits.timeout is given twice"},
		{"a server pasted twice", `{"mcpServers": {"gh": {"command": "a"}, "gh": {"command": "b"}}}`, "mcpServers.gh is given twice"},
		{"a server's variable", `{"mcpServers": {"gh": {"command": "a", "env": {"T": "1", "T": "2"}}}}`, "mcpServers.gh.env.T is given twice"},
		{"a token", `{"auth": {"tokens": [{"name": "a", "token": "t1-0123456789abcdef", "role": "user", "role": "admin"}]}}`, "auth.tokens[0].role is given twice"},
		{"escaped", `{"tools": {"deny": ["x"], "d\u0065ny": []}}`, "tools.deny is given twice"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "codecell.json")
			if err := os.WriteFile(path, []byte(c.json), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Load(path)
			if err == nil || !strings.HasPrefix(err.Error(), path+": ") || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "give each key once") {
				t.Fatalf("got %v, want %s: %q", err, path, c.want)
			}
		})
	}
	// The same key in different objects is no duplicate.
	if _, err := Parse([]byte(`{"limits": {"timeout": "5s"}, "server": {"max_limits": {"timeout": "10s"}}, "mcpServers": {"a": {"command": "x", "env": {"A": "1"}}, "b": {"command": "x", "env": {"A": "1"}}}}`)); err != nil {
		t.Fatal(err)
	}
}
