#!/bin/bash
# Builds fio-asyncfio.so, libasyncfio's external fio ioengine, against the
# source of the fio Debian ships, configured as debian/rules configures it,
# so that the engine's idea of fio's structures is the installed fio's.
#
#   integrations/fio/build.sh            # fetches the source (apt-get source fio)
#   FIO_SRC=dir integrations/fio/build.sh # an unpacked fio source tree instead
#   integrations/fio/build.sh --fio      # also builds fio itself from that source
#   integrations/fio/build.sh --claim-version fio-X OUT.so
#                                        # an engine that says it is for fio-X
#                                        # (check.sh shows a mismatch refused)
#
# Environment:
#   FIO_SRC          unpacked fio source (with debian/ for Debian's configure line)
#   AFIO_FIO_BUILD   where everything goes (default: build-fio in the repository)
#   PKG_CONFIG_PATH  where asyncfio.pc is; without one that finds it, the
#                    uninstalled tree of build/ (meson-uninstalled) is used
#
# Also builds fio-asyncfio-floor.so beside it: the engine on bare liburing
# (floor.c), what bench.py's "floor" pair measures.  Prints the path of the
# engine last.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
here="$repo/integrations/fio"
out="${AFIO_FIO_BUILD:-$repo/build-fio}"
build_fio=no claim_version="" claim_output=""
while [ $# -gt 0 ]; do
	case $1 in
	--fio) build_fio=yes ;;
	--claim-version) claim_version="$2" claim_output="$3"; shift 2 ;;
	*) echo "build.sh: unknown argument $1 (--fio, --claim-version VERSION OUT.so)" >&2; exit 2 ;;
	esac
	shift
done
mkdir -p "$out"
jobs="$(nproc)"

say() { echo "fio-build: $*" >&2; }

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

# A deb-src twin of every deb.debian.org entry of the system's sources, so
# that apt-get source takes fio from the same suites the binary came from.
add_deb_src() {
	local list=/etc/apt/sources.list.d/asyncfio-deb-src.sources
	if grep -rqs '^Types:.*deb-src\|^deb-src' /etc/apt/sources.list /etc/apt/sources.list.d/; then
		return 0
	fi
	say "adding $list"
	awk '
		/^Types:/ { types = $0; next }
		/^$/ { if (block ~ /deb\.debian\.org/ && types ~ /deb/) print "Types: deb-src\n" block; block = ""; next }
		{ block = block $0 "\n" }
		END { if (block ~ /deb\.debian\.org/ && types ~ /deb/) print "Types: deb-src\n" block }
	' /etc/apt/sources.list.d/debian.sources | $sudo tee "$list" >/dev/null
	$sudo apt-get update -qq
}

fetch_source() {
	local version
	version="$(dpkg-query -W -f='${Version}' fio 2>/dev/null || true)"
	add_deb_src
	mkdir -p "$out/apt"
	if [ -n "$version" ]; then
		say "apt-get source fio=$version (the installed fio)"
		(cd "$out/apt" && apt-get source -qq "fio=$version" >/dev/null 2>&1)
	else
		say "fio is not installed: apt-get source fio"
		(cd "$out/apt" && apt-get source -qq fio >/dev/null 2>&1)
	fi
	FIO_SRC="$(find "$out/apt" -mindepth 1 -maxdepth 1 -type d -name 'fio-*' | sort | tail -1)"
}

if [ -z "${FIO_SRC:-}" ]; then
	if ! src_dir="$(find "$out/apt" -mindepth 1 -maxdepth 1 -type d -name 'fio-*' 2>/dev/null | sort | tail -1)" ||
	   [ -z "$src_dir" ]; then
		fetch_source
	else
		FIO_SRC="$src_dir"
	fi
fi
[ -f "$FIO_SRC/fio.h" ] || { echo "build.sh: $FIO_SRC is not a fio source tree" >&2; exit 1; }

# configure writes into the tree: work on a copy, keep FIO_SRC as it was
tree="$out/fio"
if [ ! -f "$tree/.afio-from" ] || [ "$(cat "$tree/.afio-from")" != "$(cd "$FIO_SRC" && pwd)" ]; then
	rm -rf "$tree"
	cp -a "$FIO_SRC" "$tree"
	(cd "$FIO_SRC" && pwd) >"$tree/.afio-from"
fi

# Debian's configure line and build flags: the override in debian/rules,
# run under dpkg-buildflags with the maintainer options the rules file sets.
# Every run, configured or not: fio's Makefile takes CFLAGS from here,
# for the engine's flags and for --fio.
debian_build_flags() {
	local maint_opts ld_prepend
	maint_opts="$(sed -n 's/^export DEB_BUILD_MAINT_OPTIONS *= *//p' debian/rules)"
	ld_prepend="$(sed -n 's/^export DEB_LDFLAGS_MAINT_PREPEND *:*= *//p' debian/rules)"
	eval "$(DEB_BUILD_MAINT_OPTIONS="$maint_opts" DEB_LDFLAGS_MAINT_PREPEND="$ld_prepend" \
		dpkg-buildflags --export=sh)"
}

