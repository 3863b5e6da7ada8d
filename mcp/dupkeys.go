package mcp

import (
	"encoding/json"
	"fmt"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/jsonkeys"
)

// A message, or a tool's arguments, that gives a key twice is refused: the
// SDK and encoding/json keep the last of the two, and a gateway or an audit
// log in front of codecell may have read the first ({"name": "read_file",
// "name": "write_file"}, two "code" keys).

// duplicateInMessage returns the JSON-RPC error response for a message
// that gives a key twice outside a tool call's arguments, or nil. The
// arguments are the tool's to check (duplicateArguments), so that the
// model reads why in the call's result and can send them again.
func duplicateInMessage(msg []byte) []byte {
	d, ok := jsonkeys.IsDuplicate(jsonkeys.CheckFolded(msg, "params", "arguments"))
	if !ok {
		return nil
	}
	var id json.RawMessage
	if d.Path != "" || d.Key != "id" {
		// Which of two ids is meant is what cannot be told.
		id = validID(idOf(msg))
	}
	also := ""
	if d.Folded {
		also = ", in spellings that differ in case only"
	}
	return errorReply(-32600, id, fmt.Sprintf("invalid request: the message gives the key %q twice in %s%s; give each key once", d.Key, d.Where(), also))
}

// duplicateArguments is the refusal of a tool call whose arguments give a
// key twice, or nil.
func duplicateArguments(tool string, args json.RawMessage) *codecell.Envelope {
	// Two spellings that differ in case only are the same key to the
	// decoder that reads the arguments into a struct ("code", "CODE").
	d, ok := jsonkeys.IsDuplicate(jsonkeys.CheckFolded(args))
	if !ok {
		return nil
	}
	where := "the arguments"
	if d.Path != "" {
		where = "the arguments' object at " + d.Path
	}
	also := ""
	if d.Folded {
		also = ", in spellings that differ in case only"
	}
	env := codecell.Errorf(codecell.KindValidation, codecell.CodeInvalidRequest, "%s's arguments give the key %q twice in %s%s", tool, d.Key, where, also).WithHints(
		"give each key once, with the value you mean, and call again")
	env.Meta = map[string]any{"key": d.Key, "path": d.Path}
	return env
}
