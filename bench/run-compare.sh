#!/bin/sh
# SPDX-License-Identifier: MIT
# Installs what is missing (Debian/Ubuntu), builds into build-bench and runs
# afio-bench --compare on a scratch file it creates and removes: about a
# minute.  Extra arguments go to afio-bench --compare; RUNTIME sets the
# seconds per cell (default 0.25), DIR where the scratch file goes.
set -eu
cd "$(dirname "$0")/.."

need=""
for p in liburing-dev libaio-dev check meson ninja-build pkg-config fio gnuplot-nox; do
	dpkg -s "$p" >/dev/null 2>&1 || need="$need $p"
done
if [ -n "$need" ]; then
	sudo=""
	[ "$(id -u)" = 0 ] || sudo=sudo
	echo "installing:$need"
	$sudo apt-get update -q
	# shellcheck disable=SC2086
	$sudo apt-get install -y -q $need
fi

[ -f build-bench/build.ninja ] || meson setup build-bench -Dwerror=true
ninja -C build-bench

exec ./build-bench/bench/afio-bench --compare --runtime "${RUNTIME:-0.25}" \
	--dir "${DIR:-build-bench}" \
	--csv build-bench/afio-compare.csv --png build-bench/afio-compare.png "$@"
