// Package upstream is codecell's MCP client: upstream MCP servers, declared
// in the "mcpServers" shape of Claude Desktop, Claude Code and Cursor,
// become tool sources whose tools sandboxed programs call as
// "server.tool". It uses the official Go SDK
// (github.com/modelcontextprotocol/go-sdk). Package mcp is the other
// direction: codecell as an MCP server.
//
// # Upstream servers
//
// An Upstream is one server of Servers, as a codecell.StartingSource. A
// stdio server is started on first use (or at once, by Start, in the
// background; Status says how far it got, Watch hears of changes) with an
// environment of PATH, HOME and LANG plus its own "env" (never all of
// codecell's), in a process group of its own; a URL server is reached over
// streamable HTTP with its "headers". "start_timeout" bounds its start.
//
// The SDK asks a server with server/discover before initialize; a server
// that ignores methods it does not know gets initialize after five seconds,
// not after its start timeout. A URL server's redirects are followed within
// the configured URL's origin only: its headers hold secrets for that
// origin. A message over 16 MiB (a stdio line, an HTTP event) ends the
// session, and a write to a stdio server that stopped reading ends with
// its call's context.
//
// # What a call returns
//
// A call of an upstream tool returns to the program, as JSON:
//
//   - the result's structuredContent, when the server sent one;
//   - otherwise, when every content item is text, the texts joined with
//     "\n", as one JSON string (a tool that answers "5" returns "5", a
//     string: the program parses it if it wants a number);
//   - otherwise the content array as MCP writes it: images and audio as
//     {"type": "image", "mimeType": ..., "data": <base64>}, resources as
//     {"type": "resource", "resource": {...}} or {"type": "resource_link",
//     ...}.
//   - null when the content is empty and there is no structuredContent.
//
// Numbers in structuredContent pass through float64 (the SDK decodes it
// so): integers beyond 2^53 lose precision.
//
// # Errors
//
// A failed call returns a *codecell.Envelope:
//
//   - the tool reported an error (isError: true): kind "tool",
//     TOOL_FAILED, the message is the result's text (cut at 4 KiB), not
//     retryable;
//   - the server answered with a JSON-RPC error (unknown tool, invalid
//     params, internal error): kind "upstream", UPSTREAM_ERROR, the message
//     holds the server's message and code; retryable only for an internal
//     error (-32603);
//   - the server cannot be started, the connection broke, or the server
//     crashed during the call: kind "upstream", UPSTREAM_UNAVAILABLE,
//     retryable, with the server's exit status and the end of its stderr
//     when there are some. The session is dropped, and the next call starts
//     the server again. A config that cannot work (an unset ${VAR}, a
//     command that does not exist) gives the same code, not retryable;
//   - the call's context ended (the host's per-call deadline, or
//     DefaultCallTimeout when it has none): kind "timeout", TOOL_TIMEOUT,
//     retryable. The SDK sends notifications/cancelled. The session is
//     kept, because other calls may be running on it and a slow tool is not
//     a broken server; instead the server is pinged, and if it does not
//     answer within five seconds it is hung, and dropped as above;
//   - params that are not a JSON object: kind "validation",
//     TOOL_BAD_PARAMS.
//
// A call is sent again, once, on a new session only when the SDK says it
// did not reach the tool: the session was already closed
// (ErrConnectionClosed), or an HTTP server that restarted did not know it
// (ErrSessionMissing). Listing tools is retried once after any loss.
//
// Tool names are the server's own, unchanged; the Toolbox puts the
// server's name and a '.' in front.
package upstream
