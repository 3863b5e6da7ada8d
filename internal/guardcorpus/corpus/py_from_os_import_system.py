# guard: {"policy": {"block": ["process"]}, "expect": "static", "rule": "process.system", "at": [2, 16]}
from os import system as s
s("id")
