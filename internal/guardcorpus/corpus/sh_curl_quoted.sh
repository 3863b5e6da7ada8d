# guard: {"policy": {"block": ["network"]}, "expect": "static", "rule": "network.curl", "at": [2, 1]}
c"u"'rl' -s http://127.0.0.1:$PORT/
