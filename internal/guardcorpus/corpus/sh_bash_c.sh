# guard: {"policy": {"block": ["network"]}, "expect": "static", "rule": "network.curl", "at": [2, 9]}
bash -c 'curl -s http://127.0.0.1:$PORT/'
