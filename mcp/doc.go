// Package mcp is codecell as a Model Context Protocol server: the execute
// and call_tool_chain tools, which run a program in the sandbox that may
// call the Engine's tools (code mode), and the tools a model uses to find
// those tools (search_tools, list_tools, tools_info,
// get_required_keys_for_tool); with sessions, the tools that reach a
// session's files (read_file, write_file, list_files, view_image). Serve
// it over stdio (Server.Run) or
// streamable HTTP (Server.HTTPHandler). It uses the official Go SDK
// (github.com/modelcontextprotocol/go-sdk).
//
// The files: server.go holds the Server and its SDK server (SDKServer),
// stdio.go the filter in front of the SDK's stdio transport, http.go the
// HTTP handler, execute.go the execute tools and their Results,
// discovery.go the tools that find tools, files.go the file tools and
// images.go the images a result or view_image shows. The other direction, codecell as
// an MCP client of upstream servers, is package mcp/upstream.
package mcp
