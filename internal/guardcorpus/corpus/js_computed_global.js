// guard: {"policy": {"block": ["dynamic_eval"]}, "expect": "static", "rule": "dynamic_eval.computed_global", "at": [3, 1]}
const k = String.fromCharCode(101, 118, 97, 108);
globalThis[k]("1");
