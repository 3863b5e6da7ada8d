// Package tooldoc writes the tools a sandboxed program may call as a typed
// API for a model to read: TypeScript declarations, Python stubs, one-line
// signatures.
//
// The JSON Schemas of real MCP servers (draft-07 and 2020-12, from zod,
// pydantic and jsonschema-go) are read into one small type language first,
// so that both languages say the same of every tool. What a language cannot
// say becomes its "anything" type (unknown, Any), never a guess.
package tooldoc
