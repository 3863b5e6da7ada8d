# guard: {"policy": {"block": ["module_loading"]}, "expect": "static", "rule": "module_loading.sys_modules", "at": [3, 1]}
import sys
sys.modules["os"].getcwd()
