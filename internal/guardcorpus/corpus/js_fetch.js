// guard: {"policy": {"block": ["network"]}, "expect": "static", "rule": "network.fetch", "at": [2, 19]}
const res = await fetch("http://127.0.0.1:" + process.env.PORT);
await res.text();
