# guard: {"policy": {"block": ["process"]}, "expect": "static", "rule": "process.kill", "at": [3, 1]}
sleep 5 &
kill $!
