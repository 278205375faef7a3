#!/bin/sh
# nginx on libasyncfio against stock nginx: wrk with 200 connections asks
# for random files of a set (4 KiB, 100 KiB, 1 MiB, or a mix of the three)
# read from the disk with directio, from the disk buffered (the files
# evicted from the page cache before each run) or from the page cache.
# Servers: stock "aio on; directio" (Linux AIO), stock "aio threads", stock
# "sendfile on", and the asyncfio build on each backend and mode with
# "aio on" (BACKEND-MODE+sendfile: "aio on; sendfile on").  The
# servers take turns inside each repetition; nginx's one worker is pinned
# to one CPU, wrk to the other.
#
#   bench/nginx-bench.sh [OUT]          (OUT: build-nginx/bench)
#
# SIZES="4k 100k 1m mix"  CACHES="directio evicted cached"
# INTERFERENCE=1: also cached 4 KiB files on 1/4 of the connections while
# the rest read cold 1 MiB files (the row: size 4k, cache interference)
# SERVERS="stock-aio stock-threads stock-sendfile io_uring-inline ..."
# FILES_4K=25000 FILES_100K=25000 FILES_1M=25000  files per size
# SECONDS_PER_RUN=10 REPS=3 CONNECTIONS=200 THREADS=2 (wrk)
# Writes OUT/nginx-bench.csv and OUT/nginx-bench.png.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
out=${1:-$top/build-nginx/bench}
mkdir -p "$out"
out=$(cd "$out" && pwd)

sizes=${SIZES:-4k 100k 1m mix}
caches=${CACHES:-directio evicted cached}
all_patched="io_uring-inline io_uring-async io_uring-hybrid libaio-inline libaio-async libaio-hybrid threads-inline threads-async threads-hybrid"
servers=${SERVERS:-stock-aio stock-threads stock-sendfile $all_patched}
secs=${SECONDS_PER_RUN:-10}
reps=${REPS:-3}
conns=${CONNECTIONS:-200}
wrk_threads=${THREADS:-2}
port=${PORT:-18480}
server_cpu=${SERVER_CPU:-0}
client_cpu=${CLIENT_CPU:-1}

bins=$("$top/integrations/nginx/build.sh" "$top/build-nginx")
stock=$(echo "$bins" | sed -n 1p)
patched=$(echo "$bins" | sed -n 2p)

data=$out/data
disk=$(df --output=source "$out" | tail -1 | sed 's|/dev/||')

files_for() {
	case $1 in
	4k) echo "${FILES_4K:-25000}" ;;
	100k) echo "${FILES_100K:-25000}" ;;
	1m) echo "${FILES_1M:-25000}" ;;
	esac
}
bytes_for() {
	case $1 in 4k) echo 4096 ;; 100k) echo 102400 ;; 1m) echo 1048576 ;; esac
}

make_files() {
	for s in 4k 100k 1m; do
		n=$(files_for $s)
		[ -f "$data/$s/.done-$n" ] && continue
		rm -rf "$data/$s"
		mkdir -p "$data/$s"
		python3 - "$data/$s" "$n" "$(bytes_for $s)" <<'EOF'
import os, sys
d, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
block = os.urandom(size)
for i in range(n):
    with open(f"{d}/{i}", "wb") as f:
        f.write(block)
EOF
		sync
		touch "$data/$s/.done-$n"
	done
}

# Drops our files from the page cache (only ours: the machine is shared).
evict() {
	python3 - "$data" <<'EOF'
import os, sys
for root, _, names in os.walk(sys.argv[1]):
    for name in names:
        fd = os.open(os.path.join(root, name), os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
EOF
}

warm() {
	find "$data/${1:-}" -type f -exec cat {} + > /dev/null
}

# the wrk script: a random file of the size class per request
wrk_script() {
	class=$1
	if [ "$class" = mix ]; then
		cat <<EOF
local n = { $(files_for 4k), $(files_for 100k), $(files_for 1m) }
local d = { "4k", "100k", "1m" }
request = function()
  local k = math.random(3)
  return wrk.format("GET", "/" .. d[k] .. "/" .. math.random(0, n[k] - 1))
end
EOF
	else
		cat <<EOF
request = function()
  return wrk.format("GET", "/$class/" .. math.random(0, $(files_for "$class") - 1))
end
EOF
	fi
	cat <<'EOF'
done = function(summary, latency, requests)
  io.write(string.format("RESULT %d %d %.1f %.1f %d\n", summary.requests,
    summary.bytes, latency:percentile(50), latency:percentile(99),
    summary.errors.status + summary.errors.connect + summary.errors.read
    + summary.errors.write + summary.errors.timeout))
end
EOF
}

server_conf() {
	srv=$1 cache=$2 dir=$3
	events=
	http="sendfile off;"
	case $srv in
	stock-aio) http="aio on; directio 512;" ;;
	stock-threads) http="aio threads;" ;;
	stock-sendfile) http="sendfile on;" ;;
	*+sendfile)
	   b=${srv%+sendfile}
	   events="asyncfio_backend ${b%-*}; asyncfio_mode ${b#*-};"
	   http="aio on; sendfile on;" ;;
	*) events="asyncfio_backend ${srv%-*}; asyncfio_mode ${srv#*-};"
	   http="aio on;" ;;
	esac
	if [ "$cache" = directio ] && [ "$srv" != stock-aio ]; then
		http="$http directio 512;"
	fi
	cat <<EOF
