#!/bin/sh
# SPDX-License-Identifier: MIT
# What the library adds to one request: nops through the library on
# io_uring against the same loop of IORING_OP_NOP on raw liburing, at
# batch 1 and 32, PAIRS pairs of RUNTIME seconds each, alternated (the
# order flips every pair), pinned to CPU 1.  Prints CPU ns per request,
# medians, and the difference paired run by run.
#   bench/nop-cost.sh [BUILD-DIR]      (default build)
set -eu
cd "$(dirname "$0")/.."
bench=${1:-build}/bench/afio-bench
pairs=${PAIRS:-10}
runtime=${RUNTIME:-1}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for qd in 1 32; do
	for i in $(seq "$pairs"); do
		lib="--backend io_uring" raw="--raw io_uring"
		for how in "$lib" "$raw"; do
			[ $((i % 2)) -eq 0 ] && { [ "$how" = "$lib" ] && how=$raw || how=$lib; }
			echo "$qd $i $(taskset -c 1 "$bench" $how --op nop --qd "$qd" \
				--runtime "$runtime" --json)" >>"$out"
		done
	done
done
python3 - "$out" <<'PY'
import json, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    qd, i, js = line.split(" ", 2)
    r = json.loads(js)
    side = "raw" if r["backend"].startswith("raw-") else "lib"
    runs.setdefault((int(qd), int(i)), {})[side] = r["cpu_ns_per_req"]
print("batch  library ns  raw ns  library - raw: median (min-max), paired")
for qd in sorted({q for q, _ in runs}):
    pairs = [p for (q, _), p in sorted(runs.items()) if q == qd and len(p) == 2]
    d = [p["lib"] - p["raw"] for p in pairs]
    print("%5d  %10.1f  %6.1f  %+.1f (%+.1f to %+.1f), %d pairs" % (
        qd, statistics.median(p["lib"] for p in pairs),
        statistics.median(p["raw"] for p in pairs), statistics.median(d), min(d), max(d),
        len(pairs)))
PY
