package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// raw speaks JSON-RPC by hand, one line a message, as a server built
// without an SDK might, and misbehaves as the mode says:
//
//   - legacy: answers initialize, tools/list, tools/call (the tool echo)
//     and ping; ignores every other request, as some servers do with
//     methods they do not know (server/discover among them);
//   - silent: reads everything and answers nothing;
//   - no-list: as legacy, but never answers tools/list;
//   - wrong-id: answers a tools/call with an id that was never sent;
//   - twice: answers a tools/call twice;
//   - ask: on a tools/call, sends sampling/createMessage, roots/list and
//     elicitation/create to the client and answers the call once all three
//     were answered, with the error codes it got;
//   - flood: once initialized, sends notifications without end;
//   - no-read: stops reading stdin once it has listed its tools, and
//     answers nothing more, so that codecell's writes fill the pipe;
//   - endless-line: on a tools/call, writes a line that never ends;
//   - close-stdout: on a tools/call, closes its stdout and keeps running,
//     ignoring SIGTERM, until killed.
//
// It exits when stdin ends, except in close-stdout mode.
func raw(mode string) {
	w := &lineWriter{out: bufio.NewWriter(os.Stdout)}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	asked := map[string]chan string{} // ids of raw's requests to the client
	var askedMu sync.Mutex
	for in.Scan() {
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		if json.Unmarshal(in.Bytes(), &msg) != nil {
			continue
		}
		if msg.Method == "" { // a response to one of raw's requests
			askedMu.Lock()
			ch := asked[string(msg.ID)]
			delete(asked, string(msg.ID))
			askedMu.Unlock()
			if ch != nil {
				if msg.Error != nil {
					ch <- fmt.Sprint(msg.Error.Code)
				} else {
					ch <- "ok"
				}
			}
			continue
		}
		if msg.ID == nil { // a notification
			if msg.Method == "notifications/initialized" && mode == "flood" {
				go func() {
					for {
						w.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/message",
							"params": map[string]any{"level": "info", "data": "flood"}})
					}
				}()
			}
			continue
		}
		switch msg.Method {
		case "initialize":
			if mode == "silent" {
				continue
			}
			w.reply(msg.ID, map[string]any{
				"protocolVersion": "2025-06-18",
				"capabilities":    map[string]any{"tools": map[string]any{}},
				"serverInfo":      map[string]any{"name": "raw-" + mode, "version": "1"},
			})
		case "ping":
			if mode != "silent" {
				w.reply(msg.ID, map[string]any{})
			}
		case "tools/list":
			if mode == "silent" || mode == "no-list" {
				continue
			}
			w.reply(msg.ID, map[string]any{"tools": []any{map[string]any{
				"name": "echo", "description": "Echoes.", "inputSchema": map[string]any{"type": "object"},
			}}})
			if mode == "no-read" {
				for {
					time.Sleep(time.Hour)
				}
			}
		case "tools/call":
			result := map[string]any{"content": []any{map[string]any{"type": "text", "text": "echoed"}}}
			switch mode {
			case "silent":
			case "wrong-id":
				w.reply(json.RawMessage(`987654321`), result)
			case "twice":
				w.reply(msg.ID, result)
				w.reply(msg.ID, result)
			case "ask":
				go func(id json.RawMessage) {
					var codes []string
					for i, m := range []string{"sampling/createMessage", "roots/list", "elicitation/create"} {
						rid := fmt.Sprintf(`"raw-%s-%d"`, id, i)
						ch := make(chan string, 1)
						askedMu.Lock()
						asked[rid] = ch
						askedMu.Unlock()
						w.send(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(rid), "method": m, "params": map[string]any{}})
						codes = append(codes, m+": "+<-ch)
					}
					w.reply(id, map[string]any{"content": []any{map[string]any{"type": "text", "text": fmt.Sprint(codes)}}})
				}(msg.ID)
			case "endless-line":
				w.mu.Lock()
				w.out.WriteString(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"`)
				chunk := make([]byte, 64<<10)
				for i := range chunk {
					chunk[i] = 'x'
				}
				for {
					if _, err := w.out.Write(chunk); err != nil {
						os.Exit(1)
					}
				}
			case "close-stdout":
				signal.Ignore(syscall.SIGTERM)
				os.Stdout.Close()
				for {
					time.Sleep(time.Hour)
				}
			default:
				w.reply(msg.ID, result)
			}
		}
	}
}

type lineWriter struct {
	mu  sync.Mutex
	out *bufio.Writer
}

func (w *lineWriter) reply(id json.RawMessage, result any) {
	w.send(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
}

func (w *lineWriter) send(msg any) {
	b, _ := json.Marshal(msg)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.out.Write(b)
	w.out.WriteByte('\n')
	if w.out.Flush() != nil {
		os.Exit(1)
	}
}
