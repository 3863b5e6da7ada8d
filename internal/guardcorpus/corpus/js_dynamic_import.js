// guard: {"policy": {"block": ["filesystem"]}, "expect": "static", "rule": "filesystem.module", "at": [2, 18]}
const fs = await import("node:fs");
fs.readdirSync(".");
