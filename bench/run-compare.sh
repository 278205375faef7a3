#!/bin/sh
# SPDX-License-Identifier: MIT
# Installs what is missing (Debian/Ubuntu), builds into build-bench and runs
# afio-bench --compare on a scratch file it creates and removes: about a
# minute.  Extra arguments go to afio-bench --compare.  RUNTIME sets the
# seconds per cell (default 0.2), DIR where the scratch file goes,
# WORKLOADS and MODES what runs (WORKLOADS= and MODES= for the whole
# matrix of --rw, --io, --bs and every mode).  It ends with the verdict
# (--quiet: the verdict without the tables; --json: the verdict as JSON).
set -eu
cd "$(dirname "$0")/.."

# The install and the build talk on stderr: with --json stdout is the
# verdict alone, and without it the verdict stays the last thing shown.
scripts/install-deps.sh --bench >&2
[ -f build-bench/build.ninja ] || meson setup build-bench -Dwerror=true >&2
ninja -C build-bench >&2

workloads=${WORKLOADS-randread:4k:buf,randread:64k:buf,randwrite:4k:buf,randread:4k:dir}
modes=${MODES-inline,async}
set -- ${workloads:+--workloads "$workloads"} ${modes:+--modes "$modes"} --max-repeat 3 "$@"
# One benchmark at a time on a shared machine.
exec flock /tmp/afio-bench.lock ./build-bench/bench/afio-bench --compare \
	--runtime "${RUNTIME:-0.2}" --dir "${DIR:-build-bench}" \
	--csv build-bench/afio-compare.csv --png build-bench/afio-compare.png "$@"
