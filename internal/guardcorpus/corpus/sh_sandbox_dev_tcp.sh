# guard: {"policy": {"block": ["network"]}, "expect": "sandbox", "stops": "the empty network namespace", "stdout": "stopped"}
# /dev/tcp is a socket (low_level_network), which this policy allows.
if (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null; then echo connected; else echo stopped; fi
