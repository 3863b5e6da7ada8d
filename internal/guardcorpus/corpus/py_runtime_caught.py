# guard: {"policy": {"block": ["low_level_network"]}, "expect": "runtime", "stops": "import hook: an `ImportError` the program catches", "value": "went on without socket"}
try:
    __import__("soc" + "ket")
    outcome = "imported"
except ImportError:
    outcome = "went on without socket"
outcome
