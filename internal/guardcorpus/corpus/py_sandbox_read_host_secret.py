# guard: {"policy": {"block": ["process"]}, "expect": "sandbox", "stops": "the sandbox's own /proc and empty /root", "value": "stopped"}
import os
seen = []
for path in ("/root/.bash_history", "/proc/1/environ", "/etc/shadow"):
    try:
        with open(path, "rb") as f:
            seen.append(path if f.read(1) else None)
    except OSError:
        pass
"stopped" if not [p for p in seen if p] else seen
