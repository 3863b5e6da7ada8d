# guard: {"policy": {"block": ["network"]}, "expect": "static", "rule": "network.curl", "at": [3, 1]}
echo fetching
curl -s http://127.0.0.1:$PORT/
