# guard: {"policy": {"block": ["network"]}, "expect": "static", "rule": "network.fetch", "at": [3, 9]}
# JavaScript run by node -e is checked by the JavaScript pass.
node -e 'fetch("http://127.0.0.1:" + process.env.PORT).then(() => console.log("connected"))'
