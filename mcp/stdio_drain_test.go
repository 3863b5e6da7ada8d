package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

const (
	initializeLine  = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	initializedLine = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
)

// The end of a client's input is the end of its requests: those it sent
// are answered before codecell mcp ends, as `printf '...' | codecell mcp`
// expects, however quickly the input ends after them.
func TestStdioAnswersWhatItReadBeforeItsInputEnds(t *testing.T) {
	s := testServer(t)
	input := strings.Join([]string{
		initializeLine,
		initializedLine,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":"three","method":"tools/call","params":{"name":"execute","arguments":{"language":"sh","code":"echo drained"}}}`,
	}, "\n") + "\n"
	var out strings.Builder
	if err := s.RunIO(context.Background(), strings.NewReader(input), &out); err != nil {
		t.Fatalf("RunIO: %v", err)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &msg); err != nil {
			t.Fatalf("the server wrote %q: %v", line, err)
		}
		if len(msg.ID) > 0 {
			got[string(msg.ID)] = string(msg.Result) + string(msg.Error)
		}
	}
	for _, id := range []string{`1`, `2`, `"three"`} {
		if got[id] == "" {
			t.Errorf("no answer to request %s; the server wrote:\n%s", id, out.String())
		}
	}
	if !strings.Contains(got[`"three"`], `drained\n`) {
		t.Errorf("the execution's answer: %s", got[`"three"`])
	}
}

// A client that ended (its input ended, and so did its reading of the
// answers) has its executions ended, rather than waited for.
func TestStdioClientGoneEndsItsExecutions(t *testing.T) {
	s := testServer(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	started := make(chan struct{})
	go func() {
		if c, err := ln.Accept(); err == nil {
			close(started)
			c.Close()
		}
	}()
	inR, inW := io.Pipe()
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer outW.Close()
	done := make(chan error, 1)
	go func() { done <- s.RunIO(context.Background(), inR, outW) }()
	lines := bufio.NewReader(outR)
	send := func(line string) {
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	send(initializeLine)
	if _, err := lines.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	send(initializedLine)
	// The program tells the test it runs, then sleeps for a minute.
	code := fmt.Sprintf("import socket, time\nsocket.create_connection(('127.0.0.1', %d)).close()\ntime.sleep(60)\n", ln.Addr().(*net.TCPAddr).Port)
	args, _ := json.Marshal(map[string]any{"language": "python", "code": code})
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"execute","arguments":` + string(args) + `}}`)
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("RunIO returned before the program started: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the program did not start within 30s")
	}
	// The client ends: its input, then its reading.
	inW.Close()
	outR.Close()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("RunIO went on for 30s after its client ended, waiting for an execution of 60s")
	}
}
