# guard: {"policy": {"block": ["network"]}, "expect": "static", "rule": "network.wget", "at": [2, 24]}
env LC_ALL=C nice -n 5 wget -q http://127.0.0.1:$PORT/
