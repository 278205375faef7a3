#!/bin/sh
# Installs the Debian packages the build and the tests need, with --bench
# also what the backend comparison uses, with --http what bench/http-bench.sh
# runs against (nginx, wrk); only what is missing.  Flags can be combined.
set -eu

pkgs="gcc libc6-dev pkg-config meson ninja-build liburing-dev libaio-dev check groff-base"
for flag in "$@"; do
	case $flag in
	--bench) pkgs="$pkgs fio gnuplot-nox libuv1-dev" ;;
	--http) pkgs="$pkgs nginx-light wrk gnuplot-nox python3" ;;
	*) echo "install-deps.sh: unknown flag $flag (--bench, --http)" >&2; exit 2 ;;
	esac
done

missing=""
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing="$missing $p"
done
[ -z "$missing" ] && exit 0

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "installing:$missing"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $missing >/dev/null
