# guard: {"policy": {"block": ["filesystem"]}, "expect": "static", "rule": "filesystem.rm", "at": [2, 28]}
find . -name '*.tmp' -exec rm {} \;
