// guard: {"policy": {"block": ["module_loading", "process"]}, "expect": "static", "rule": "module_loading.computed_name", "at": [3, 1]}
const name = ["child", "process"].join("_");
require(name);
