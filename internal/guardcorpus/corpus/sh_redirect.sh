# guard: {"policy": {"block": ["filesystem"]}, "expect": "static", "rule": "filesystem.redirect", "at": [3, 9]}
echo quiet >/dev/null 2>&1
echo hi > out.txt
