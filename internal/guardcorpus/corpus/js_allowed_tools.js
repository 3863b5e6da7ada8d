// guard: {"policy": {"block": ["dynamic_eval", "filesystem", "low_level_network", "module_loading", "network", "process"]}, "expect": "allowed", "value": ["a", "b"]}
const one = await tools.t.echo({ text: "a" });
const two = await callTool("t.echo", { text: "b" });
globalThis.console.log("done");
return [one.text, two.text];
