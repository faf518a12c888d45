#!/bin/sh
# Builds umd.conf(5): the hand-written page HEADER, then one entry a key made from the sample
# config CONF (blocks of "# help" lines ending in "#key = default"), fed through SCDOC.
# Usage: conf2scd.sh HEADER CONF SCDOC OUTPUT
set -eu
header=$1 conf=$2 scdoc=$3 out=$4

keys() {
	awk '
	function esc(s) { gsub(/\\/, "\\\\", s); gsub(/_/, "\\_", s); gsub(/\*/, "\\*", s); return s }
	/^\[umd\]$/ { inside = 1; next }
	!inside { next }
	/^$/ { help = ""; next }
	/^# / { help = help (help == "" ? "" : " ") substr($0, 3); next }
	/^#[a-z0-9_]+ = ?/ {
		line = substr($0, 2)
		eq = index(line, " = ")
		key = substr(line, 1, eq - 1)
		def = substr(line, eq + 3)
		printf "*%s* = %s\n\t%s\n\n", esc(key), def == "" ? "(empty)" : "_" esc(def) "_", esc(help)
		n++
		next
	}
	{ print "conf2scd: unexpected line " NR ": " $0 > "/dev/stderr"; exit 1 }
	END { if (n == 0) { print "conf2scd: no keys found" > "/dev/stderr"; exit 1 } }
	' "$conf"
}

{
	cat "$header"
	keys
} | "$scdoc" >"$out"
