# guard: {"policy": {"block": ["dynamic_eval"]}, "expect": "static", "rule": "dynamic_eval.eval", "at": [3, 1]}
cmd="echo hi"
eval "$cmd"
