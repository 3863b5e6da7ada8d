# guard: {"policy": {"block": ["low_level_network"]}, "expect": "sandbox", "stops": "the empty network namespace", "value": "stopped"}
# asyncio imports socket itself; reached through it, socket escapes the import hook, and the sandbox has no network.
import asyncio, os
sock = asyncio.base_events.socket
try:
    sock.create_connection(("127.0.0.1", int(os.environ["PORT"])), timeout=5).close()
    outcome = "connected"
except OSError:
    outcome = "stopped"
outcome
