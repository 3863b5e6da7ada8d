# guard: {"policy": {"block": ["network"]}, "expect": "sandbox", "stops": "the empty network namespace", "stdout": "stopped"}
# Code for another interpreter, inline, is not parsed by the shell check.
/usr/bin/python3 -c 'import os, urllib.request
try:
    urllib.request.urlopen("http://127.0.0.1:%s/" % os.environ["PORT"], timeout=5); print("connected")
except Exception:
    print("stopped")'
