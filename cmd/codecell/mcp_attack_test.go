package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A client's over-long line does not end `codecell mcp`: the line gets a
// JSON-RPC error under its id, the next request its answer, and codecell
// exits 0 when the client closes its end. codecell does not hold the line:
// its peak memory stays near that of a session without it.
func TestMCPStdioSurvivesLongLines(t *testing.T) {
	// A long line is its start, size bytes of filler, and its end: written
	// in pieces, never held whole by this test, whose own memory at the
	// start of codecell would count in codecell's peak.
	type longLine struct {
		start, end string
		size       int
	}
	session := func(t *testing.T, long ...longLine) (replies []map[string]json.RawMessage, maxrss int64) {
		cmd := cliCommand("mcp", "--config", writeFile(t, "codecell.json", `{}`), "--log", writeFile(t, "mcp.log", ""), "--state", t.TempDir())
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() {
			// A codecell that died shows in what it answers; the writes
			// after that fail, and are not reported from here.
			failed := false
			send := func(s string) {
				if !failed {
					_, err := io.WriteString(stdin, s)
					failed = err != nil
				}
			}
			send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}` + "\n")
			send(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")
			filler := strings.Repeat("x", 1<<20)
			for _, l := range long {
				send(l.start)
				for n := 0; n < l.size; n += len(filler) {
					send(filler[:min(len(filler), l.size-n)])
				}
				send(l.end + "\n")
			}
			send(`{"jsonrpc":"2.0","id":99,"method":"tools/list"}` + "\n")
		}()
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			var r map[string]json.RawMessage
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatalf("not JSON: %.200q", sc.Text())
			}
			replies = append(replies, r)
			if string(r["id"]) == "99" {
				break
			}
		}
		// The client closes its end once it has its answers.
		stdin.Close()
		go func() { io.Copy(io.Discard, stdout); exited <- cmd.Wait() }()
		select {
		case err := <-exited:
			if err != nil {
				t.Fatalf("codecell mcp: %v", err)
			}
		case <-time.After(60 * time.Second):
			cmd.Process.Kill()
			t.Fatal("codecell mcp did not exit when its input ended")
		}
		return replies, cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10
	}
	_, base := session(t)
	call := func(id string, size int) longLine {
		return longLine{`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"execute","arguments":{"code":"`, `"}}}`, size}
	}
	replies, peak := session(t, call("7", 17<<20), call(`"big"`, 40<<20), longLine{`{"jsonrpc":"2.0","method":"x","params":"`, `"}`, 20 << 20})
	t.Logf("peak memory of codecell mcp: %d MiB, against %d MiB without the long lines", peak>>20, base>>20)
	var got []string
	for _, r := range replies[1:] {
		code := ""
		if e := r["error"]; e != nil {
			var env struct{ Code int }
			json.Unmarshal(e, &env)
			code = fmt.Sprint(env.Code)
		}
		got = append(got, string(r["id"])+" "+code)
	}
	if want := []string{"7 -32600", `"big" -32600`, "null -32600", "99 "}; strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("replies after initialize: %v, want %v", got, want)
	}
	if !strings.Contains(string(replies[len(replies)-1]["result"]), `"execute"`) {
		t.Errorf("tools/list after the long lines: %.300s", replies[len(replies)-1]["result"])
	}
	// 77 MiB of lines went in; holding one of them would show.
	if peak > base+32<<20 {
		t.Errorf("peak memory %d MiB after long lines, against %d MiB without", peak>>20, base>>20)
	}
}
