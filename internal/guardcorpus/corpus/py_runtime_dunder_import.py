# guard: {"policy": {"block": ["low_level_network"]}, "expect": "runtime", "stops": "import hook: `SANDBOX_MODULE_BLOCKED`"}
# module_loading is allowed: the name is built at run time, and the import hook stops it.
name = "soc" + "ket"
s = __import__(name)
s.create_connection(("127.0.0.1", 1))
