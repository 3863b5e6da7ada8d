// guard: {"policy": {"block": ["dynamic_eval"]}, "expect": "static", "rule": "dynamic_eval.eval", "at": [3, 1]}
const run = eval;
run("40 + 2");
