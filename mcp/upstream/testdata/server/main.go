// Command server is a stdio MCP server for the tests of package mcp. Its
// tools exercise what an upstream server may do: answer with structured or
// text content, fail, take its time, crash, hang, answer at length, and
// show what it was given of the environment.
//
// With the argument "exit-at-start" it writes to stderr and exits 2 before
// speaking MCP; with "child" it is a child process that sleeps (see the
// spawn tool); with "hang-at-start" it never answers; with "gate FIFO" it
// speaks MCP once the FIFO was opened for writing; with "raw MODE" it
// speaks JSON-RPC by hand and misbehaves as MODE says (see raw).
package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type echoIn struct {
	Text string `json:"text" jsonschema:"the text to echo"`
}
type echoOut struct {
	Text string `json:"text"`
}
type addIn struct {
	A float64 `json:"a"`
	B float64 `json:"b"`
}
type slowIn struct {
	MS int `json:"ms" jsonschema:"how long to sleep, in milliseconds"`
}
type slowOut struct {
	Concurrent int `json:"concurrent"` // calls of slow running when this one began, itself included
}
type statsOut struct {
	MaxConcurrent int `json:"max_concurrent"` // the most calls of slow that ran at once
	Cancelled     int `json:"cancelled"`      // calls of slow that ended by cancellation
}
type bigIn struct {
	Bytes int `json:"bytes"`
}
type envIn struct {
	Name string `json:"name"`
}
type envOut struct {
	Set   bool   `json:"set"`
	Value string `json:"value"`
}
type pidOut struct {
	PID int `json:"pid"`
}
type none struct{}