configure_as_debian() {
	if grep -q '^override_dh_auto_configure:' debian/rules; then
		say "configure as debian/rules does: $(sed -n '/^override_dh_auto_configure:/{n;s/^\t//;p}' debian/rules)"
		make -s -f debian/rules override_dh_auto_configure >configure.log 2>&1
	else
		say "configure (debian/rules has no override)"
		./configure --prefix=/usr >configure.log 2>&1
	fi
}

cd "$tree"
[ -f debian/rules ] && debian_build_flags
if [ ! -f config-host.h ]; then
	if [ -f debian/rules ]; then
		# configure enables what it finds: without Debian's build
		# dependencies config-host.h would not be the one Debian built with
		if ! dpkg-checkbuilddeps >/dev/null 2>&1; then
			say "installing fio's build dependencies (apt-get build-dep fio)"
			DEBIAN_FRONTEND=noninteractive $sudo apt-get build-dep -y -qq fio >/dev/null
		fi
		configure_as_debian
	else
		say "no debian/ in $FIO_SRC: plain ./configure"
		./configure --prefix=/usr >configure.log 2>&1
	fi
fi
make -s FIO-VERSION-FILE >/dev/null 2>&1
fio_version="$(sed -n 's/^FIO_VERSION *= *//p' FIO-VERSION-FILE)"

# fio's own compile flags for its objects (with Debian's from the
# environment), taken from its Makefile rather than guessed.
flags_mk="$out/print-flags.mk"
printf 'afio-print-flags:\n\t@echo $(CPPFLAGS) $(CFLAGS)\n' >"$flags_mk"
fio_cflags="$(make -s -f Makefile -f "$flags_mk" afio-print-flags)"

if ! pkg-config --exists asyncfio 2>/dev/null; then
	export PKG_CONFIG_PATH="$repo/build/meson-uninstalled${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
	pkg-config --exists asyncfio-uninstalled 2>/dev/null || {
		echo "build.sh: no asyncfio.pc (install the library, set PKG_CONFIG_PATH, or build it in build/)" >&2
		exit 1
	}
	pc=asyncfio-uninstalled
else
	pc=asyncfio
fi
# fio is not linked against the library: the engine carries where it is
rpath="$(pkg-config --libs-only-L "$pc" | sed 's/-L/-Wl,-rpath,/g')"

say "engine for $fio_version, libasyncfio $(pkg-config --modversion "$pc") ($pc)"
engine="$out/fio-asyncfio.so"
if [ -n "$claim_version" ]; then
	fio_version="$claim_version"
	engine="$claim_output"
	say "built for $fio_version as told (--claim-version): it must be refused by any other fio"
fi
# shellcheck disable=SC2086 # the flag lists are word lists
cc $fio_cflags -fPIC -shared -Werror \
	-DAFIO_FIO_VERSION="\"$fio_version\"" $(pkg-config --cflags "$pc") \
	-o "$engine" "$here/fio-asyncfio.c" \
	$(pkg-config --libs "$pc") $rpath -ldl
# The same engine on bare liburing, for bench.py's "floor" pair (floor.c)
if [ -z "$claim_version" ] && pkg-config --exists liburing; then
	# shellcheck disable=SC2086
	cc $fio_cflags -fPIC -shared -Werror \
		-DAFIO_FIO_VERSION="\"$fio_version\"" $(pkg-config --cflags "$pc") \
		-o "$out/fio-asyncfio-floor.so" "$here/fio-asyncfio.c" "$here/floor.c" \
		$(pkg-config --libs liburing) -ldl
fi

if [ "$build_fio" = yes ]; then
	say "building fio from the same tree ($tree/fio)"
	nice make -s -j"$jobs" fio >build.log 2>&1
	# the same configuration as the installed fio, as far as a binary tells:
	# its built-in engines, its options, its dynamic symbols
	stock=/usr/bin/fio
	if [ -x "$stock" ] && [ "$("$stock" --version)" = "$fio_version" ]; then
		same=yes
		cmp -s <("$stock" --enghelp) <(./fio --enghelp) || same="no (engines differ)"
		cmp -s <("$stock" --cmdhelp=all 2>&1) <(./fio --cmdhelp=all 2>&1) || same="no (options differ)"
		cmp -s <(nm -D "$stock" | awk '{print $NF}' | sort) <(nm -D ./fio | awk '{print $NF}' | sort) ||
			same="no (dynamic symbols differ)"
		say "same engines, options and dynamic symbols as $stock: $same"
	fi
fi
echo "$engine"
