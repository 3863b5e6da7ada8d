# guard: {"policy": {"blocked_imports": ["pickle"]}, "expect": "static", "rule": "imports.blocked", "at": [2, 1]}
from pickle import loads
