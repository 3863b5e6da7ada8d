// guard: {"policy": {"block": ["dynamic_eval"]}, "expect": "static", "rule": "dynamic_eval.function_constructor", "at": [2, 15]}
const f = new Function("return 42");
f();
