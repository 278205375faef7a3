#!/bin/sh
# SPDX-License-Identifier: MIT
# What the library adds to one request, in instructions, which unlike
# nanoseconds do not change with this machine's day: afio_nop() through
# the library on io_uring and the same loop on raw liburing, each run
# twice under callgrind (RUNTIME_SHORT and RUNTIME_LONG seconds) so that
# start-up and exit cancel out: (instructions of the long run - of the
# short) / (nops of the long - of the short), user space only.
#   bench/nop-instructions.sh [BUILD-DIR]      (default build; QD=32)
set -eu
cd "$(dirname "$0")/.."
bench=${1:-build}/bench/afio-bench
qd=${QD:-32}
short=${RUNTIME_SHORT:-0.3}
long=${RUNTIME_LONG:-1.0}
command -v valgrind >/dev/null || { echo "nop-instructions: needs valgrind" >&2; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# instructions and nops of one run: "INSTR NOPS"
run() {
	valgrind --tool=callgrind --callgrind-out-file="$dir/cg" "$bench" "$@" --op nop \
		--qd "$qd" --runtime "$rt" --json >"$dir/json" 2>/dev/null
	echo "$(sed -n 's/^summary: //p' "$dir/cg") \
$(sed -n 's/.*"ios": *\([0-9]*\).*/\1/p' "$dir/json")"
}

per_nop() {
	rt=$short; a=$(run "$@")
	rt=$long; b=$(run "$@")
	echo "$a $b" | awk '{ printf "%.1f", ($3 - $1) / ($4 - $2) }'
}

lib=$(per_nop --backend io_uring)
raw=$(per_nop --raw io_uring)
echo "instructions per nop at batch $qd: library $lib, raw liburing $raw," \
	"difference $(echo "$lib $raw" | awk '{ printf "%+.1f", $1 - $2 }')"
