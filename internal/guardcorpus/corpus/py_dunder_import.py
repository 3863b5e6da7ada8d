# guard: {"policy": {"block": ["module_loading"]}, "expect": "static", "rule": "module_loading.__import__", "at": [2, 1]}
__import__("o" + "s")
