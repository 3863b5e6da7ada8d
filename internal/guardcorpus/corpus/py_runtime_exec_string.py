# guard: {"policy": {"block": ["process"]}, "expect": "runtime", "stops": "import hook: `SANDBOX_MODULE_BLOCKED`"}
# dynamic_eval is allowed: the code is a string, and the import hook stops the import inside it.
exec("import sub" + "process")
