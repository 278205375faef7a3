#!/bin/sh
# nginx on libasyncfio against stock nginx: wrk with 200 connections asks
# for random files of a set (4 KiB, 100 KiB, 1 MiB, or a mix of the three)
# read from the disk with directio, from the disk buffered (the files
# evicted from the page cache before each run) or from the page cache.
# Servers: stock "aio on; directio" (Linux AIO), stock "aio threads", stock
# "sendfile on", and the asyncfio build on each backend and mode with
# "aio on" (BACKEND-MODE+sendfile: "aio on; sendfile on";
# BACKEND-MODE+sendfile:SIZE also "asyncfio_sendfile_min SIZE").  The
# servers take turns inside each repetition, the order reversed every
# other one; nginx's one worker is pinned to one CPU, wrk to the other.
#
#   bench/nginx-bench.sh [OUT]          (OUT: build-nginx/bench)
#
# SIZES="4k 100k 1m mix" (or 16k)  CACHES="directio evicted cached" (SIZES= runs
# only the interference rows)
# INTERFERENCE=1: also cached 4 KiB files on 1/4 of the connections while
# the rest read cold 1 MiB files, both wrk at once against the same worker
# (the row: size 4k, cache interference; its figures are the small files')
# SERVERS="stock-aio stock-threads stock-sendfile io_uring-inline ..."
# FILES_4K=25000 FILES_16K=25000 FILES_100K=25000 FILES_1M=25000  files per size
# FILES_CACHED_1M=10000: the 1 MiB files asked for from the page cache (all
# 25,000 are 25 GiB, more than this machine's memory)
# SECONDS_PER_RUN=10 REPS=3 CONNECTIONS=200 THREADS=2 (wrk threads)
# DATA=dir: the files (default OUT/data, made when missing)
# PERF=1: perf record -g of the worker during each run, its top symbols in
# OUT/perf/ (for a profile, not for figures)
# SYSCALLS=1: system calls per request of each run on the worker's CPU
# (the worker's, its kernel workers' that run there, and any other
# process's there), counted with perf stat on the syscall tracepoints, in
# OUT/syscalls/
# NGINX_USER="nobody nogroup": the workers' user (default root; a worker that may not
# write a file gets EPERM from cachestat(2), which sendfile through the
# library asks first)
# LOCK=0: do not take /tmp/afio-bench.lock around each round
# ASYNCFIO_EVENTS="asyncfio_threads 32;": more directives in the patched
# servers' events {}
# NGINX_PATCHED=binary: the patched servers run it instead of build.sh's
# (an earlier patch, to compare with; the script then times one build)
# Writes OUT/nginx-bench.csv, OUT/nginx-bench.md and OUT/nginx-bench.png.
# A server that does not start, answers the warm-up with errors or runs
# another backend than asked stops the script.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
out=${1:-$top/build-nginx/bench}
mkdir -p "$out"
out=$(cd "$out" && pwd)

sizes=${SIZES-4k 100k 1m mix}
caches=${CACHES:-directio evicted cached}
all_patched="io_uring-inline io_uring-async io_uring-hybrid libaio-inline libaio-async libaio-hybrid threads-inline threads-async threads-hybrid"
servers=${SERVERS:-stock-aio stock-threads stock-sendfile $all_patched io_uring-inline+sendfile}
secs=${SECONDS_PER_RUN:-10}
reps=${REPS:-3}
conns=${CONNECTIONS:-200}
wrk_threads=${THREADS:-2}
port=${PORT:-18480}
server_cpu=${SERVER_CPU:-0}
client_cpu=${CLIENT_CPU:-1}
hz=$(getconf CLK_TCK)

die() {
	echo "nginx-bench: $*" >&2
	exit 1
}

bins=$("$top/integrations/nginx/build.sh" "$top/build-nginx")
stock=$(echo "$bins" | sed -n 1p)
patched=${NGINX_PATCHED:-$(echo "$bins" | sed -n 2p)}

data=${DATA:-$out/data}
mkdir -p "$data"
data=$(cd "$data" && pwd)
disk=$(df --output=source "$data" | tail -1 | sed 's|/dev/||')
grep -q " $disk " /proc/diskstats || die "no /proc/diskstats line for $disk"

