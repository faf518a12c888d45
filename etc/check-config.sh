#!/bin/sh
# Tests for the shipped etc/umd.conf, run by meson (suite unit).
#   check-config.sh sample UMD CONF: the file is exactly `umd --print-config` of the defaults, so the sample
#     documents every key with the default the parser really uses.
#   check-config.sh models UMD CONF: the sample gpu-models.conf parses, its examples too, and a bad
#     one is refused.
#   check-config.sh parse UMD CONF: umd accepts the file as shipped, and with every key
#     uncommented (each documented default parses through the file reader); a file with an
#     unknown key is refused with exit 2, so a check-config that accepts anything fails here.
set -eu
mode=$1 umd=$2 conf=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

case $mode in
sample)
	# --print-config prints the effective configuration: read no installed file (an empty
	# one: config files must be regular files) and no $STATE_DIRECTORY, so what is printed is
	# the defaults alone.
	: >"$tmp/empty.conf"
	env -u STATE_DIRECTORY "$umd" --config "$tmp/empty.conf" --print-config >"$tmp/printed"
	if ! diff -u "$conf" "$tmp/printed"; then
		echo "etc/umd.conf differs from 'umd --print-config' (above): regenerate it with" >&2
		echo "  umd --print-config > etc/umd.conf" >&2
		exit 1
	fi
	;;
parse)
	"$umd" --config "$conf" --check-config
	sed -n 's/^#\([a-z0-9_]* = \)/\1/p' "$conf" >"$tmp/keys"
	[ -s "$tmp/keys" ] || { echo "no '#key = value' lines in $conf" >&2; exit 1; }
	{ echo '[umd]'; cat "$tmp/keys"; } >"$tmp/uncommented.conf"
	"$umd" --config "$tmp/uncommented.conf" --check-config
	printf '[umd]\nno_such_key = 1\n' >"$tmp/bad.conf"
	rc=0
	"$umd" --config "$tmp/bad.conf" --check-config 2>"$tmp/err" || rc=$?
	if [ "$rc" -ne 2 ]; then
		echo "an unknown key gave exit $rc, not 2" >&2
		exit 1
	fi
	grep -q no_such_key "$tmp/err" || { echo "message does not name the key:" >&2; cat "$tmp/err" >&2; exit 1; }
	;;
models)
	# The sample gpu-models.conf parses as shipped and with its examples uncommented; a bad
	# figure in it is refused with exit 2 naming the line.
	: >"$tmp/empty.conf"
	"$umd" --config "$tmp/empty.conf" --gpu-models-file "$conf" --check-config
	sed 's/^#\([[a-z_]\)/\1/' "$conf" >"$tmp/models.conf"
	grep -q '^\[' "$tmp/models.conf" || { echo "no example sections in $conf" >&2; exit 1; }
	"$umd" --config "$tmp/empty.conf" --gpu-models-file "$tmp/models.conf" --check-config
	printf '[NVIDIA H200]\nmemory_gbps = fast\n' >"$tmp/bad.conf"
	rc=0
	"$umd" --config "$tmp/empty.conf" --gpu-models-file "$tmp/bad.conf" --check-config \
		2>"$tmp/err" || rc=$?
	if [ "$rc" -ne 2 ]; then
		echo "a bad GPU model file gave exit $rc, not 2" >&2
		exit 1
	fi
	grep -q 'bad.conf:2' "$tmp/err" || { echo "message does not name the line:" >&2; cat "$tmp/err" >&2; exit 1; }
	;;
*)
	echo "usage: $0 sample|parse|models UMD CONF" >&2
	exit 2
	;;
esac
