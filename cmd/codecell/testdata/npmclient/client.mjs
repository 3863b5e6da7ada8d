// client.mjs drives an MCP server with the official TypeScript SDK client,
// for codecell's tests (cmd/codecell/npmclient_test.go). It reads a plan as
// JSON from its first argument, or from stdin without one:
//
//   {"transport": {"type": "stdio", "command": "...", "args": [...], "env": {...}}
//              or {"type": "http", "url": "http://.../mcp", "token": "..."},
//    "timeout_ms": 60000,
//    "steps": [{"op": "listTools"}, {"op": "ping"},
//              {"op": "callTool", "name": "...", "arguments": {...}, "timeout_ms": 1000}],
//    "elicit": {"accept_if": "text"}}
//
// With elicit, the client declares elicitation and answers each request:
// accept when its message holds accept_if, else decline with a note. Each
// request it got is printed as {"op": "elicit", "message": ...}.
//
// and prints one JSON line per step, {"step": i, "op": ..., "ms": ..., "result": ...}
// or {..., "error": {"message": ..., "code": ...}} when the SDK throws (a
// protocol error, or the step's timeout, after which the SDK cancels the
// request), so that the Go test makes the assertions.
// The first line is the connection ({"op": "connect", ...}) and the last the
// close ({"op": "close", ...}: for stdio, how and when the server exited).
import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const plan = JSON.parse(process.argv[2] ?? readFileSync(0, "utf8"));
const timeout = plan.timeout_ms ?? 60000;
const print = (line) => process.stdout.write(JSON.stringify(line) + "\n");
const failure = (err) => ({ message: String(err?.message ?? err), code: err?.code ?? null });

function transportFor(spec) {
  if (spec.type === "stdio") {
    return new StdioClientTransport({ command: spec.command, args: spec.args ?? [], env: spec.env, stderr: "inherit" });
  }
  const headers = spec.token ? { Authorization: `Bearer ${spec.token}` } : {};
  return new StreamableHTTPClientTransport(new URL(spec.url), { requestInit: { headers } });
}

const transport = transportFor(plan.transport);
const client = new Client({ name: "codecell-npm-test-client", version: "1.0.0" },
  plan.elicit ? { capabilities: { elicitation: {} } } : undefined);
if (plan.elicit) {
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    const message = request.params.message;
    print({ op: "elicit", message });
    if (message.includes(plan.elicit.accept_if)) return { action: "accept", content: {} };
    return { action: "decline", content: { note: "declined by the test client" } };
  });
}
try {
  await client.connect(transport, { timeout });
} catch (err) {
  print({ op: "connect", error: failure(err) });
  process.exit(1);
}

// The server's exit, for stdio. The SDK keeps its child process private;
// the pinned version names it _process.
const child = transport._process;
const exited = child
  ? new Promise((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })))
  : Promise.resolve(null);

print({ op: "connect", server: client.getServerVersion(), capabilities: client.getServerCapabilities(),
  protocol: transport.protocolVersion ?? null, pid: transport.pid ?? null });

for (const [i, step] of (plan.steps ?? []).entries()) {
  const options = { timeout: step.timeout_ms ?? timeout };
  const start = Date.now();
  try {
    let result;
    switch (step.op) {
      case "listTools":
        result = await client.listTools({}, options);
        break;
      case "callTool":
        result = await client.callTool({ name: step.name, arguments: step.arguments ?? {} }, undefined, options);
        break;
      case "ping":
        result = await client.ping(options);
        break;
      default:
        throw new Error(`the plan has an unknown op ${JSON.stringify(step.op)}`);
    }
    print({ step: i, op: step.op, ms: Date.now() - start, result });
  } catch (err) {
    print({ step: i, op: step.op, ms: Date.now() - start, error: failure(err) });
  }
}

// For HTTP, end the session as a well-behaved client does (DELETE), then
// close. For stdio, closing ends the server's stdin; the SDK sends SIGTERM
// only if the server is still there 2 s later, which the test sees in
// close_ms and in the exit's signal.
const start = Date.now();
let closeError = null;
try {
  if (transport instanceof StreamableHTTPClientTransport) {
    await transport.terminateSession();
  }
  await client.close();
} catch (err) {
  closeError = failure(err);
}
print({ op: "close", close_ms: Date.now() - start, exit: await exited, error: closeError });