files_for() {
	case $1 in
	4k) echo "${FILES_4K:-25000}" ;;
	16k) echo "${FILES_16K:-25000}" ;;
	100k) echo "${FILES_100K:-25000}" ;;
	1m) echo "${FILES_1M:-25000}" ;;
	esac
}
bytes_for() {
	case $1 in 4k) echo 4096 ;; 16k) echo 16384 ;; 100k) echo 102400 ;; 1m) echo 1048576 ;; esac
}
# how many files of class $1 are asked for in cache state $2
count_for() {
	n=$(files_for "$1")
	if [ "$1" = 1m ] && [ "$2" = cached ] && [ "${FILES_CACHED_1M:-10000}" -lt "$n" ]; then
		n=${FILES_CACHED_1M:-10000}
	fi
	echo "$n"
}
classes_of() {
	case $1 in mix) echo 4k 100k 1m ;; *) echo "$1" ;; esac
}

# Only the classes that the sizes asked for read (25,000 files of 1 MiB
# are 25 GiB to write).
make_files() {
	need=
	for z in $sizes; do need="$need $(classes_of "$z")"; done
	[ "${INTERFERENCE:-1}" = 1 ] && need="$need 4k 1m"
	for s in 4k 16k 100k 1m; do
		case " $need " in *" $s "*) ;; *) continue ;; esac
		n=$(files_for $s)
		[ -f "$data/$s/.done-$n" ] && continue
		rm -rf "${data:?}/$s"
		mkdir -p "$data/$s"
		echo "nginx-bench: making $n files of $s in $data/$s" >&2
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

# Drops the files of the classes named from the page cache (only ours: the
# machine is shared).
evict() {
	python3 - "$data" "$@" <<'EOF'
import os, sys
for c in sys.argv[2:]:
    for e in os.scandir(os.path.join(sys.argv[1], c)):
        fd = os.open(e.path, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
EOF
}

# Reads the files that the cached runs of class $1 ask for.
warm() {
	for c in $(classes_of "$1"); do
		seq 0 $(($(count_for "$c" cached) - 1)) | sed "s|^|$data/$c/|" |
			xargs cat > /dev/null
	done
}

# The wrk script: a random file of the class(es) per request.  Every
# request is formatted once in init(); request() only picks one, so that
# the client does as little as it can per request.
wrk_script() {
	echo "local classes = {"
	for c in $(classes_of "$1"); do
		echo "  { \"$c\", $(count_for "$c" "$2") },"
	done
	cat <<'EOF'
}
local reqs, sizes = {}, {}
local nclasses = #classes
local random = math.random
local id = 0

function setup(thread)
  id = id + 1
  thread:set("id", id)
end

function init(args)
  math.randomseed(os.time() * 7919 + (id or 0) * 104729)
  for k, c in ipairs(classes) do
    local t = {}
    for i = 0, c[2] - 1 do
      t[i + 1] = wrk.format("GET", "/" .. c[1] .. "/" .. i)
    end
    reqs[k], sizes[k] = t, c[2]
  end
end

if nclasses == 1 then
  function request()
    return reqs[1][random(sizes[1])]
  end
else
  function request()
    local k = random(nclasses)
    return reqs[k][random(sizes[k])]
  end
end

function done(summary, latency, requests)
  io.write(string.format("RESULT %d %d %.1f %.1f %d\n", summary.requests,
    summary.bytes, latency:percentile(50), latency:percentile(99),
    summary.errors.status + summary.errors.connect + summary.errors.read
    + summary.errors.write + summary.errors.timeout))
end
EOF
}

# nginx cannot raise its limit of open files here (setrlimit is not
# permitted): its cache of open files stays below it, beside the
# connections (and the pipes of sendfile through the library: with only
# two descriptors a connection, "aio on; sendfile on" ran out of them)
open_files=$(( $(ulimit -Hn) - 4 * conns - 100 ))
[ "$open_files" -le 100000 ] || open_files=100000
# Not with directio: nginx 1.22's cache of open files and directio fail
# some reads with EINVAL (stock "aio threads" as well as the patched build),
# so every server of a directio cell (and stock "aio on", which is always
# directio) opens each file per request.
open_file_cache() {
	[ "$2" = directio ] || [ "$1" = stock-aio ] || echo "open_file_cache max=$open_files;"
}
server_conf() {
	srv=$1 cache=$2 dir=$3
	events=
	http="sendfile off;"
	case $srv in
	stock-aio) http="aio on; directio 512;" ;;
	stock-threads) http="aio threads;" ;;
	stock-sendfile) http="sendfile on;" ;;
	*+sendfile*)
	   b=${srv%%+sendfile*}
	   events="asyncfio_backend ${b%-*}; asyncfio_mode ${b#*-};"
	   min=${srv#*+sendfile}
	   [ -z "$min" ] || events="$events asyncfio_sendfile_min ${min#:};"
	   http="aio on; sendfile on;" ;;
	*) events="asyncfio_backend ${srv%-*}; asyncfio_mode ${srv#*-};"
	   http="aio on;" ;;
	esac
	if [ "$cache" = directio ] && [ "$srv" != stock-aio ]; then
		http="$http directio 512;"
	fi
	cat <<EOF
