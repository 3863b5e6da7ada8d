# guard: {"policy": {"block": ["network"]}, "expect": "static", "rule": "network.import", "at": [3, 8]}
import json
import urllib.request
urllib.request.urlopen("http://127.0.0.1:1/")
