// guard: {"policy": {"block": ["dynamic_eval"]}, "expect": "static", "rule": "dynamic_eval.eval", "at": [2, 5]}
(0, eval)("1 + 1");