user ${NGINX_USER:-root};
worker_processes 1;
worker_cpu_affinity $(printf '%s' "1$(printf '%*s' "$server_cpu" '' | tr ' ' 0)");
error_log $dir/error.log notice;
pid $dir/nginx.pid;
events { worker_connections 1024; $events ${events:+${ASYNCFIO_EVENTS:-}} }
http {
    access_log off;
    keepalive_requests 1000000;
    $(open_file_cache "$srv" "$cache")
    $http
    server {
        listen 127.0.0.1:$port backlog=4096;
        root $data;
    }
}
EOF
}

listening() {
	ss -Htln "sport = :$port" | grep -q .
}
# a process that is there and not a zombie
alive() {
	[ -n "$1" ] && [ -r "/proc/$1/stat" ] &&
		[ "$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)" != Z ]
}

master= worker=
start_server() {
	bin=$1 dir=$2 srv=$3
	! listening || die "port $port is taken before $srv starts (ss -tlnp 'sport = :$port')"
	# (not holding the lock's descriptor: nginx outlives a failed round)
	"$bin" -p "$dir/" -c "$dir/nginx.conf" 9>&- || die "$srv did not start: $(tail -3 "$dir/error.log")"
	i=0
	while :; do
		master=$(cat "$dir/nginx.pid" 2>/dev/null || true)
		worker=
		[ -z "$master" ] || worker=$(pgrep -P "$master" | head -1 || true)
		if alive "$worker" && listening &&
		   { [ "${srv#stock-}" != "$srv" ] || grep -q 'asyncfio: backend' "$dir/error.log"; }; then
			break
		fi
		i=$((i + 1))
		[ $i -lt 200 ] || die "$srv did not start in 10 s: $(tail -3 "$dir/error.log")"
		sleep 0.05
	done
	case $srv in
	stock-*) ;;
	*)	b=${srv%%+sendfile*}
		grep -q "asyncfio: backend \"${b%-*}\", mode \"${b#*-}\"" "$dir/error.log" ||
			die "$srv runs another backend or mode: $(grep 'asyncfio:' "$dir/error.log" | head -2)" ;;
	esac
}

# SIGTERM, then waits until master and worker are gone and the port is
# free (SIGKILL after 10 s), so that the next server can bind it.
stop_server() {
	kill "$master" 2>/dev/null || true
	i=0
	while alive "$master" || alive "$worker" || listening; do
		i=$((i + 1))
		if [ $i = 200 ]; then
			echo "nginx-bench: $master/$worker still there 10 s after SIGTERM, SIGKILL" >&2
			kill -9 "$master" "$worker" 2>/dev/null || true
		fi
		[ $i -lt 400 ] || die "the server on port $port does not go away"
		sleep 0.05
	done
}

# a server left by a run that failed is stopped at exit
trap 'if alive "$master"; then stop_server; fi' EXIT

cpu_ticks() {
	awk '{ print $14 + $15 }' "/proc/$1/stat"
}
disk_read_sectors() {
	awk -v d="$disk" '$3 == d { print $6 }' /proc/diskstats
}
# ticks of CPU $1: busy (user nice system irq softirq steal), total (with
# idle and iowait), interrupts (irq softirq: much of loopback TCP)
cpu_line() {
	awk -v c="cpu$1" '$1 == c { print $2 + $3 + $4 + $7 + $8 + $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9, $7 + $8 }' /proc/stat
}

wrk_run() {
	# wrk_run THREADS CONNS SECONDS SCRIPT
	taskset -c "$client_cpu" wrk -t"$1" -c"$2" -d"$3s" -s "$4" "http://127.0.0.1:$port/" 2>&1
}

