# guard: {"policy": {"block": ["dynamic_eval", "filesystem", "low_level_network", "module_loading", "network", "process"]}, "expect": "allowed", "stdout": "total 55 lines 3"}
total=0
for i in $(seq 1 10); do total=$((total + i)); done
lines=$(printf 'a\nb\nc\n' | grep -c .)
echo "total $total lines $lines" >/dev/null
echo "total $total lines $lines"
