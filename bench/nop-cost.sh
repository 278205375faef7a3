#!/bin/sh
# SPDX-License-Identifier: MIT
# What the library adds to one request: nops through the library on
# io_uring against the same loop of IORING_OP_NOP on raw liburing, at
# batch 1 and 32, PAIRS rounds of RUNTIME seconds each, alternated (the
# order turns every round), pinned to CPU 1.  The library runs twice: as
# a server watching the eventfd gets it by default, and with
# AFIO_LAZY_EVENTFD (no eventfd read per round); raw liburing runs twice:
# as it is, and with an eventfd registered, which the kernel signals as
# the library's ring signals its own (what a program's epoll loop needs):
# the last difference is the library's user space alone.  The library
# runs a third time as a program that waits only inside afio_poll()
# (--wait poll) gets it, never asking for the eventfd, so that its ring
# has none registered, like raw liburing as it is.  Prints CPU ns
# per request, medians, and the differences paired run by run.
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
		set -- "lib --backend io_uring" "lazy --backend io_uring --lazy-eventfd" \
			"raw --raw io_uring" "rawev --raw io_uring-eventfd" \
			"inpoll --backend io_uring --wait poll"
		# the order turns every round
		for _ in $(seq $((i % 5))); do
			set -- "$2" "$3" "$4" "$5" "$1"
		done
		for how in "$@"; do
			side=${how%% *}
			echo "$qd $i $side $(taskset -c 1 "$bench" ${how#* } --op nop --qd "$qd" \
				--runtime "$runtime" --json)" >>"$out"
		done
	done
done
python3 - "$out" <<'PY'
import json, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    qd, i, side, js = line.split(" ", 3)
    runs.setdefault((int(qd), int(i)), {})[side] = json.loads(js)["cpu_ns_per_req"]
print("batch  library ns  lazy ns  in-poll ns  raw ns  raw+eventfd ns  library - raw"
      "           lazy - raw              library - raw+eventfd   in-poll - raw"
      "           (median, min to max, paired)")
for qd in sorted({q for q, _ in runs}):
    rounds = [p for (q, _), p in sorted(runs.items()) if q == qd and len(p) == 5]
    def diff(side, base="raw"):
        d = [p[side] - p[base] for p in rounds]
        return "%+.1f (%+.1f to %+.1f)" % (statistics.median(d), min(d), max(d))
    def med(side):
        return statistics.median(p[side] for p in rounds)
    print("%5d  %10.1f  %7.1f  %10.1f  %6.1f  %14.1f  %-23s %-23s %-23s %s, %d rounds" % (
        qd, med("lib"), med("lazy"), med("inpoll"), med("raw"), med("rawev"), diff("lib"),
        diff("lazy"), diff("lib", "rawev"), diff("inpoll"), len(rounds)))
PY
