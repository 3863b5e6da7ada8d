# guard: {"policy": {"block": ["network"], "allowed_commands": ["echo *"]}, "expect": "allowed", "stdout": "\"text\":\"from shell\""}
codecell-tool t.echo '{"text": "from shell"}'
echo
