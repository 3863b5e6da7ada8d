# guard: {"policy": {"block": ["process"]}, "expect": "static", "rule": "process.import", "at": [2, 1]}
from subprocess import run as r
r(["id"])
