# guard: {"policy": {"block": ["filesystem"]}, "expect": "static", "rule": "filesystem.open", "at": [2, 6]}
with open("notes.txt", "w") as f:
    f.write("x")
