# guard: {"policy": {"block": ["dynamic_eval"]}, "expect": "static", "rule": "dynamic_eval.getattr", "at": [2, 1]}
getattr(__builtins__, "ev" + "al")("1 + 1")
