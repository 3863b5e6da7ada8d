package config

import (
	"strings"
	"testing"

	"github.com/codecell-dev/codecell/internal/jsonkeys"
)

// FuzzParse: whatever a configuration file holds, Parse returns a
// configuration or an error, never panics, and an error the JSON decoder
// raised says the line and column.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		`{}`,
		`{"tier":"native","limits":{"timeout":"10s","memory":"256M"}}`,
		`{"mcpServers":{"gh":{"command":"npx","args":["-y","x"],"env":{"A":"b"}}}}`,
		`{"mcpServers":{"web":{"url":"http://127.0.0.1:1/mcp","headers":{"A":"b"}}}}`,
		`{"auth":{"tokens":["a","b"]},"server":{"max_running":4}}`,
		`{"limits":{"timeout":"-5s","memory":"99999999999999999999T"}}`,
		`{"guard":{"block":["process","nope"]}}`,
		`{"network":{"allow":["a.example"],"secrets":[{"name":"a","env":"A","hosts":["a.example"],"header":"Authorization: Bearer {value}"}]}}`,
		`{"network":{"secrets":[{"name":"a","file":"/k","hosts":["*.a.example:8443"],"sandbox_env":"K","x":1}]}}`,
		strings.Repeat(`{"a":`, 20000),
		"\xff\xfe",
		// Errors that are located in the file.
		"{\n  \"limits\": {\n    \"timout\": \"5s\"\n  }\n}\n",
		`{"mcpServers": {"gh": {"command": 5}}}`,
		`{"auth": {"tokens": [42, {"name": "a", "token": 1}]}}`,
		`{"limits": {"timeout": "5s"}`,
		`{"tier": "native"} {}`,
		`{"a": ` + strings.Repeat("[", 9000) + strings.Repeat("]", 9000) + `}`,
		`{"mcpServers": {"x": ` + strings.Repeat(`{"y": `, 500) + `1` + strings.Repeat("}", 500) + `}}`,
		// Keys given twice.
		`{"tier": "native", "tier": "local"}`,
		`{"mcpServers": {"gh": {"command": "a"}, "gh": {"command": "b", "env": {"A": "1", "A": "2"}}}}`,
		`{"auth": {"tokens": [{"name": "a", "token": "t", "name": "b"}]}}`,
		// Keys in another case than their field's.
		`{"tier": "native", "TIER": "local"}`,
		`{"limits": {"Timeout": "1h"}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err == nil && c == nil {
			t.Fatal("no configuration and no error")
		}
		if err != nil && strings.Contains(err.Error(), "json: ") && !strings.Contains(err.Error(), "line ") {
			t.Fatalf("an error with no place: %v", err)
		}
		if _, dup := jsonkeys.IsDuplicate(jsonkeys.Check(data)); dup && err == nil {
			t.Fatal("a configuration that gives a key twice was taken")
		}
	})
}

// A key in another case than its field's is refused, naming the line,
// column and spelling: the decoder would take it, a person or another tool
// reading the file would not.
func TestParseWrongCase(t *testing.T) {
	_, err := Parse([]byte("{\n  \"tier\": \"native\",\n  \"limits\": {\"Timeout\": \"1h\"}\n}"))
	if err == nil || !strings.Contains(err.Error(), `line 3, column 14: the key "Timeout" is spelled "timeout"`) {
		t.Fatalf("%v", err)
	}
}
