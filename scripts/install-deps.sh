#!/bin/sh
# Installs the Debian packages the build and the tests need, and with
# --bench also what the backend comparison uses; only what is missing.
set -eu

pkgs="gcc libc6-dev pkg-config meson ninja-build liburing-dev libaio-dev check groff-base"
[ "${1:-}" = "--bench" ] && pkgs="$pkgs fio gnuplot-nox libuv1-dev"

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
