# guard: {"policy": {"block": ["dynamic_eval"]}, "expect": "static", "rule": "dynamic_eval.builtins", "at": [3, 1]}
import builtins
builtins.__dict__["ev" + "al"]("1 + 1")
