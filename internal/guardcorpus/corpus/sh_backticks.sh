# guard: {"policy": {"block": ["network"]}, "expect": "static", "rule": "network.curl", "at": [2, 4]}
x=`curl -s http://127.0.0.1:$PORT/`
echo "$x"
