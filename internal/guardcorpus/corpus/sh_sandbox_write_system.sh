# guard: {"policy": {"block": ["network"]}, "expect": "sandbox", "stops": "the read-only system view", "stdout": "stopped"}
if [ -w /usr/bin ] || [ -w /etc/passwd ]; then echo writable; else echo stopped; fi
