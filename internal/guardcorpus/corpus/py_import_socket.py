# guard: {"policy": {"block": ["low_level_network"]}, "expect": "static", "rule": "low_level_network.import", "at": [2, 8]}
import socket
socket.create_connection(("127.0.0.1", 1))
