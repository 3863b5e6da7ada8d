# guard: {"policy": {"block": ["network"]}, "expect": "static", "rule": "network.import", "at": [2, 20]}
from urllib import request as r
r.urlopen("http://127.0.0.1:1/")
