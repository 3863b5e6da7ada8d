#!/bin/sh
# codecell-tool NAME [JSON]: calls the host's tool NAME with JSON params (an
# object; {} when left out) and prints its result as JSON on stdout. When the
# call fails it prints the error envelope on stderr and exits 1.
#
# The tool channel is the program's file descriptor 4, shared by every shell
# of the program, and the host serves the calls on it at once. Each call is
# one request, with this process's id as its request id. Answers come back in
# the order calls finish, on the one descriptor, so the callers waiting take
# turns reading it, under a lock: the reader that finds its own answer takes
# it; an answer for another call is left in a file named after that call's
# id, where its caller looks each time it holds the lock. No caller ever
# reads a line another is reading, and none waits on anything but the lock
# and the descriptor.
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
id=$$
# Answers wait in a directory of this user's alone: where /tmp is shared
# with others (the local tier), no one else may plant an answer in it.
dir=${TMPDIR:-/tmp}/.codecell-tool-$channel
if ! mkdir -m 700 "$dir" 2>/dev/null; then
	if [ -L "$dir" ] || ! [ -d "$dir" ] || ! [ -O "$dir" ] || ! [ -w "$dir" ]; then
		echo "codecell-tool: $dir is not a directory of this user's own: set TMPDIR to a writable directory of yours" >&2
		exit 2
	fi
fi
# Without flock(1) there is no lock: calls made one at a time still work.
lock=flock
if ! command -v flock >/dev/null 2>&1; then
	lock=:
fi
# A file left by an earlier process of the same id, killed while it waited,
# is not this call's answer.
rm -f "$dir/$id"
# Writers take turns too: a long request may take several writes, and two
# requests' bytes must not mix.
exec 8>>"$dir/write"
$lock 8
printf '{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"%s","arguments":%s}}\n' "$id" "$1" "$params" >&4
exec 8>&-
exec 9>>"$dir/read"
while :; do
	$lock 9
	if [ -e "$dir/$id" ]; then
		IFS= read -r line <"$dir/$id"
		rm -f "$dir/$id"
		break
	fi
	if ! IFS= read -r line <&4; then
		echo "codecell-tool: the tool channel closed" >&2
		exit 1
	fi
	other=${line#'{"jsonrpc":"2.0","id":'}
	other=${other%%,*}
	if [ "$other" = "$id" ]; then
		break
	fi
	# Every request a shell sends has a number for its id, and the host
	# answers even a malformed one with that id; an answer with no such id
	# belongs to no caller waiting here.
	case "$other" in
	'' | *[!0-9]*) ;;
	*) printf '%s\n' "$line" >"$dir/$other" ;;
	esac
	[ "$lock" = : ] || flock -u 9
done
exec 9>&-
case "$line" in
'{"jsonrpc":"2.0","id":'"$id"',"result":'*)
	result=${line#'{"jsonrpc":"2.0","id":'"$id"',"result":'}
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
