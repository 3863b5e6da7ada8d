// guard: {"policy": {"block": ["dynamic_eval"]}, "expect": "static", "rule": "dynamic_eval.eval", "at": [2, 1]}
globalThis['ev' + 'al']("1 + 1");
