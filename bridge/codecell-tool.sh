#!/bin/sh
# codecell-tool NAME [JSON]: calls the host's tool NAME with JSON params (an
# object; {} when left out) and prints its result as JSON on stdout. When the
# call fails it prints the error envelope on stderr and exits 1.
#
# The tool channel is the program's file descriptor 4. Calls from several
# shells at once take turns, under a lock of their own: the descriptor is
# shared by all of them, so a lock on it would exclude nothing.
set -u
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
	echo "usage: codecell-tool NAME [JSON-PARAMS]" >&2
	exit 2
fi
case "$1" in
'' | *[!A-Za-z0-9_.-]*)
	echo "codecell-tool: '$1' is not a tool name (letters, digits, '_', '-' and '.')" >&2
	exit 2
	;;
esac
channel=$(readlink /proc/self/fd/4 2>/dev/null | tr -cd 0-9)
if [ -z "$channel" ]; then
	echo "codecell-tool: there is no tool channel (descriptor 4): run this inside codecell" >&2
	exit 2
fi
params=${2-}
if [ -z "$params" ]; then
	params='{}'
fi
# One request is one line.
params=$(printf '%s' "$params" | tr '\n\r' '  ')
exec 9>>"${TMPDIR:-/tmp}/.codecell-tool-$channel.lock"
if command -v flock >/dev/null 2>&1; then
	flock 9
fi
printf '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"%s","arguments":%s}}\n' "$1" "$params" >&4
if ! IFS= read -r line <&4; then
	echo "codecell-tool: the tool channel closed" >&2
	exit 1
fi
exec 9>&-
case "$line" in
'{"jsonrpc":"2.0","id":1,"result":'*)
	result=${line#'{"jsonrpc":"2.0","id":1,"result":'}
	printf '%s\n' "${result%'}'}"
	;;
*'"data":'*)
	envelope=${line#*'"data":'}
	printf '%s\n' "${envelope%',"message":'*}" >&2
	exit 1
	;;
*)
	printf '%s\n' "$line" >&2
	exit 1
	;;
esac
