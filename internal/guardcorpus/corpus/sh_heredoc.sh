# guard: {"policy": {"block": ["filesystem"]}, "expect": "static", "rule": "filesystem.rm", "at": [3, 3]}
cat <<END
$(rm -f notes.txt)
END
