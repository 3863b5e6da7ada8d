# guard: {"policy": {"block": ["module_loading"]}, "expect": "static", "rule": "module_loading.source", "at": [2, 1]}
. ./helpers.sh