user root;
worker_processes 1;
worker_cpu_affinity $(printf '%s' "1$(printf '%*s' "$server_cpu" '' | tr ' ' 0)");
worker_rlimit_nofile 65536;
error_log $dir/error.log notice;
pid $dir/nginx.pid;
events { worker_connections 4096; $events }
http {
    access_log off;
    keepalive_requests 1000000;
    open_file_cache max=30000;
    $http
    server {
        listen 127.0.0.1:$port backlog=4096;
        root $data;
    }
}
EOF
}

cpu_ticks() {
	awk '{ print $14 + $15 }' "/proc/$1/stat"
}
disk_read_sectors() {
	awk -v d="$disk" '$3 == d { print $6 }' /proc/diskstats
}

run_one() {
	size=$1 cache=$2 srv=$3 rep=$4
	dir=$out/run
	rm -rf "$dir"
	mkdir -p "$dir"
	server_conf "$srv" "$cache" "$dir" > "$dir/nginx.conf"
	bin=$patched
	case $srv in stock-*) bin=$stock ;; esac
	case $cache in
	cached) [ "$size" = mix ] && warm || warm "$size" ;;
	*) evict ;;
	esac
	[ "$cache" = interference ] && warm 4k
	"$bin" -p "$dir/" -c "$dir/nginx.conf"
	sleep 0.5
	worker=$(pgrep -P "$(cat "$dir/nginx.pid")" | head -1)
	wrk_script "$size" > "$dir/req.lua"
	# a short warm-up connects everything; its requests are not counted
	taskset -c "$client_cpu" wrk -t1 -c10 -d1s -s "$dir/req.lua" "http://127.0.0.1:$port/" >/dev/null 2>&1 || true
	case $cache in cached) ;; *) evict ;; esac
	[ "$cache" = interference ] && warm 4k
	t0=$(cpu_ticks "$worker")
	d0=$(disk_read_sectors)
	if [ "$cache" = interference ]; then
		# cold 1 MiB files on 3/4 of the connections while the rest ask
		# for cached 4 KiB ones: the row is the small files' figures
		wrk_script 1m > "$dir/big.lua"
		taskset -c "$client_cpu" wrk -t1 -c$((conns * 3 / 4)) -d"${secs}s" \
			-s "$dir/big.lua" "http://127.0.0.1:$port/" >"$dir/big.out" 2>&1 &
		big=$!
		res=$(taskset -c "$client_cpu" wrk -t1 -c$((conns / 4)) -d"${secs}s" \
			-s "$dir/req.lua" "http://127.0.0.1:$port/" 2>&1 | sed -n 's/^RESULT //p')
		wait $big || true
		big_requests=$(sed -n 's/^RESULT \([0-9]*\).*/\1/p' "$dir/big.out")
	else
		big_requests=0
		res=$(taskset -c "$client_cpu" wrk -t"$wrk_threads" -c"$conns" -d"${secs}s" \
			-s "$dir/req.lua" "http://127.0.0.1:$port/" 2>&1 | sed -n 's/^RESULT //p')
	fi
	t1=$(cpu_ticks "$worker")
	d1=$(disk_read_sectors)
	kill "$(cat "$dir/nginx.pid")"
	sleep 0.3
	set -- $res
	hz=$(getconf CLK_TCK)
	awk -v size="$size" -v cache="$cache" -v srv="$srv" -v rep="$rep" \
	    -v req="$1" -v bytes="$2" -v p50="$3" -v p99="$4" -v err="$5" \
	    -v big="${big_requests:-0}" -v secs="$secs" -v cpu=$((t1 - t0)) -v hz="$hz" -v disk=$(((d1 - d0) * 512)) \
	    'BEGIN { printf "%s,%s,%s,%d,%.0f,%.1f,%.0f,%.1f,%.2f,%.2f,%d\n", size, cache, srv, rep,
	        req / secs, bytes / secs / 1048576, disk / secs / 1048576,
	        req + big ? cpu / hz * 1e6 / (req + big) : 0, p50 / 1000, p99 / 1000, err }' >> "$out/nginx-bench.csv"
	tail -1 "$out/nginx-bench.csv"
}

make_files
echo "size,cache,server,rep,req_per_s,MiB_per_s,disk_MiB_per_s,worker_cpu_us_per_req,p50_ms,p99_ms,errors" > "$out/nginx-bench.csv"
for size in $sizes; do
	for cache in $caches; do
		for rep in $(seq "$reps"); do
			# alternate the order between repetitions
			order=$servers
			[ $((rep % 2)) = 0 ] && order=$(echo $servers | tr ' ' '\n' | tac | tr '\n' ' ')
			for srv in $order; do
				run_one "$size" "$cache" "$srv" "$rep"
			done
		done
	done
done

if [ "${INTERFERENCE:-1}" = 1 ]; then
	for rep in $(seq "$reps"); do
		order=$servers
		[ $((rep % 2)) = 0 ] && order=$(echo $servers | tr ' ' '\n' | tac | tr '\n' ' ')
		for srv in $order; do
			run_one 4k interference "$srv" "$rep"
		done
	done
fi

python3 "$here/nginx-bench-report.py" "$out/nginx-bench.csv" > "$out/nginx-bench.md"
cat "$out/nginx-bench.md"
