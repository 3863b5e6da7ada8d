# guard: {"policy": {"block": ["dynamic_eval", "filesystem", "low_level_network", "module_loading", "network", "process"]}, "expect": "allowed", "value": ["a", "b"]}
one = await call_tool("t.echo", {"text": "a"})
two = call_tool_sync("t.echo", {"text": "b"}) if False else await call_tool("t.echo", {"text": "b"})
[one["text"], two["text"]]
