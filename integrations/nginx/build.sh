#!/bin/sh
# Builds, from Debian 12's nginx 1.22.1 source, a stock nginx (Debian's
# configure flags plus --with-file-aio) and one on libasyncfio (Debian's
# flags plus --with-asyncfio), each in its own copy of the source.
#
#   integrations/nginx/build.sh [OUT]      OUT defaults to build-nginx/
#
# NGINX_SRC=dir       an unpacked nginx 1.22.1 source (else apt-get source)
# PKG_CONFIG_PATH     where asyncfio.pc is; without it and without an
#                     installed library, the uninstalled tree in
#                     $AFIO_BUILD_DIR (default build/) is built and used
# NGINX_DYNAMIC=0     leave out Debian's dynamic modules (see README)
#
# Prints the two binaries' paths: OUT/stock/objs/nginx, OUT/asyncfio/objs/nginx.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
out=${1:-$top/build-nginx}
mkdir -p "$out"
out=$(cd "$out" && pwd)
jobs=${JOBS:-2}

fetch_source() {
	if [ -n "${NGINX_SRC:-}" ]; then
		echo "$NGINX_SRC"
		return
	fi
	src=$(ls -d "$out"/src/nginx-1.22.1 2>/dev/null || true)
	if [ -n "$src" ]; then
		echo "$src"
		return
	fi
	if ! apt-get source --print-uris nginx >/dev/null 2>&1 ||
	   ! grep -rqs '^Types:.*deb-src\|^deb-src' /etc/apt/sources.list /etc/apt/sources.list.d/; then
		cat > /etc/apt/sources.list.d/afio-deb-src.sources <<'SRC'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
		apt-get update >&2
	fi
	mkdir -p "$out/src"
	# the newest version the mirror lists may not be downloadable yet:
	# take the first one that is, newest first
	for v in $(apt-cache showsrc nginx | sed -n 's/^Version: //p' | sort -rV); do
		if (cd "$out/src" && apt-get source -q "nginx=$v" >&2); then
			break
		fi
	done
	ls -d "$out"/src/nginx-1.22.1
}

install_build_deps() {
	[ "${NGINX_BUILD_DEPS:-1}" = 1 ] || return 0
	# all of debian/control's, not a few: the dynamic modules need
	# libgd, geoip and perl too
	(cd "$src" && dpkg-checkbuilddeps) >/dev/null 2>&1 && return 0
	DEBIAN_FRONTEND=noninteractive apt-get -y build-dep nginx >&2
}

find_library() {
	if pkg-config --exists asyncfio; then
		return
	fi
	bdir=${AFIO_BUILD_DIR:-$top/build}
	if [ ! -f "$bdir/build.ninja" ]; then
		nice meson setup "$bdir" "$top" >&2
	fi
	nice ninja -C "$bdir" >&2
	PKG_CONFIG_PATH="$bdir/meson-uninstalled${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
	export PKG_CONFIG_PATH
	pkg-config --exists asyncfio
}

# Debian's flags, read from debian/rules by make itself, so that both
# builds get exactly what the package gets.
debian_flags() {
	make -s -f - -C "$1" print-flags <<'MK'
include debian/rules
print-flags:
	@printf '%s\n' $(bin_configure_flags)
MK
}

build_one() {
	name=$1
	shift
	dir=$out/$name
	if [ ! -f "$dir/.configured" ] || [ "$(cat "$dir/.configured")" != "$*" ]; then
		rm -rf "$dir"
		mkdir -p "$dir"
		cp -a "$src/." "$dir/"
		if [ "$name" = asyncfio ]; then
			# a repository of the pristine source, for mkpatch.sh
			rm -rf "$dir/.git"
			git -C "$dir" init -q
			git -C "$dir" add -A
			git -C "$dir" -c user.name=build -c user.email=build@localhost \
				commit -qm "nginx source"
			patch -d "$dir" -p1 -s < "$here/nginx-1.22.1-asyncfio.patch"
		fi
		(cd "$dir" && nice sh -c "./configure $*" >configure.log 2>&1) || {
			tail -20 "$dir/configure.log" >&2
			return 1
		}
		printf '%s' "$*" > "$dir/.configured"
	fi
	nice make -C "$dir" -j"$jobs" >"$dir/make.log" 2>&1 || {
		tail -30 "$dir/make.log" >&2
		return 1
	}
	echo "$dir/objs/nginx"
}

src=$(fetch_source)
install_build_deps
src=$(cd "$src" && pwd)
find_library

flags=$(debian_flags "$src" | while IFS= read -r f; do
	case $f in
	*=dynamic) [ "${NGINX_DYNAMIC:-1}" = 1 ] || continue ;;
	esac
	# quote every flag: --with-cc-opt carries spaces
	printf "'%s' " "$f"
done)

build_one stock "$flags --with-file-aio"
# the patch's checksum in the flags' stamp rebuilds when the patch changes
build_one asyncfio "$flags --with-asyncfio" \
	"# $(sha1sum < "$here/nginx-1.22.1-asyncfio.patch" | cut -c1-12)"
