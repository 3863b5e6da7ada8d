# guard: {"policy": {"block": ["low_level_network"]}, "expect": "static", "rule": "low_level_network.dev_tcp", "at": [2, 6]}
exec 3<>/dev/tcp/127.0.0.1/$PORT
