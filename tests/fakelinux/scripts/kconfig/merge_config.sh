#!/bin/sh
# Fake merge_config.sh for kbisect's tests: merge Kconfig fragments into a .config.
# Usage: merge_config.sh [-m] [-O dir] base fragment...
# Later files override earlier settings of the same symbol (with the same
# "Value of ... is redefined" note as the real script); the result is written to
# dir/.config (or $KCONFIG_CONFIG, or ./.config). -m is accepted: the fake never runs make.
set -eu

output=.
while [ $# -gt 0 ]; do
	case $1 in
	-m) shift ;;
	-O)
		[ $# -ge 2 ] || { echo "merge_config.sh: -O needs a directory" >&2; exit 1; }
		if [ ! -d "$2" ]; then
			echo "output directory $2 does not exist" >&2
			exit 1
		fi
		output=${2%/}
		shift 2
		;;
	-*)
		echo "merge_config.sh: unsupported option $1 (the fake knows -m and -O)" >&2
		exit 1
		;;
	*) break ;;
	esac
done
if [ $# -lt 1 ]; then
	echo "usage: merge_config.sh [-m] [-O dir] base [fragment...]" >&2
	exit 1
fi
target=${KCONFIG_CONFIG:-$output/.config}

base=$1
if [ ! -r "$base" ]; then
	echo "The base file '$base' does not exist. Creating one..." >&2
	: >"$base"
fi
echo "Using $base as base"
for frag in "$@"; do
	[ "$frag" = "$base" ] && continue
	if [ ! -r "$frag" ]; then
		echo "The merge file '$frag' does not exist.  Exit." >&2
		exit 1
	fi
done

tmp=$(mktemp "${TMPDIR:-/tmp}/merge_config.XXXXXX")
trap 'rm -f "$tmp"' EXIT

# One record per assignment: "<order>\t<line>", keeping each symbol's last one at the
# place it was last set, as the real script does.
awk -v base="$base" -v records="$tmp" '
	FNR == 1 && FILENAME != base { print "Merging " FILENAME }
	/^CONFIG_[A-Za-z0-9_]+=/ { sym = substr($0, 1, index($0, "=") - 1) }
	/^# CONFIG_[A-Za-z0-9_]+ is not set$/ { sym = $2 }
	sym != "" {
		if ((sym in line) && line[sym] != $0 && FILENAME != base) {
			print "Value of " sym " is redefined by fragment " FILENAME ":"
			print "Previous  value: " line[sym]
			print "New value:       " $0
			print ""
		}
		line[sym] = $0; pos[sym] = ++n
	}
	{ sym = "" }
	END { for (s in line) printf "%d\t%s\n", pos[s], line[s] > records }
' "$@"

sort -n "$tmp" | cut -f 2- >"$target.merged"
mv "$target.merged" "$target"
echo "#"
echo "# merged configuration written to $target (needs make)"
echo "#"
