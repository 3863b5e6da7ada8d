# guard: {"policy": {"block": ["process"]}, "expect": "runtime", "stops": "import hook: `SANDBOX_MODULE_BLOCKED`"}
import importlib
mod = importlib.import_module("sub" + "process")
mod.run(["id"])