var (
	mu            sync.Mutex
	running       int
	maxConcurrent int
	cancelled     int
	linger        bool
)

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "exit-at-start":
			fmt.Fprintln(os.Stderr, "test server: MISSING_API_KEY is not set")
			os.Exit(2)
		case "child":
			time.Sleep(5 * time.Minute)
			return
		case "hang-at-start":
			// Starts, and never speaks MCP: until it is killed, or for at
			// most five minutes.
			time.Sleep(5 * time.Minute)
			return
		case "raw":
			// JSON-RPC by hand, misbehaving as os.Args[2] says: see raw.
			raw(os.Args[2])
			return
		case "gate":
			// Speaks MCP only once the FIFO os.Args[2] was opened for
			// writing: the test says when the server is ready.
			f, err := os.Open(os.Args[2])
			if err != nil {
				fmt.Fprintln(os.Stderr, "test server:", err)
				os.Exit(2)
			}
			f.Close()
		}
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "codecell-test-server", Version: "1"}, nil)

	mcp.AddTool(server, &mcp.Tool{Name: "echo", Description: "Echoes its text, as structured content."},
		func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, echoOut, error) {
			return nil, echoOut{Text: in.Text}, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "add", Description: "Adds a and b; the sum comes as text."},
		func(ctx context.Context, req *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, any, error) {
			return text(strconv.FormatFloat(in.A+in.B, 'f', -1, 64)), nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "fail", Description: "Always fails, with isError."},
		func(ctx context.Context, req *mcp.CallToolRequest, in none) (*mcp.CallToolResult, any, error) {
			return nil, nil, fmt.Errorf("fail always fails: the <answer> is no")
		})
	mcp.AddTool(server, &mcp.Tool{Name: "slow", Description: "Sleeps ms milliseconds, or until cancelled."},
		func(ctx context.Context, req *mcp.CallToolRequest, in slowIn) (*mcp.CallToolResult, slowOut, error) {
			mu.Lock()
			running++
			n := running
			maxConcurrent = max(maxConcurrent, running)
			mu.Unlock()
			defer func() {
				mu.Lock()
				running--
				mu.Unlock()
			}()
			select {
			case <-time.After(time.Duration(in.MS) * time.Millisecond):
				return nil, slowOut{Concurrent: n}, nil
			case <-ctx.Done():
				mu.Lock()
				cancelled++
				mu.Unlock()
				return nil, slowOut{}, ctx.Err()
			}
		})
	mcp.AddTool(server, &mcp.Tool{Name: "stats", Description: "Reports what slow saw."},
		func(ctx context.Context, req *mcp.CallToolRequest, in none) (*mcp.CallToolResult, statsOut, error) {
			mu.Lock()
			defer mu.Unlock()
			return nil, statsOut{MaxConcurrent: maxConcurrent, Cancelled: cancelled}, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "crash", Description: "Exits the process mid-call."},
		func(ctx context.Context, req *mcp.CallToolRequest, in none) (*mcp.CallToolResult, any, error) {
			fmt.Fprintln(os.Stderr, "test server: crashing on purpose")
			os.Exit(3)
			return nil, nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "garbage", Description: "Writes a line that is not JSON-RPC where the answer goes."},
		func(ctx context.Context, req *mcp.CallToolRequest, in none) (*mcp.CallToolResult, any, error) {
			fmt.Fprintln(os.Stdout, "this is not JSON-RPC")
			return text("after the garbage"), nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "freeze", Description: "Stops the whole process (SIGSTOP) mid-call."},
		func(ctx context.Context, req *mcp.CallToolRequest, in none) (*mcp.CallToolResult, any, error) {
			fmt.Fprintln(os.Stderr, "test server: freezing")
			_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
			// The signal stops the process soon, not at once: without the
			// sleep, this call could still answer.
			time.Sleep(time.Minute)
			return text("thawed"), nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "big", Description: "Returns a text of the given size."},
		func(ctx context.Context, req *mcp.CallToolRequest, in bigIn) (*mcp.CallToolResult, any, error) {
			return text(strings.Repeat("x", in.Bytes)), nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "env", Description: "Reports an environment variable."},
		func(ctx context.Context, req *mcp.CallToolRequest, in envIn) (*mcp.CallToolResult, envOut, error) {
			v, ok := os.LookupEnv(in.Name)
			return nil, envOut{Set: ok, Value: v}, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "environ", Description: "Lists the names of the environment."},
		func(ctx context.Context, req *mcp.CallToolRequest, in none) (*mcp.CallToolResult, any, error) {
			var names []string
			for _, kv := range os.Environ() {
				k, _, _ := strings.Cut(kv, "=")
				names = append(names, k)
			}
			return text(strings.Join(names, " ")), nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "pid", Description: "Reports the server's pid."},
		func(ctx context.Context, req *mcp.CallToolRequest, in none) (*mcp.CallToolResult, pidOut, error) {
			return nil, pidOut{PID: os.Getpid()}, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "spawn", Description: "Starts a child process that sleeps; reports its pid."},
		func(ctx context.Context, req *mcp.CallToolRequest, in none) (*mcp.CallToolResult, pidOut, error) {
			self, err := os.Executable()
			if err != nil {
				return nil, pidOut{}, err
			}
			child := exec.Command(self, "child")
			if err := child.Start(); err != nil {
				return nil, pidOut{}, err
			}
			go child.Wait()
			return nil, pidOut{PID: child.Process.Pid}, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "linger", Description: "From now on, ignore SIGTERM and do not exit when stdin closes."},
		func(ctx context.Context, req *mcp.CallToolRequest, in none) (*mcp.CallToolResult, any, error) {
			signal.Ignore(syscall.SIGTERM)
			mu.Lock()
			linger = true
			mu.Unlock()
			return text("lingering"), nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "add_tool", Description: "Adds the tool extra, which changes the tool list."},
		func(ctx context.Context, req *mcp.CallToolRequest, in none) (*mcp.CallToolResult, any, error) {
			mcp.AddTool(server, &mcp.Tool{Name: "extra", Description: "Added at run time."},
				func(ctx context.Context, req *mcp.CallToolRequest, in none) (*mcp.CallToolResult, any, error) {
					return text("extra"), nil, nil
				})
			return text("added"), nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "image", Description: "Returns a text and an image."},
		func(ctx context.Context, req *mcp.CallToolRequest, in none) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.TextContent{Text: "a pixel"},
				&mcp.ImageContent{MIMEType: "image/png", Data: []byte{0x89, 'P', 'N', 'G'}},
			}}, nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "internal", Description: "Answers with JSON-RPC error -32603."},
		func(ctx context.Context, req *mcp.CallToolRequest, in none) (*mcp.CallToolResult, any, error) {
			return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the database is down"}
		})

	err := server.Run(context.Background(), &mcp.StdioTransport{})
	mu.Lock()
	l := linger
	mu.Unlock()
	if l {
		select {} // until killed
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "test server:", err)
		os.Exit(1)
	}
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}
