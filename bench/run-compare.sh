#!/bin/sh
# SPDX-License-Identifier: MIT
# Installs what is missing (Debian/Ubuntu), builds into build-bench and runs
# afio-bench --compare on a scratch file it creates and removes: about a
# minute.  Extra arguments go to afio-bench --compare; RUNTIME sets the
# seconds per cell (default 0.25), DIR where the scratch file goes.
set -eu
cd "$(dirname "$0")/.."

scripts/install-deps.sh --bench
[ -f build-bench/build.ninja ] || meson setup build-bench -Dwerror=true
ninja -C build-bench

exec ./build-bench/bench/afio-bench --compare --runtime "${RUNTIME:-0.25}" \
	--dir "${DIR:-build-bench}" \
	--csv build-bench/afio-compare.csv --png build-bench/afio-compare.png "$@"
