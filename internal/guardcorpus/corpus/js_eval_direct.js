// guard: {"policy": {"block": ["dynamic_eval"]}, "expect": "static", "rule": "dynamic_eval.eval", "at": [3, 1]}
const a = 2;
eval("a * 21");
