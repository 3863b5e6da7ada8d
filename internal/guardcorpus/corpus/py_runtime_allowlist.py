# guard: {"policy": {"allowed_imports": ["json", "math"]}, "expect": "runtime", "stops": "import hook: `SANDBOX_MODULE_BLOCKED`"}
import json
print(json.dumps({"ok": True}))
os = __import__("o" + "s")
