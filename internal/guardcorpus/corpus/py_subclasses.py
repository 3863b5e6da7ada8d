# guard: {"policy": {"block": ["dynamic_eval"]}, "expect": "static", "rule": "dynamic_eval.introspection", "at": [2, 1]}
().__class__.__base__.__subclasses__()
