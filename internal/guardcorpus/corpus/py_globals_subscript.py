# guard: {"policy": {"block": ["dynamic_eval"]}, "expect": "static", "rule": "dynamic_eval.globals", "at": [2, 1]}
globals()["__builtins__"]
