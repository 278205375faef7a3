#!/bin/sh
# Builds with warnings as errors and runs every test suite.
#   ./test.sh                                  build/ and all suites
#   AFIO_BUILD_DIR=build-asan ./test.sh -Db_sanitize=address,undefined
set -eu
cd "$(dirname "$0")"
dir="${AFIO_BUILD_DIR:-build}"

if [ -f "$dir/build.ninja" ]; then
	meson configure "$dir" -Dwerror=true "$@" >/dev/null
else
	meson setup "$dir" -Dwerror=true "$@" >/dev/null
fi
ninja -C "$dir"
meson test -C "$dir" --print-errorlogs --num-processes 2
