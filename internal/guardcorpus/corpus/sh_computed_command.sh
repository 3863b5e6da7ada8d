# guard: {"policy": {"block": ["dynamic_eval"]}, "expect": "static", "rule": "dynamic_eval.computed_command", "at": [3, 1]}
c=ec
${c}ho hi
