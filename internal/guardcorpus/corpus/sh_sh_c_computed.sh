# guard: {"policy": {"block": ["dynamic_eval"]}, "expect": "static", "rule": "dynamic_eval.shell_c", "at": [3, 7]}
X="echo hi"
sh -c "$X"
