# guard: {"policy": {"block": ["network"]}, "expect": "sandbox", "stops": "the read-only system view", "value": "stopped"}
import os
outcome = "writable" if os.access("/usr/bin", os.W_OK) or os.access("/etc/passwd", os.W_OK) else "stopped"
outcome
