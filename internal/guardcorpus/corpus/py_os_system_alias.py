# guard: {"policy": {"block": ["process"]}, "expect": "static", "rule": "process.system", "at": [3, 7]}
import os as o
run = o.system
run("id")
