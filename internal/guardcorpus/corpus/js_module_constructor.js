// guard: {"policy": {"block": ["module_loading"]}, "expect": "static", "rule": "module_loading.module_internals", "at": [2, 1]}
module.constructor._load("fs");
