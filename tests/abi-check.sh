#!/bin/sh
# The exported symbols are exactly the functions the header declares, each
# named in the version script and carrying its version there.
#   abi-check.sh include/asyncfio.h lib/asyncfio.map libasyncfio.so
set -eu
export LC_ALL=C
header="$1" map="$2" so="$3"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

sed -n 's/^AFIO_API [^(]*[ *]\(afio_[a-z0-9_]*\)(.*/\1/p' "$header" | sort -u >"$tmp/header"
sed -n 's/^[[:space:]]*\(afio_[a-z0-9_]*\);$/\1/p' "$map" | sort >"$tmp/map"
nm -D --defined-only "$so" | awk '$2 != "A" { print $3 }' | sort >"$tmp/versioned"
sed "s/@.*//" "$tmp/versioned" | sort >"$tmp/exported"

fail=0
if ! cmp -s "$tmp/header" "$tmp/map"; then
	echo "declared in $header but not in $map (<), or the other way (>):"
	diff "$tmp/header" "$tmp/map" | grep '^[<>]' || true
	fail=1
fi
if ! cmp -s "$tmp/map" "$tmp/exported"; then
	echo "named in $map but not exported (<), or exported but not named (>):"
	diff "$tmp/map" "$tmp/exported" | grep '^[<>]' || true
	fail=1
fi
unversioned="$(grep -v '@@ASYNCFIO_' "$tmp/versioned" || true)"
if [ -n "$unversioned" ]; then
	echo "exported without a version: $unversioned"
	fail=1
fi
if grep -q 'AFIO_BACKEND_MAX' "$header"; then
	echo "$header: AFIO_BACKEND_MAX is an internal limit"
	fail=1
fi
[ "$fail" = 0 ] && echo "abi: $(wc -l <"$tmp/map") symbols, each declared, named and versioned"
exit "$fail"
