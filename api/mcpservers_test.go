package api

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestValidateMCPServer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		servers MCPServers
		wantErr string // "" for valid
	}{
		{"stdio", MCPServers{"github": {Command: "npx", Args: []string{"-y", "server"}, Env: map[string]string{"T": "${T}"}}}, ""},
		{"stdio typed", MCPServers{"a_b-c": {Type: "stdio", Command: "srv"}}, ""},
		{"http", MCPServers{"remote": {URL: "https://example.com/mcp", Headers: map[string]string{"Authorization": "Bearer ${T}"}}}, ""},
		{"http typed", MCPServers{"r": {Type: "http", URL: "http://127.0.0.1:8080/mcp"}}, ""},
		{"streamable-http typed", MCPServers{"r": {Type: "streamable-http", URL: "http://h/mcp"}}, ""},
		{"url from a variable", MCPServers{"r": {URL: "${MCP_URL}"}}, ""},
		{"64 characters", MCPServers{strings.Repeat("a", 64): {Command: "x"}}, ""},

		{"dotted name", MCPServers{"git.hub": {Command: "x"}}, `server name "git.hub"`},
		{"empty name", MCPServers{"": {Command: "x"}}, `server name ""`},
		{"leading dash", MCPServers{"-x": {Command: "x"}}, `server name "-x"`},
		{"space", MCPServers{"my server": {Command: "x"}}, `server name "my server"`},
		{"65 characters", MCPServers{strings.Repeat("a", 65): {Command: "x"}}, "1 to 64"},
		{"both", MCPServers{"s": {Command: "x", URL: "https://h/mcp"}}, `both "command" and "url"`},
		{"neither", MCPServers{"s": {}}, `set "command"`},
		{"sse", MCPServers{"s": {Type: "sse", URL: "https://h/sse"}}, "SSE transport"},
		{"unknown type", MCPServers{"s": {Type: "websocket", URL: "wss://h"}}, `"type": "websocket"`},
		{"ftp url", MCPServers{"s": {URL: "ftp://h/mcp"}}, "http:// or https://"},
		{"no scheme", MCPServers{"s": {URL: "localhost:8080/mcp"}}, "http:// or https://"},
		{"no host", MCPServers{"s": {URL: "http:///mcp"}}, "no host"},
		{"http type with command", MCPServers{"s": {Type: "http", Command: "x"}}, `needs "url"`},
		{"stdio type with url", MCPServers{"s": {Type: "stdio", URL: "https://h"}}, `needs "command"`},
		{"headers on a command", MCPServers{"s": {Command: "x", Headers: map[string]string{"A": "b"}}}, `"headers" apply to a "url" server`},
		{"env on a url", MCPServers{"s": {URL: "https://h", Env: map[string]string{"A": "b"}}}, `apply to a "command" server`},
	} {
		err := tc.servers.Validate()
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.wantErr)
		}
	}
}

func TestValidateReportsEveryServer(t *testing.T) {
	err := MCPServers{"b": {}, "a.x": {Command: "x"}, "ok": {Command: "x"}}.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"a.x"`) || !strings.HasPrefix(lines[1], "mcpServers.b:") {
		t.Errorf("errors: %q", lines)
	}
}

func TestParseServers(t *testing.T) {
	desktop := []byte(`{
	  "globalShortcut": "",
	  "mcpServers": {
	    "filesystem": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]},
	    "remote": {"type": "http", "url": "https://example.com/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}}
	  }
	}`)
	servers, err := ParseMCPServers(desktop)
	if err != nil {
		t.Fatal(err)
	}
	want := MCPServers{
		"filesystem": {Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-filesystem", "/tmp"}},
		"remote":     {Type: "http", URL: "https://example.com/mcp", Headers: map[string]string{"Authorization": "Bearer ${TOKEN}"}},
	}
	if !reflect.DeepEqual(servers, want) {
		t.Errorf("ParseMCPServers: %+v", servers)
	}

	bare, err := ParseMCPServers([]byte(`{"fs": {"command": "srv", "cwd": "/srv"}}`))
	if err != nil || bare["fs"].Cwd != "/srv" {
		t.Errorf("bare object: %+v %v", bare, err)
	}
	if _, err := ParseMCPServers([]byte(`{"mcpServers": {"s": {"type": "sse", "url": "https://h/sse"}}}`)); err == nil || !strings.Contains(err.Error(), "mcpServers.s:") {
		t.Errorf("sse server: %v", err)
	}
	if _, err := ParseMCPServers([]byte(`{"mcpServers": `)); err == nil {
		t.Error("truncated JSON parsed")
	}
}

func TestExpandMCPServer(t *testing.T) {
	env := map[string]string{"TOKEN": "t0k", "EMPTY": "", "HOST": "h.example"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	cfg := MCPServer{
		Command: "${HOST}-server",
		Args:    []string{"--token=${TOKEN}", "$TOKEN stays", "${MISSING:-dflt}", "${EMPTY:-was empty}", "[${EMPTY}]"},
		Env:     map[string]string{"A": "${TOKEN}${TOKEN}"},
		Cwd:     "/srv/${HOST}",
	}
	got, err := cfg.Expand(lookup)
	if err != nil {
		t.Fatal(err)
	}
	want := MCPServer{
		Command: "h.example-server",
		Args:    []string{"--token=t0k", "$TOKEN stays", "dflt", "was empty", "[]"},
		Env:     map[string]string{"A": "t0kt0k"},
		Cwd:     "/srv/h.example",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("expand: %+v, want %+v", got, want)
	}
	if cfg.Args[0] != "--token=${TOKEN}" {
		t.Error("expand changed the config it was given")
	}

	httpCfg := MCPServer{URL: "https://${HOST}/mcp", Headers: map[string]string{"Authorization": "Bearer ${TOKEN}"}}
	if got, err := httpCfg.Expand(lookup); err != nil || got.URL != "https://h.example/mcp" || got.Headers["Authorization"] != "Bearer t0k" {
		t.Errorf("expand url and headers: %+v %v", got, err)
	}

	_, err = MCPServer{URL: "https://h", Headers: map[string]string{"X-Key": "${NOPE}"}}.Expand(lookup)
	var unset *UnsetVarError
	if !errors.As(err, &unset) || unset.Var != "NOPE" || unset.Field != `"headers"["X-Key"]` {
		t.Errorf("unset variable: %v", err)
	}
	if _, err := (MCPServer{URL: "${HOST}"}).Expand(lookup); err == nil || !strings.Contains(err.Error(), "http://") {
		t.Errorf("a URL that is not one once expanded: %v", err)
	}
}
