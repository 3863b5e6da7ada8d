# guard: {"policy": {"block": ["network"]}, "expect": "static", "rule": "network.wget", "at": [2, 15]}
echo "page: $(wget -qO- http://127.0.0.1:$PORT/)"
