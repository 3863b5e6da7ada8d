# guard: {"policy": {"block": ["dynamic_eval"]}, "expect": "static", "rule": "dynamic_eval.eval", "at": [3, 1]}
expr = "6 * 7"
eval(expr)
