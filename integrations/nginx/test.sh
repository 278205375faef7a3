#!/bin/sh
# Runs nginx's own test suite (../shared/nginx-tests, as it is) against the
# stock build and the asyncfio build from build.sh, with the http globals
# forcing aio onto everything, the asyncfio build on every backend that
# probes available (AFIO_NO_FALLBACK) and in each mode.  A test that fails
# on asyncfio but passes on stock under the same globals fails the run.
#
#   integrations/nginx/test.sh [--ci] [--all] [OUT]
#
# default  the file-reading part of the suite, every backend, every mode
# --ci     the file-reading part, every backend, inline mode only, two
#          globals (directio; sendfile with aio_write)
# --all    the whole suite: stock and every backend in inline mode, then
#          the file-reading part in the other modes
# NGINX_TESTS  the suite (default ../shared/nginx-tests beside the repository)
# JOBS         prove -j (default 4: the tests mostly wait)
# NGINX_PATCHED  a patched binary to test instead of build.sh's (one built
#              with other constants, say)
set -eu

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
scope=files
case ${1:-} in
--ci) scope=ci; shift ;;
--all) scope=all; shift ;;
esac
out=${1:-$top/build-nginx}
tests=${NGINX_TESTS:-$(cd "$top/.." && pwd)/shared/nginx-tests}
jobs=${JOBS:-4}
if [ ! -f "$tests/lib/Test/Nginx.pm" ]; then
	echo "nginx test.sh: no nginx test suite in $tests (set NGINX_TESTS)" >&2
	exit 1
fi

# the part of the suite that reads files: static, ranges, the caches,
# gzip_static, sub/ssi, mp4/flv, slice, h2 and ssl
file_tests="addition.t addition_buffered.t charset_gzip_static.t dav.t
 gunzip_static.t gzip.t h2.t h2_proxy_cache.t h2_proxy_max_temp_file_size.t
 h2_ssl.t h2_ssl_proxy_cache.t http_try_files.t index.t limit_rate.t
 mp4.t mp4_ssi.t mp4_start_key_frame.t not_modified.t proxy_cache.t
 proxy_cache_bypass.t proxy_cache_chunked.t proxy_cache_control.t
 proxy_cache_convert_head.t proxy_cache_error.t proxy_cache_lock.t
 proxy_cache_lock_ssi.t proxy_cache_manager.t proxy_cache_max_range_offset.t
 proxy_cache_min_free.t proxy_cache_path.t proxy_cache_range.t
 proxy_cache_revalidate.t proxy_cache_use_stale.t proxy_cache_valid.t
 proxy_cache_variables.t proxy_cache_vary.t proxy_max_temp_file_size.t
 proxy_store.t range.t range_clearing.t range_flv.t range_if_range.t
 range_mp4.t slice.t ssi.t ssi_include_big.t ssi_waited.t ssl.t
 sub_filter.t sub_filter_buffering.t sub_filter_slice.t sub_filter_ssi.t"

# what the suite uses, so that few tests skip: Perl modules for SSL, h2,
# image_filter, memcached, FastCGI, SCGI and uwsgi, those daemons, and
# ffmpeg (the mp4 tests make their movies with it and read them with ffprobe)
suite_deps="libio-socket-ssl-perl libnet-ssleay-perl libgd-perl
 libcache-memcached-perl libcache-memcached-fast-perl libfcgi-perl
 libscgi-perl memcached libprotocol-websocket-perl libcryptx-perl uwsgi
 uwsgi-plugin-python3 ffmpeg"
if ! dpkg -s $suite_deps >/dev/null 2>&1; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
		$suite_deps >/dev/null
fi

bins=$("$here/build.sh" "$out")
stock=$(echo "$bins" | sed -n 1p)
patched=${NGINX_PATCHED:-$(echo "$bins" | sed -n 2p)}

results=$out/tests
rm -rf "$results"
mkdir -p "$results/tmp"
# O_DIRECT needs a real file system, not tmpfs
TMPDIR=$results/tmp
export TMPDIR

globals='user root; env AFIO_BACKEND; env AFIO_MODE; env AFIO_NO_FALLBACK;'

config_names="aio directio sendfile aio_write sendfile_write"
config_http() {
	case $1 in
	aio) echo 'aio on;' ;;
	directio) echo 'aio on; directio 512;' ;;
	sendfile) echo 'aio on; sendfile on;' ;;
	aio_write) echo 'aio on; aio_write on;' ;;
	sendfile_write) echo 'aio on; sendfile on; aio_write on;' ;;
	esac
}

available_backends() {
	for b in io_uring libaio threads; do
		if probe_backend "$b" inline; then
			echo "$b"
		fi
	done
}

