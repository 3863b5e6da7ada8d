package codecell

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"unicode/utf8"
)

// CodeNoSuchHandle: a program read a handle its execution does not hold.
const CodeNoSuchHandle = "TOOL_NO_SUCH_HANDLE"

// handles are the tool results one execution keeps on the host (a call
// with "as": "handle"), for the program to read a page at a time: a result
// bigger than the model should see, or than one answer may carry, is
// filtered in the sandbox instead. They go when the execution ends.
type handles struct {
	mu    sync.Mutex
	held  map[string]*handleData
	bytes int64
	next  int
	// tag makes the names of these handles this execution's alone: a
	// live session's cells share one interpreter, and a handle an earlier
	// cell kept must not name a later cell's result.
	tag string
}

// handleData is a result as the program reads it: the text of a result
// that is a JSON string ("text"), else the result's JSON ("json").
type handleData struct {
	tool, kind string
	data       []byte
}

// room is how many bytes of JSON one more handle may take.
func (h *handles) room(limit int64) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return max(limit-h.bytes, 0)
}

// keep stores a result and returns what the program gets instead:
// {"handle", "tool", "type", "size"}.
func (h *handles) keep(tool string, res json.RawMessage, limit int64) (json.RawMessage, *Envelope) {
	d := &handleData{tool: tool, kind: "json", data: res}
	if len(res) > 0 && res[0] == '"' {
		var text string
		if err := json.Unmarshal(res, &text); err == nil {
			d.kind, d.data = "text", []byte(text)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.bytes+int64(len(res)) > limit {
		return nil, Errorf(KindLimit, CodeToolResultTooLarge, "the result of %s (%s) does not fit in what is left of the %s limit for results kept as handles", tool, formatBytes(int64(len(res))), formatBytes(limit)).WithHints(
			"ask the tool for less, or ask for a higher tool_handles limit")
	}
	if h.held == nil {
		h.held = map[string]*handleData{}
	}
	if h.tag == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		h.tag = hex.EncodeToString(b[:])
	}
	h.next++
	id := "h" + strconv.Itoa(h.next) + "-" + h.tag
	h.held[id] = d
	h.bytes += int64(len(res))
	out, err := json.Marshal(map[string]any{"handle": id, "tool": tool, "type": d.kind, "size": len(d.data)})
	if err != nil {
		return nil, Errorf(KindInternal, CodeToolFailed, "%v", err)
	}
	return out, nil
}

// read returns a page of a handle, at most length bytes from offset (a
// page never ends inside a UTF-8 sequence, nor is larger than pageMax):
// {"data", "offset", "next", "size", "eof"}.
func (h *handles) read(id string, offset, length int64, pageMax int) (json.RawMessage, *Envelope) {
	h.mu.Lock()
	d := h.held[id]
	h.mu.Unlock()
	if d == nil {
		return nil, Errorf(KindTool, CodeNoSuchHandle, "no handle %q in this execution", id).WithHints(
			"read a handle that a call of this execution returned: handles go when the execution ends")
	}
	size := int64(len(d.data))
	if offset > size {
		return nil, Errorf(KindValidation, CodeInvalidRequest, "offset %d is past the end of handle %s (%d bytes)", offset, id, size).WithHints(
			fmt.Sprintf("read from an offset between 0 and %d", size))
	}
	// Room for the JSON escapes of the page: at most 6 bytes each.
	pageCap := max(int64(pageMax)/6, 4)
	if length == 0 || length > pageCap {
		length = pageCap
	}
	end := min(offset+length, size)
	// Whole characters only: move back to a character's start, unless
	// that leaves nothing (a page at least takes one character).
	for end < size && end > offset && !utf8.RuneStart(d.data[end]) {
		end--
	}
	if end == offset && end < size {
		for end < size && (end == offset || !utf8.RuneStart(d.data[end])) {
			end++
		}
	}
	out, err := json.Marshal(map[string]any{"data": string(d.data[offset:end]), "offset": offset, "next": end, "size": size, "eof": end == size})
	if err != nil {
		return nil, Errorf(KindInternal, CodeToolFailed, "%v", err)
	}
	return out, nil
}
