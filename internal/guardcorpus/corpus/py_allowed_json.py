# guard: {"policy": {"allowed_imports": ["json", "math", "asyncio"], "block": ["dynamic_eval", "filesystem", "low_level_network", "module_loading", "network", "process"]}, "expect": "allowed", "value": {"json": "{\"a\": 1}", "root": 3.0, "gathered": [1, 2]}}
import asyncio
import json
import math

async def one(n):
    await asyncio.sleep(0)
    return n

gathered = await asyncio.gather(one(1), one(2))
{"json": json.dumps({"a": 1}), "root": math.sqrt(9), "gathered": gathered}
