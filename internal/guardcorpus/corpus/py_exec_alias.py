# guard: {"policy": {"block": ["dynamic_eval"]}, "expect": "static", "rule": "dynamic_eval.exec", "at": [2, 7]}
run = exec
run("x = 1")
