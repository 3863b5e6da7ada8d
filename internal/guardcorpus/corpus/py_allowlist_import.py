# guard: {"policy": {"allowed_imports": ["json", "math"]}, "expect": "static", "rule": "imports.not_allowed", "at": [3, 8]}
import json, math
import os
