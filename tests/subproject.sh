#!/bin/sh
# A meson project that has libasyncfio as a subproject finds it with
# dependency('asyncfio'), as it would the installed library, and links
# and runs tests/consumer.c against it.
set -eu
src="$(cd "$(dirname "$0")/.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

mkdir -p "$tmp/app/subprojects"
ln -s "$src" "$tmp/app/subprojects/asyncfio"
cp "$src/tests/consumer.c" "$tmp/app/"
cat >"$tmp/app/meson.build" <<'MESON'
project('app', 'c')
asyncfio = dependency('asyncfio', fallback : 'asyncfio',
  default_options : ['tests=false', 'examples=false', 'bench=false'])
executable('app', 'consumer.c', dependencies : asyncfio)
MESON
# Without pkg-config's copy of the library in the way, the subproject it is.
PKG_CONFIG_PATH=/nonexistent meson setup "$tmp/build" "$tmp/app" --wrap-mode=forcefallback \
	-Dwerror=true >"$tmp/setup.log" 2>&1 || { cat "$tmp/setup.log"; exit 1; }
ninja -C "$tmp/build" >/dev/null
"$tmp/build/app"
echo "subproject: ok"
