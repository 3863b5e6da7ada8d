// guard: {"policy": {"block": ["module_loading"]}, "expect": "static", "rule": "module_loading.process_binding", "at": [2, 1]}
process.binding("spawn_sync");
