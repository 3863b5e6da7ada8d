package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/api"
	"github.com/codecell-dev/codecell/client"
	"github.com/codecell-dev/codecell/internal/testenv"
	"github.com/codecell-dev/codecell/server"
	"github.com/codecell-dev/codecell/tier/native"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// codecell serve with named tokens from the file and one from
// CODECELL_TOKENS: each holder sees its own sessions, MCP runs take the REST
// API's execution slots, and the log names principals, never tokens.
func TestServeTenants(t *testing.T) {
	testenv.RequireNative(t, native.Default.Probe)
	tokens := map[string]string{"alice": "alice-cfg-9f3e1d", "ops": "ops-cfg-2b7c55", "env-1": "bob-env-6a0f4e"}
	cfg := writeFile(t, "codecell.json", `{"auth": {"tokens": [{"name": "alice", "token": "`+tokens["alice"]+`"},
		{"name": "ops", "token": "`+tokens["ops"]+`", "role": "admin"}]}, "server": {"max_running": 1}}`)
	logFile := writeFile(t, "serve.log", "")
	s := startServed(t, []string{"CODECELL_TOKENS=" + tokens["env-1"]}, "--config", cfg, "--log", logFile, "--state", t.TempDir())
	ctx := context.Background()
	alice, bob, ops := client.New(s.base, tokens["alice"]), client.New(s.base, tokens["env-1"]), client.New(s.base, tokens["ops"])

	made, err := alice.CreateSession(ctx, api.SessionSpec{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Upload(ctx, made.ID, "secret.txt", strings.NewReader("alice's")); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Session(ctx, made.ID); client.CodeOf(err) != server.CodeSessionNotFound {
		t.Errorf("bob reads alice's session: %v", err)
	}
	if list, err := ops.Sessions(ctx); err != nil || len(list) != 1 || list[0].Owner != "alice" {
		t.Errorf("the admin lists %+v %v", list, err)
	}
	aliceMCP, bobMCP := connectHTTP(t, s.base+"/mcp", tokens["alice"]), connectHTTP(t, s.base+"/mcp", tokens["env-1"])
	for who, want := range map[*sdk.ClientSession]string{aliceMCP: `["secret.txt"]`, bobMCP: `[]`} {
		_, r := execute(t, who, "execute", map[string]any{"session": made.ID, "code": "import os\nsorted(os.listdir('.'))"})
		if r.Status != codecell.StatusSuccess || string(r.Value) != want {
			t.Errorf("an MCP run in session %s sees %s, want %s", made.ID, r.Value, want)
		}
	}

	// One execution at most, MCP's included.
	callCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = aliceMCP.CallTool(callCtx, &sdk.CallToolParams{Name: "execute", Arguments: map[string]any{"language": "bash", "code": "sleep 60"}})
	}()
	waitHealth(t, ops, 1)
	if _, err := bob.Execute(ctx, "", api.Execution{Language: "bash", Code: "true"}); client.CodeOf(err) != server.CodeTooManyExecutions {
		t.Errorf("a REST execution while an MCP run holds the server's one slot: %v", err)
	}
	cancel()
	<-done

	logs, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	for name, tok := range tokens {
		if strings.Contains(string(logs), tok[:10]) {
			t.Fatalf("the log holds %s's token:\n%s", name, logs)
		}
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(logs)), "\n") {
		var rec struct{ Msg, Principal string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Principal != "" {
			seen[rec.Msg+" "+rec.Principal] = true
		}
	}
	for _, want := range []string{"http alice", "http env-1", "http ops", "exec alice", "exec env-1", "session created alice"} {
		if !seen[want] {
			t.Errorf("no %q line in the log:\n%s", want, logs)
		}
	}
}

// Tokens that cannot be told apart are refused at start, with a message
// that names their holders and holds no token.
func TestServeRefusesAmbiguousTokens(t *testing.T) {
	cfg := writeFile(t, "codecell.json", `{"auth": {"tokens": [{"name": "alice", "token": "same-secret-token"}]}}`)
	t.Setenv("CODECELL_TOKENS", "other-token, same-secret-token")
	done := make(chan struct{})
	var exit int
	var stderr string
	go func() {
		defer close(done)
		exit, _, stderr = cli(t, "", "serve", "--config", cfg, "--state", filepath.Join(t.TempDir(), "state"), "--addr", "127.0.0.1:0")
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("codecell serve started with two principals of one token")
	}
	if exit != exitUsage || !strings.Contains(stderr, "alice and env-2 have the same token") || strings.Contains(stderr, "same-secret-token") {
		t.Errorf("exit %d, stderr %s", exit, stderr)
	}
}