run_one() {
	size=$1 cache=$2 srv=$3 rep=$4
	dir=$out/run
	rm -rf "$dir"
	mkdir -p "$dir"
	server_conf "$srv" "$cache" "$dir" > "$dir/nginx.conf"
	bin=$patched
	case $srv in stock-*) bin=$stock ;; esac
	if [ "$cache" = interference ]; then
		wrk_script 4k cached > "$dir/req.lua"
		wrk_script 1m evicted > "$dir/big.lua"
	else
		wrk_script "$size" "$cache" > "$dir/req.lua"
	fi
	start_server "$bin" "$dir" "$srv"
	# a short warm-up: the server answers, its caches of open files and
	# buffers are made; its requests are not counted
	warmup=$(wrk_run 1 10 1 "$dir/req.lua")
	set -- $(echo "$warmup" | sed -n 's/^RESULT //p')
	[ "${1:-0}" -gt 0 ] && [ "${5:-1}" = 0 ] ||
		die "$srv answered the warm-up of $size/$cache with errors: $(echo "$warmup" | tail -3 | tr '\n' ' ') $(tail -2 "$dir/error.log")"
	case $cache in
	cached) ;;
	interference) evict 1m ;;
	*) evict $(classes_of "$size") ;;
	esac
	log0=$(wc -l < "$dir/error.log")
	if [ "$cache" = interference ]; then
		# cold 1 MiB files on 3/4 of the connections, running before the
		# small files' wrk starts and until after it ends; the rest ask
		# for cached 4 KiB files: the row is the small files' figures
		wrk_run 1 $((conns * 3 / 4)) $((secs + 2)) "$dir/big.lua" > "$dir/big.out" &
		big=$!
		sleep 1
		kill -0 $big 2>/dev/null || die "the 1 MiB wrk of the interference run ended early: $(cat "$dir/big.out")"
	fi
	t0=$(cpu_ticks "$worker")
	d0=$(disk_read_sectors)
	c0=$(cpu_line "$client_cpu")
	s0=$(cpu_line "$server_cpu")
	if [ "${PERF:-0}" = 1 ]; then
		mkdir -p "$out/perf"
		pf=$out/perf/$size-$cache-$srv-$rep
		taskset -c "$client_cpu" perf record -q -g -p "$worker" -o "$pf.data" -- sleep "$secs" 2>/dev/null &
		perf_pid=$!
	fi
	if [ "${SYSCALLS:-0}" = 1 ]; then
		mkdir -p "$out/syscalls"
		sc=$out/syscalls/$size-$cache-$srv-$rep
		# on the worker's CPU, not by its pid: that takes one fd per
		# tracepoint and thread, and io-wq's threads run out of fds
		taskset -c "$client_cpu" perf stat -x, -a -C "$server_cpu" -e 'syscalls:sys_enter_*' \
			-o "$sc.stat" -- sleep "$secs" 2>/dev/null &
		syscalls_pid=$!
	fi
	if [ "$cache" = interference ]; then
		wrk_run 1 $((conns / 4)) "$secs" "$dir/req.lua" > "$dir/small.out"
		t1=$(cpu_ticks "$worker")
		d1=$(disk_read_sectors)
		c1=$(cpu_line "$client_cpu")
		s1=$(cpu_line "$server_cpu")
		kill -0 $big 2>/dev/null ||
			die "the 1 MiB wrk ended before the 4 KiB one: $(cat "$dir/big.out")"
		wait $big || true
		big_res=$(sed -n 's/^RESULT //p' "$dir/big.out")
		[ -n "$big_res" ] || die "no result from the 1 MiB wrk: $(cat "$dir/big.out")"
	else
		wrk_run "$wrk_threads" "$conns" "$secs" "$dir/req.lua" > "$dir/small.out"
		t1=$(cpu_ticks "$worker")
		d1=$(disk_read_sectors)
		c1=$(cpu_line "$client_cpu")
		s1=$(cpu_line "$server_cpu")
		big_res="0 0 0 0 0"
	fi
	res=$(sed -n 's/^RESULT //p' "$dir/small.out")
	[ -n "$res" ] || die "no result from wrk: $(cat "$dir/small.out")"
	if [ "${PERF:-0}" = 1 ]; then
		wait "$perf_pid" || true
		perf report -i "$pf.data" --no-children --sort symbol --stdio 2>/dev/null |
			grep -v '^$' | grep '^ *[0-9.]*%' | head -25 > "$pf.top" || true
	fi
	if [ "${SYSCALLS:-0}" = 1 ]; then
		wait "$syscalls_pid" || true
		set -- $res
		small_reqs=$1
		set -- $big_res
		# per request (both kinds where two wrk ran), the calls made at
		# least once every 20 requests
		awk -F, -v req=$((small_reqs + $1)) '$1 + 0 > 0 && $3 ~ /sys_enter_/ {
			sub(/.*sys_enter_/, "", $3); n[$3] = $1; all += $1 }
		    END { if (!all) { print "no counts: perf stat failed"; exit }
			if (!req) exit
			printf "all %.2f\n", all / req
			for (c in n) if (n[c] / req >= 0.05) printf "%s %.2f\n", c, n[c] / req }' \
			"$sc.stat" | sort -k2 -rn > "$sc.txt"
	fi
	log_errors=$(tail -n +$((log0 + 1)) "$dir/error.log" | grep -c '\[\(error\|crit\|alert\|emerg\)\]' || true)
	stop_server
	set -- $res
	req=$1 bytes=$2 p50=$3 p99=$4 err=$5
	set -- $big_res
	awk -v size="$size" -v cache="$cache" -v srv="$srv" -v rep="$rep" \
	    -v req="$req" -v bytes="$bytes" -v p50="$p50" -v p99="$p99" -v err="$err" \
	    -v big="$1" -v bigp99="$4" -v bigerr="$5" -v secs="$secs" -v cpu=$((t1 - t0)) -v hz="$hz" \
	    -v disk=$(((d1 - d0) * 512)) -v logerr="$log_errors" \
	    -v c0="$c0" -v c1="$c1" -v s0="$s0" -v s1="$s1" \
	    'BEGIN {
	        split(c0, a, " "); split(c1, b, " "); split(s0, x, " "); split(s1, y, " ")
	        client = b[2] > a[2] ? 100 * (b[1] - a[1]) / (b[2] - a[2]) : 0
	        server = y[2] > x[2] ? 100 * (y[1] - x[1]) / (y[2] - x[2]) : 0
	        irq = y[2] > x[2] ? 100 * (y[3] - x[3]) / (y[2] - x[2]) : 0
	        busy = 100 * cpu / hz / secs
	        other = server - busy - irq; if (other < 0) other = 0
	        printf "%s,%s,%s,%d,%.0f,%.1f,%.0f,%.1f,%.0f,%.0f,%.0f,%.0f,%.2f,%.2f,%d,%d,%.0f,%.1f,%d\n",
	            size, cache, srv, rep, req / secs, bytes / secs / 1048576, disk / secs / 1048576,
	            req + big ? cpu / hz * 1e6 / (req + big) : 0, busy, irq, other, client,
	            p50 / 1000, p99 / 1000, err, logerr, big / (secs + 2), bigp99 / 1000, bigerr }' >> "$out/nginx-bench.csv"
	tail -1 "$out/nginx-bench.csv"
}

