# guard: {"policy": {"block": ["module_loading"]}, "expect": "static", "rule": "module_loading.import", "at": [2, 8]}
import importlib
importlib.import_module("json")
