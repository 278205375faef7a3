#!/bin/sh
# Installs the library into a temporary prefix and builds a program against
# it the way a user would: pkg-config, shared and static.
set -eu
src="$(cd "$(dirname "$0")/.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

meson setup "$tmp/build" "$src" --prefix="$tmp/prefix" -Dwerror=true \
	-Dtests=false -Dexamples=false -Dbench=false >/dev/null
ninja -C "$tmp/build" >/dev/null
meson install -C "$tmp/build" >/dev/null

pc="$(dirname "$(find "$tmp/prefix" -name asyncfio.pc)")"
lib="$(dirname "$(find "$tmp/prefix" -name 'libasyncfio.so.0')")"
export PKG_CONFIG_PATH="$pc"

so="$lib/libasyncfio.so.0"
soname="$(objdump -p "$so" | awk '/SONAME/ { print $2 }')"
[ "$soname" = "libasyncfio.so.0" ] || { echo "SONAME is '$soname'"; exit 1; }
leaked="$(nm -D --defined-only "$so" | awk '$2 ~ /^[TDBR]$/ && $3 !~ /^afio_/ { print $3 }')"
[ -z "$leaked" ] || { echo "exported beyond afio_*: $leaked"; exit 1; }

cc -Wall -Wextra -Werror -o "$tmp/app" "$src/tests/consumer.c" $(pkg-config --cflags --libs asyncfio)
LD_LIBRARY_PATH="$lib" "$tmp/app"
cc -Wall -Wextra -Werror -o "$tmp/app-static" "$src/tests/consumer.c" \
	$(pkg-config --cflags asyncfio) "$lib/libasyncfio.a" $(pkg-config --libs-only-l --static asyncfio | sed 's/-lasyncfio//')
"$tmp/app-static"
echo "consumer: ok"
