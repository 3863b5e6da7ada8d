// guard: {"policy": {"block": ["dynamic_eval"]}, "expect": "static", "rule": "dynamic_eval.string_timer", "at": [2, 1]}
setTimeout("console.log(1)", 1);