# Whoever started us under 'flock /tmp/afio-bench.lock' already holds it.
lock_held() {
	for fd in /proc/$$/fd/*; do
		[ "$(readlink "$fd")" != /tmp/afio-bench.lock ] || return 0
	done
	return 1
}
lock=${LOCK:-1}
[ "$lock" = 0 ] || ! lock_held || lock=0

# One round: every server once for a cell, in the order of the
# repetition; /tmp/afio-bench.lock is held for the round (a minute or two)
# so that others' benchmarks run between rounds, not inside one.
round() {
	size=$1 cache=$2 rep=$3
	order=$servers
	[ $((rep % 2)) = 0 ] && order=$(echo $servers | tr ' ' '\n' | tac | tr '\n' ' ')
	if [ "$lock" = 1 ]; then
		exec 9>>/tmp/afio-bench.lock
		flock -n 9 || {
			echo "nginx-bench: waiting for /tmp/afio-bench.lock (another benchmark)" >&2
			flock 9
		}
	fi
	case $cache in
	cached) warm "$size" ;;
	interference) warm 4k ;;
	esac
	for srv in $order; do
		run_one "$size" "$cache" "$srv" "$rep"
	done
	if [ "$lock" = 1 ]; then
		flock -u 9
		exec 9>&-
	fi
}

make_files
echo "size,cache,server,rep,req_per_s,MiB_per_s,disk_MiB_per_s,worker_cpu_us_per_req,worker_busy_pct,server_cpu_irq_pct,server_cpu_other_pct,client_cpu_busy_pct,p50_ms,p99_ms,errors,log_errors,big_req_per_s,big_p99_ms,big_errors" > "$out/nginx-bench.csv"
{
	echo "start $(date -u '+%F %T') load: $(uptime)"
} > "$out/load.txt"
start=$(date +%s)
for size in $sizes; do
	for cache in $caches; do
		for rep in $(seq "$reps"); do
			round "$size" "$cache" "$rep"
		done
	done
done

if [ "${INTERFERENCE:-1}" = 1 ]; then
	for rep in $(seq "$reps"); do
		round 4k interference "$rep"
	done
fi
echo "end   $(date -u '+%F %T') load: $(uptime); $(($(date +%s) - start)) s" >> "$out/load.txt"
cat "$out/load.txt"

python3 "$here/nginx-bench-report.py" "$out/nginx-bench.csv" > "$out/nginx-bench.md"
cat "$out/nginx-bench.md"
