# guard: {"policy": {"allowed_commands": ["ls", "grep *", "wc -l"]}, "expect": "static", "rule": "commands.not_allowed", "at": [3, 1]}
ls | grep -c x | wc -l
rm -f notes.txt
