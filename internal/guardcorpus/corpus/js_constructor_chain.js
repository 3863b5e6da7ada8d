// guard: {"policy": {"block": ["dynamic_eval"]}, "expect": "static", "rule": "dynamic_eval.constructor", "at": [2, 12]}
(() => {}).constructor("return process")();
