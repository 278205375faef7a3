#!/bin/sh
# SPDX-License-Identifier: MIT
# Lint the manual pages: every page must format without a single warning,
# its .TH line must match its file name, and every .so page must point at a
# page that exists; tables go through tbl, as man(1) would put them.
# Usage: man-check.sh [man-directory]
# Exits 77 (skipped, for meson test) when no formatter is installed.
set -u

dir=${1:-$(dirname "$0")/../man}

if command -v groff >/dev/null 2>&1; then
	lint() { groff -t -man -Tutf8 -ww -z "$1" 2>&1; }
elif command -v mandoc >/dev/null 2>&1; then
	lint() { mandoc -T lint -W warning "$1" 2>&1; }
else
	echo "man-check: neither groff nor mandoc is installed (Debian: groff-base)"
	exit 77
fi

fail=0
pages=0
for page in "$dir"/*.[1-8]; do
	[ -f "$page" ] || continue
	pages=$((pages + 1))
	file=${page##*/}
	name=${file%.*}
	section=${file##*.}
	first=$(sed -n 1p "$page")

	case $first in
	.so\ *)
		target=${first#.so }
		if [ "$(wc -l < "$page")" -ne 1 ]; then
			echo "$page: a .so page must hold only the .so line"
			fail=1
		fi
		case $target in
		man[1-8]/*) ;;
		*)
			echo "$page: .so target '$target' is not manN/page.N"
			fail=1
			continue
			;;
		esac
		if [ ! -f "$dir/${target#*/}" ]; then
			echo "$page: .so target '$target' does not exist"
			fail=1
		elif sed -n 1p "$dir/${target#*/}" | grep -q '^\.so '; then
			echo "$page: .so target '$target' is itself a .so page"
			fail=1
		fi
		continue
		;;
	esac

	# man(7) escapes the hyphen in a page name; compare without it.
	th=$(grep -m1 '^\.TH ' "$page" | sed 's/\\-/-/g')
	set -- $th
	if [ "${2:-}" != "$name" ] || [ "${3:-}" != "$section" ]; then
		echo "$page: .TH says '${2:-} ${3:-}', expected '$name $section'"
		fail=1
	fi

	out=$(LC_ALL=C lint "$page")
	if [ -n "$out" ]; then
		echo "$page:"
		echo "$out"
		fail=1
	fi
done

if [ "$pages" -eq 0 ]; then
	echo "man-check: no pages in $dir"
	exit 1
fi
[ "$fail" -eq 0 ] && echo "man-check: $pages pages clean"
exit "$fail"