# Starts the asyncfio build on backend $1 in mode $2 and prints the
# backend and mode its worker logs, so that a run claims only what ran.
probe_backend() {
	d=$(mktemp -d)
	mkdir -p "$d/logs"
	cat > "$d/nginx.conf" <<EOF
$globals
worker_processes 1;
error_log $d/error.log notice;
pid $d/nginx.pid;
events { }
http { server { listen 127.0.0.1:8999; access_log off; } }
EOF
	AFIO_BACKEND=$1 AFIO_MODE=${2:-inline} AFIO_NO_FALLBACK=1 \
		"$patched" -p "$d/" -c "$d/nginx.conf" 2>/dev/null || { rm -rf "$d"; return 1; }
	i=0
	while ! grep -q 'asyncfio: \|asyncfio: afio_create' "$d/error.log" 2>/dev/null && [ $i -lt 50 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	kill "$(cat "$d/nginx.pid")" 2>/dev/null || true
	line=$(grep -o 'backend "[a-z_]*", mode "[a-z]*"' "$d/error.log" || true)
	rm -rf "$d"
	[ "$line" = "backend \"$1\", mode \"${2:-inline}\"" ]
}

# run LABEL BINARY CONFIG FILES...: prove's output in $results/LABEL.log,
# one line per failed test number in $results/LABEL.failed
run() {
	label=$1 bin=$2 http=$3
	shift 3
	log=$results/$label.log
	# the long tests (the cache manager's, h2's and proxy_cache_vary's
	# unsafe parts) under one of the globals only, for time
	unsafe=
	case $label in *-directio) unsafe=1 ;; esac
	(cd "$tests" && TEST_NGINX_BINARY=$bin TEST_NGINX_GLOBALS=$globals \
		TEST_NGINX_GLOBALS_HTTP=$http TEST_NGINX_UNSAFE=$unsafe \
		nice prove -j"$jobs" "$@" >"$log" 2>&1) || true
	perl -ne '
		sub emit { for (split /[ ,]+/, $t // "") {
			if (/^(\d+)-(\d+)$/) { print "$f#$_\n" for $1 .. $2 }
			elsif (/^\d+$/) { print "$f#$_\n" } } undef $t }
		if (/^(\S+\.t)\s+\(Wstat: (\d+)/) { emit(); $f = $1; print "$f#exit\n" if $2 }
		elsif (defined $t && /^\s+([\d, -]+)$/) { $t .= " $1" }
		elsif ($f && /^\s+Failed tests?:\s+(.*)/) { emit(); $t = $1 }
		elsif ($f && /^\s+Parse errors:/) { emit(); print "$f#parse\n" }
		elsif (defined $t) { emit() }
		END { emit() }
	' "$log" | sort -u > "$results/$label.failed"
	files=$(sed -n 's/^Files=\([0-9]*\), Tests=\([0-9]*\).*/\1/p' "$log")
	ntests=$(sed -n 's/^Files=\([0-9]*\), Tests=\([0-9]*\).*/\2/p' "$log")
	skipped=$(grep -c 'skipped: ' "$log" || true)
	printf '%-34s files %4s  tests %5s  skipped files %3s  failed %3s\n' \
		"$label" "${files:-?}" "${ntests:-?}" "$skipped" \
		"$(wc -l < "$results/$label.failed")" | tee -a "$results/summary"
}

new_failures=0

# compare STOCK_LABEL LABEL: what fails on LABEL and not on stock
compare() {
	new=$(comm -13 "$results/$1.failed" "$results/$2.failed")
	if [ -n "$new" ]; then
		echo "NEW FAILURES on $2 (pass on $1):" $new | tee -a "$results/summary"
		new_failures=$((new_failures + $(echo "$new" | wc -l)))
	fi
}

case $scope in
all) suite=$(cd "$tests" && ls *.t) ;;
*) suite=$file_tests ;;
esac
case $scope in
ci)
	modes=inline
	# directio 512 leaves the suite's many small files to buffered aio;
	# sendfile_write offloads both thread tasks at once: two runs per
	# build keep CI short
	config_names="directio sendfile_write"
	;;
*) modes="inline async hybrid" ;;
esac

# CONFIGS="aio directio sendfile aio_write" runs only those globals
config_names=${CONFIGS:-$config_names}

backends=$(available_backends)
echo "backends available: $(echo $backends)" | tee "$results/summary"
start=$(date +%s)

for cfg in $config_names; do
	http=$(config_http $cfg)
	run "stock-$cfg" "$stock" "$http" $suite
	for b in $backends; do
		for m in $modes; do
			if [ "$scope" = all ] && [ "$m" != inline ]; then
				set -- $file_tests
			else
				set -- $suite
			fi
			if ! probe_backend "$b" "$m"; then
				echo "asyncfio-$b-$m-$cfg: backend did not start as asked" |
					tee -a "$results/summary"
				new_failures=$((new_failures + 1))
				continue
			fi
			AFIO_BACKEND=$b AFIO_MODE=$m AFIO_NO_FALLBACK=1 \
				run "asyncfio-$b-$m-$cfg" "$patched" "$http" "$@"
			compare "stock-$cfg" "asyncfio-$b-$m-$cfg"
		done
	done
done

echo "stock's own failures:" | tee -a "$results/summary"
for cfg in $config_names; do
	echo "  $cfg: $(cat "$results/stock-$cfg.failed" | tr '\n' ' ')" | tee -a "$results/summary"
done
echo "nginx tests ($scope): $new_failures new failures on asyncfio," \
	"$(($(date +%s) - start)) s; details in $results/" | tee -a "$results/summary"
[ "$new_failures" = 0 ]
