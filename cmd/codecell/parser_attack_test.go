package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codecell-dev/codecell"
)

// Programs made to break the parsers codecell runs on the host (esbuild,
// goja in the guardrails, mvdan.cc/sh) cost one run: each gets a Result
// that refuses it, and codecell itself neither dies nor balloons. Each
// program here killed or swelled the process before: a Go stack overflow
// is fatal, whatever recovers.
func TestParserAttacks(t *testing.T) {
	rep := strings.Repeat
	cases := []struct {
		name, file, code string
		flags            []string
		want             string // the Result's error code
	}{
		// Each ! is a level of esbuild's recursion: 300,000 overflowed Go's
		// stack in the codecell process.
		{"prefix operators", "bang.js", rep("!", 300_000) + "1", nil, codecell.CodeTooDeep},
		// 6,000 nested blocks: esbuild indents each level, so the output
		// grew with the square of the depth (565 MiB).
		{"nested blocks", "blocks.js", rep("{", 6000) + rep("}", 6000), nil, codecell.CodeTooDeep},
		// Statements nested without braces: the same square, unbracketed
		// (800 MB of output, 4 GB of memory, 12 s).
		{"ifs without braces", "ifs.js", rep("if (a) ", 20_000) + "x;", nil, codecell.CodeTooDeep},
		// Chained arrows: esbuild's TypeScript parser takes seconds per
		// thousand.
		{"chained arrows", "arrows.ts", "f = " + rep("x => ", 2000) + "1", nil, codecell.CodeTooDeep},
		{"shell subshells", "deep.sh", rep("(", 60_000) + "true" + rep(")", 60_000), nil, codecell.CodeTooDeep},
		// Right-associative operators recurse in esbuild and goja as deeply
		// as brackets: the scan counts each as a level until the statement
		// ends, so they are refused before any parser.
		{"assignment chain", "assign.js", rep("a=", 300_000) + "1", nil, codecell.CodeTooDeep},
		{"exponent chain", "pow.ts", "x = 1" + rep(" ** 1", 150_000), nil, codecell.CodeTooDeep},
		// The same through the guardrails' parsers.
		{"assignment chain, checked", "assign-checked.js", rep("a=", 300_000) + "1", []string{"--block", "process"}, codecell.CodeTooDeep},
		// Nesting no scan counts: a member chain recurses in esbuild, and
		// the guardrails' shell parser in an and-list. The parser's worker
		// runs out of stack; codecell does not.
		{"member chain", "member.ts", "a" + rep(".b", 300_000), nil, codecell.CodeTooComplex},
		{"shell and-list, checked", "and.sh", "true" + rep(" && true", 120_000), []string{"--block", "network"}, codecell.CodeTooComplex},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"run", "--json", "--tier", "local"}, c.flags...)
			cmd := cliCommand(append(args, writeFile(t, c.file, c.code))...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != exitBlocked {
				t.Fatalf("exit: %v, want %d; stderr:\n%.2000s", err, exitBlocked, stderr.String())
			}
			var res codecell.Result
			if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
				t.Fatalf("no Result: %v\n%.500s", err, stdout.String())
			}
			if res.Status != codecell.StatusBlocked || res.Error == nil || res.Error.Code != c.want || res.Error.Retryable || len(res.Error.Hints) == 0 {
				t.Fatalf("status %s, error %+v; want blocked with %s", res.Status, res.Error, c.want)
			}
			t.Logf("%s: %s", res.Error.Code, res.Error.Message)
		})
	}
}

// codecell mcp answers a program of 6,000 nested blocks with a refusal, at
// the memory of a session without it, and goes on serving.
func TestMCPRefusesDeepPrograms(t *testing.T) {
	session := func(t *testing.T, code string) (reply string, maxrss int64) {
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
		args, _ := json.Marshal(map[string]string{"code": code, "language": "javascript"})
		go func() {
			io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`+"\n")
			io.WriteString(stdin, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
			if code != "" {
				io.WriteString(stdin, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"execute","arguments":`+string(args)+`}}`+"\n")
			}
			io.WriteString(stdin, `{"jsonrpc":"2.0","id":99,"method":"tools/list"}`+"\n")
		}()
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 16<<20)
		listed := false
		for sc.Scan() {
			var r struct {
				ID     json.RawMessage
				Result json.RawMessage
			}
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatalf("not JSON: %.200q", sc.Text())
			}
			switch string(r.ID) {
			case "2":
				reply = string(r.Result)
			case "99":
				listed = true
			}
			if listed && (code == "" || reply != "") {
				break
			}
		}
		if !listed {
			t.Fatal("codecell mcp stopped answering")
		}
		stdin.Close()
		exited := make(chan error, 1)
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
		return reply, cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10
	}
	_, base := session(t, "")
	reply, peak := session(t, strings.Repeat("{", 6000)+strings.Repeat("}", 6000))
	t.Logf("peak memory of codecell mcp: %d MiB, against %d MiB without the program", peak>>20, base>>20)
	if !strings.Contains(reply, codecell.CodeTooDeep) {
		t.Fatalf("the reply does not refuse the program as too deep: %.1000s", reply)
	}
	if peak > base+64<<20 {
		t.Errorf("codecell mcp peaked at %d MiB for the program, %d MiB without it", peak>>20, base>>20)
	}
}
