# Code mode: one program calls several tools, at once, and returns what it
# made of them. Run it with the example configuration, which declares the
# reference MCP server "everything" (it needs npx and the npm registry):
#
#   codecell run --config examples/codecell.json examples/codemode.py
import asyncio

echo, total, weather = await asyncio.gather(
    call_tool("everything.echo", {"message": "hello"}),
    call_tool("everything.get-sum", {"a": 20, "b": 22}),
    call_tool("everything.get-structured-content", {"location": "Chicago"}),
)

try:
    await call_tool("everything.get-env", {})
except ToolError as e:  # denied by the configuration's tool policy
    denied = e.envelope["error_code"]

{"echo": echo, "sum": total, "chicago": weather, "get-env": denied}
