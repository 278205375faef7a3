#!/bin/bash
# SPDX-License-Identifier: MIT
# afio-httpd against nginx on the same files, with the same client (wrk),
# the same pinning (server on one CPU, client on another), runs alternated.
# Prints requests/s, MB/s, server CPU per request and our/nginx-best ratios,
# writes a CSV (one line per run), a CSV of medians and a PNG chart.
# bench/README.md, section "HTTP file server", says how to read it;
# bench/results/2026-12-01-http.md holds what it measured here.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(dirname "$here")

usage() {
	cat <<EOF
usage: bench/http-bench.sh [options]
  --httpd PATH        afio-httpd binary (default build/examples/afio-httpd)
  --dir DIR           files, configs and logs go to DIR and stay there; the
                      files are made again only if missing or of a wrong size
  --scratch-in DIR    without --dir: where the scratch directory is made and
                      removed at exit (default: the build dir of --httpd)
  --keep              keep the scratch directory
  --sizes LIST        file sizes (default 4k,100k,1m)
  --files N           files of each size, requests rotate over them (default 16)
  --conns LIST        wrk connections (default 50,200)
  --backends LIST     io_uring,libaio,threads (default all three)
  --modes LIST        inline,async,hybrid (default all three)
  --nginx LIST        nginx variants: sendfile, plain, aio (sendfile off; aio
                      threads), aio-sendfile (sendfile on; aio threads),
                      directio (aio threads; directio 4k), directio-1m (the
                      same with output_buffers 2 1m) (default
                      sendfile,plain,aio; with --direct: directio,directio-1m)
  --duration S        seconds measured per cell, whole seconds (default 3)
  --warmup S          seconds of unmeasured load before each cell (default 1)
  --repeat N          rounds; every other one in reverse order (default 2)
  --quick             a few short cells: --sizes 4k,1m --conns 50
                      --modes inline --duration 1 --warmup 0 --repeat 1
  --direct            afio-httpd --direct against nginx "aio threads;
                      directio 4k;", page cache dropped before each cell
  --workers N         afio-httpd --workers N and nginx worker_processes N
  --max-conn N        afio-httpd --max-conn N
  --timeout S         afio-httpd --timeout S
  --httpd-arg ARG     one more argument for afio-httpd (repeatable)
  --nginx-directive D one more directive for nginx's http block (repeatable)
  --server-cpus LIST  CPUs of the servers, taskset -c (default 0)
  --client-cpus LIST  CPUs of wrk (default 1)
  --wrk-threads N     wrk -t (default 1)
  --csv PATH          one line per run (default BUILD/http-bench.csv); the
                      medians go to PATH with -summary before .csv
  --png PATH          chart, '' for none (default BUILD/http-bench.png)
  --no-lock           do not take /tmp/afio-bench.lock around each round
  --lock-wait S       wait at most S seconds for the lock, then run without it
                      (default: as long as it takes)
Exits 77 when nginx or wrk is missing (scripts/install-deps.sh --http).
EOF
}

httpd=$top/build/examples/afio-httpd
dir=""
scratch_in=""
keep=0
sizes=4k,100k,1m
nfiles=16
conns=50,200
backends=io_uring,libaio,threads
modes=inline,async,hybrid
variants=""
duration=3
warmup=1
repeat=2
direct=0
workers=""
server_cpus=0
client_cpus=1
wrk_threads=1
csv=""
png=""
png_given=0
lock=1
lock_wait=""
httpd_extra=()
nginx_extra=()

need_arg() {
	[ $# -ge 2 ] || { echo "$1: needs a value" >&2; exit 2; }
}

while [ $# -gt 0 ]; do
	case $1 in
	--httpd|--dir|--scratch-in|--sizes|--files|--conns|--backends|--modes|--nginx|--duration|\
	--warmup|--repeat|--workers|--max-conn|--timeout|--httpd-arg|\
	--nginx-directive|--lock-wait|--server-cpus|--client-cpus|--wrk-threads|--csv|--png)
		need_arg "$@" ;;
	esac
	case $1 in
	--httpd) httpd=$2; shift ;;
	--dir) dir=$2; keep=1; shift ;;
	--scratch-in) scratch_in=$2; shift ;;
	--keep) keep=1 ;;
	--sizes) sizes=$2; shift ;;
	--files) nfiles=$2; shift ;;
	--conns) conns=$2; shift ;;
	--backends) backends=$2; shift ;;
	--modes) modes=$2; shift ;;
	--nginx) variants=$2; shift ;;
	--duration) duration=$2; shift ;;
	--warmup) warmup=$2; shift ;;
	--repeat) repeat=$2; shift ;;
	--quick) sizes=4k,1m conns=50 modes=inline duration=1 warmup=0 repeat=1 ;;
	--direct) direct=1 ;;
	--workers) workers=$2; httpd_extra+=(--workers "$2"); shift ;;
	--max-conn) httpd_extra+=(--max-conn "$2"); shift ;;
	--timeout) httpd_extra+=(--timeout "$2"); shift ;;
	--httpd-arg) httpd_extra+=("$2"); shift ;;
	--nginx-directive) nginx_extra+=("$2"); shift ;;
	--server-cpus) server_cpus=$2; shift ;;
	--client-cpus) client_cpus=$2; shift ;;
	--wrk-threads) wrk_threads=$2; shift ;;
	--csv) csv=$2; shift ;;
	--png) png=$2; png_given=1; shift ;;
	--no-lock) lock=0 ;;
	--lock-wait) lock_wait=$2; shift ;;
	-h|--help) usage; exit 0 ;;
	*) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
	esac
	shift
done

is_count() {
	case $2 in
	''|*[!0-9]*) echo "$1: expected a whole number, got \"$2\"" >&2; exit 2 ;;
	esac
}
is_count --duration "$duration"
is_count --warmup "$warmup"
is_count --repeat "$repeat"
is_count --files "$nfiles"
is_count --wrk-threads "$wrk_threads"
[ -z "$lock_wait" ] || is_count --lock-wait "$lock_wait"
if [ "$duration" -eq 0 ] || [ "$repeat" -eq 0 ] || [ "$nfiles" -eq 0 ]; then
	echo "--duration, --repeat and --files must be at least 1" >&2
	exit 2
fi
for c in ${conns//,/ }; do
	is_count --conns "$c"
done
for b in ${backends//,/ }; do
	case $b in io_uring|libaio|threads) ;;
	*) echo "--backends: unknown backend \"$b\"" >&2; exit 2 ;; esac
done
for m in ${modes//,/ }; do
	case $m in inline|async|hybrid) ;;
	*) echo "--modes: unknown mode \"$m\"" >&2; exit 2 ;; esac
done
[ -n "$variants" ] || { [ $direct -eq 1 ] && variants=directio,directio-1m || variants=sendfile,plain,aio; }
for v in ${variants//,/ }; do
	case $v in sendfile|plain|aio|aio-sendfile|directio|directio-1m) ;;
	*) echo "--nginx: unknown variant \"$v\"" >&2; exit 2 ;; esac
done

size_bytes() {
	local n=${1%[kKmMgG]}
	is_count --sizes "$n"
	case $1 in
	*[kK]) echo $((n * 1024)) ;;
	*[mM]) echo $((n * 1024 * 1024)) ;;
	*[gG]) echo $((n * 1024 * 1024 * 1024)) ;;
	*) echo "$n" ;;
	esac
}
for s in ${sizes//,/ }; do
	size_bytes "$s" >/dev/null
done

nginx=$(command -v nginx || ls /usr/sbin/nginx 2>/dev/null || true)
wrk=$(command -v wrk || true)
if [ -z "$nginx" ] || [ -z "$wrk" ]; then
	echo "http-bench: needs nginx and wrk (scripts/install-deps.sh --http)" >&2
	exit 77
fi
[ -x "$httpd" ] || { echo "http-bench: no afio-httpd at $httpd (build it first)" >&2; exit 1; }
httpd=$(cd "$(dirname "$httpd")" && pwd)/$(basename "$httpd")
build=$(dirname "$(dirname "$httpd")")
[ -n "$csv" ] || csv=$build/http-bench.csv
[ $png_given -eq 1 ] || png=$build/http-bench.png

if [ -n "$dir" ]; then
	mkdir -p "$dir"
else
	dir=$(mktemp -d "${scratch_in:-$build}/http-bench.XXXXXX")
fi
dir=$(cd "$dir" && pwd)

# The one server running, if any: stopped by pid (never by name, there may
# be a system nginx).
server_pid=""
cleanup() {
	[ -z "$server_pid" ] || stop_server
	if [ $keep -eq 0 ]; then
		rm -rf "$dir"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- the files --------------------------------------------------------------

# Random bytes, several files per size: the server's caches and the page
# cache see more than one hot file, and nothing compresses.
make_files() {
	local s bytes i f
	for s in ${sizes//,/ }; do
		bytes=$(size_bytes "$s")
		mkdir -p "$dir/www/$s"
		for ((i = 0; i < nfiles; i++)); do
			f=$dir/www/$s/$(printf '%02d' $i).bin
			if [ ! -f "$f" ] || [ "$(stat -c %s "$f")" -ne "$bytes" ]; then
				head -c "$bytes" /dev/urandom >"$f"
			fi
		done
	done
	chmod -R a+rX "$dir/www"
	sync
}

# Before a cached cell the files are read once: something on this kind of
# machine reclaims page cache that has been idle for a while.  Before a
# direct cell the cache is dropped, so that no file comes from memory.
prepare_cache() {
	local s=$1
	if [ $direct -eq 0 ]; then
		cat "$dir/www/$s"/*.bin >/dev/null
	elif [ -w /proc/sys/vm/drop_caches ]; then
		sync
		echo 3 2>/dev/null >/proc/sys/vm/drop_caches ||
			echo "  the page cache could not be dropped" >&2
	fi
}

# --- the servers -------------------------------------------------------------

free_port() {
	python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

# nginx only ever touches the scratch directory: its own prefix, pid file,
# error log (also with -e, for the messages before the configuration is
# read), temp paths and a port nobody listens on; -g 'daemon off;' keeps it
# our child so that it is stopped by pid.
write_nginx_conf() {
	local variant=$1 port=$2 conf=$3 user="" d
	[ "$(id -u)" -ne 0 ] || user="user $(id -un) $(id -gn);"
	{
		cat <<EOF
$user
worker_processes ${workers:-1};
pid $dir/nginx/nginx.pid;
error_log $dir/nginx/error.log warn;
events {
	worker_connections 4096;
}
http {
	access_log off;
	default_type application/octet-stream;
	keepalive_timeout 65;
	keepalive_requests 1000000;
	client_body_temp_path $dir/nginx/tmp/body;
	proxy_temp_path $dir/nginx/tmp/proxy;
	fastcgi_temp_path $dir/nginx/tmp/fastcgi;
	uwsgi_temp_path $dir/nginx/tmp/uwsgi;
	scgi_temp_path $dir/nginx/tmp/scgi;
EOF
		# nginx 1.22 with both open_file_cache and directio fails some
		# reads with EINVAL ("pread() ... failed (22: Invalid argument)").
		case $variant in
		directio*) ;;
		*) echo "	open_file_cache max=1024 inactive=60s;" ;;
		esac
		case $variant in
		sendfile) echo "	sendfile on; tcp_nopush on;" ;;
		plain) echo "	sendfile off;" ;;
		aio) echo "	sendfile off; aio threads;" ;;
		aio-sendfile) echo "	sendfile on; tcp_nopush on; aio threads;" ;;
		directio) echo "	sendfile off; aio threads; directio 4k;" ;;
		directio-1m) echo "	sendfile off; aio threads; directio 4k; output_buffers 2 1m;" ;;
		esac
		for d in "${nginx_extra[@]}"; do
			echo "	$d"
		done
		cat <<EOF
	server {
		listen 127.0.0.1:$port;
		root $dir/www;
	}
}
EOF
	} >"$conf"
}

server_port=""
server_note=""

# Starts nginx in one variant; sets server_pid (the master) and server_port.
start_nginx() {
	local variant=$1 conf=$dir/nginx/$1.conf i
	mkdir -p "$dir/nginx/tmp"
	for _ in 1 2 3; do
		server_port=$(free_port)
		write_nginx_conf "$variant" "$server_port" "$conf"
		: >"$dir/nginx/error.log"
		taskset -c "$server_cpus" "$nginx" -p "$dir/nginx/" -c "$conf" \
			-e "$dir/nginx/error.log" -g 'daemon off;' \
			</dev/null >"$dir/nginx/stdout" 2>&1 9>&- &
		server_pid=$!
		for ((i = 0; i < 100; i++)); do
			if ! kill -0 "$server_pid" 2>/dev/null; then
				break
			fi
			if [ -n "$(worker_pids "$server_pid")" ] && port_open "$server_port"; then
				return 0
			fi
			sleep 0.05
		done
		stop_server
		# Someone took the port between our probe and nginx's bind: retry.
		grep -q 'Address already in use' "$dir/nginx/error.log" || break
	done
	server_note=$(cat "$dir/nginx/error.log" "$dir/nginx/stdout" 2>/dev/null | head -n 1)
	return 1
}

port_open() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# nginx's workers: the master's children.
worker_pids() {
	local master=$1 f=/proc/$1/task/$1/children st rest field
	if [ -r "$f" ]; then
		cat "$f"
		return 0
	fi
	for st in /proc/[0-9]*/stat; do
		rest=$(cat "$st" 2>/dev/null) || continue
		read -r -a field <<<"${rest##*) }"
		[ "${field[1]}" != "$master" ] || echo "${st//[!0-9]/}"
	done
}

# Starts afio-httpd; flags it may not know (--direct, --workers, ...) are
# passed only when asked for.  Sets server_pid and server_port, or
# server_note with why it did not start.
start_httpd() {
	local backend=$1 mode=$2 log=$dir/httpd.$1.$2 i line args
	args=(--port 0 --root "$dir/www" --backend "$backend" --mode "$mode")
	[ $direct -eq 0 ] || args+=(--direct)
	args+=("${httpd_extra[@]}")
	# Emptied here, not by the child's redirection, which may come after
	# the first look below: the last cell's port must not be read.
	: >"$log.out"
	taskset -c "$server_cpus" "$httpd" "${args[@]}" </dev/null >"$log.out" 2>"$log.err" 9>&- &
	server_pid=$!
	for ((i = 0; i < 200; i++)); do
		line=$(head -n 1 "$log.out")
		case $line in
		"listening on "*)
			server_port=${line##*:}
			return 0 ;;
		esac
		kill -0 "$server_pid" 2>/dev/null || break
		sleep 0.025
	done
	stop_server
	server_note=$(head -n 1 "$log.err")
	return 1
}

# SIGTERM (nginx: fast shutdown; afio-httpd: finish and print its stats),
# and SIGKILL for it and its children after 5 s.
stop_server() {
	local i
	kill -TERM "$server_pid" 2>/dev/null || true
	for ((i = 0; i < 200; i++)); do
		server_alive || break
		sleep 0.025
	done
	if [ $i -eq 200 ]; then
		# Still running, so its children are its own: they go first.
		# shellcheck disable=SC2046
		kill -KILL $(worker_pids "$server_pid") "$server_pid" 2>/dev/null || true
	fi
	server_status=0
	wait "$server_pid" 2>/dev/null || server_status=$?
	server_pid=""
}

# A zombie is gone for our purposes: stop_server's wait reaps it.
server_alive() {
	local state
	state=$(cut -d' ' -f3 "/proc/$server_pid/stat" 2>/dev/null || true)
	case $state in ''|Z) return 1 ;; esac
}

# Busy clock ticks of CPUs (taskset's list), from /proc/stat: user, nice,
# system and steal; less the server's or wrk's own, what others took.
# Interrupts are left out: loopback traffic runs much of TCP in softirq,
# for the server and the client alike.
cpus_busy_ticks() {
	local list="" part a b
	for part in ${1//,/ }; do
		a=${part%-*} b=${part#*-}
		for ((; a <= b; a++)); do
			list="$list cpu$a"
		done
	done
	awk -v list="$list " '{ if (index(list, " " $1 " ")) t += $2 + $3 + $4 + $9 }
		END { print t + 0 }' /proc/stat
}

# utime + stime of the processes, in clock ticks (every thread, io_uring's
# workers and nginx's thread pool included).
cpu_ticks() {
	local t=0 p rest field
	for p in "$@"; do
		rest=$(cat "/proc/$p/stat" 2>/dev/null) || continue
		# Fields after the command name, which may hold spaces: state is [0].
		read -r -a field <<<"${rest##*) }"
		t=$((t + field[11] + field[12]))
	done
	echo $t
}

# User and system time of the children this shell has waited for (wrk),
# from 'times', which has to run in this shell, not in a subshell.
children_cpu() {
	times >"$dir/times"
	tail -n 1 "$dir/times" | awk '{
		s = 0
		for (i = 1; i <= 2; i++) {
			split($i, a, "m"); sub("s", "", a[2]); s += a[1] * 60 + a[2]
		}
		printf "%.3f\n", s }'
}

# --- the client ---------------------------------------------------------------

# Requests rotate over the files of one size; done() prints the exact
# counts that the table is made of.
write_wrk_script() {
	cat >"$dir/rotate.lua" <<'EOF'
local reqs = {}
local next_req = 0

function init(args)
	for _, path in ipairs(args) do
		reqs[#reqs + 1] = wrk.format("GET", path)
	end
	next_req = math.random(#reqs) - 1
end

function request()
	next_req = next_req % #reqs + 1
	return reqs[next_req]
end

function done(summary, latency, requests)
	local e = summary.errors
	-- %.0f: counts past 2^31 (bytes) must not wrap
	io.write(string.format("wrk-result requests=%.0f bytes=%.0f duration_us=%.0f " ..
		"connect=%d read=%d write=%d status=%d timeout=%d p50_us=%.0f p99_us=%.0f\n",
		summary.requests, summary.bytes, summary.duration, e.connect, e.read,
		e.write, e.status, e.timeout, latency:percentile(50),
		latency:percentile(99)))
end
EOF
}

run_wrk() {
	local secs=$1 c=$2 s=$3 out=$4 paths=() f
	for f in "$dir/www/$s"/*.bin; do
		paths+=("/$s/${f##*/}")
	done
	taskset -c "$client_cpus" "$wrk" -t "$wrk_threads" -c "$c" -d "${secs}s" \
		--timeout 10s -s "$dir/rotate.lua" "http://127.0.0.1:$server_port/" \
		-- "${paths[@]}" >"$out" 2>&1 || true
}

# --- one cell -----------------------------------------------------------------

csv_header="size,bytes,conns,server,backend,mode,variant,direct,repeat,requests,resp_bytes,duration_s,req_s,mb_s,errors,non_2xx,lat_p50_us,lat_p99_us,server_cpu_s,server_cpu_util,cpu_us_per_req,client_cpu_s,others_cpu_util,client_others_cpu_util,fallbacks,path_ops,note"
skipped=" "

csv_row() {
	echo "$1" >>"$csv"
}

# A CSV field: quoted, its quotes doubled.
csv_quote() {
	local q='"'
	[ -n "$1" ] || return 0
	printf '"%s"' "${1//$q/$q$q}"
}

# The sum over afio-httpd's workers of "NAME=N" in its stats lines, or
# nothing when it printed none.
stat_sum() {
	grep -o "[ ]$1=[0-9]*" "$2" 2>/dev/null |
		awk -F= '{ n += $2; seen = 1 } END { if (seen) print n }' || true
}

# run_cell SIZE CONNS REPEAT CONFIG; CONFIG is nginx:VARIANT or BACKEND:MODE.
run_cell() {
	local s=$1 c=$2 r=$3 cfg=$4 kind=${4%%:*} what=${4#*:}
	local backend="" mode="" variant="" server log pids t0 t1 b0 b1 cb0 cb1 c0 c1 res fb po note died
	if [ "$kind" = nginx ]; then
		server=nginx variant=$what
	else
		server=afio-httpd backend=$kind mode=$what
	fi
	case $skipped in *" $cfg "*) return 0 ;; esac
	prepare_cache "$s"
	if [ $server = nginx ]; then
		start_nginx "$variant" || {
			echo "  nginx $variant did not start: $server_note" >&2
			skipped="$skipped$cfg "
			return 0
		}
		log=$dir/nginx/error.log
	else
		start_httpd "$backend" "$mode" || {
			echo "  afio-httpd $backend/$mode skipped: $server_note" >&2
			skipped="$skipped$cfg "
			csv_row "$s,$(size_bytes "$s"),$c,$server,$backend,$mode,,$direct,$r,,,,,,,,,,,,,,,,,,$(csv_quote "did not start: $server_note")"
			return 0
		}
		log=$dir/httpd.$backend.$mode.err
	fi
	[ "$warmup" -eq 0 ] || run_wrk "$warmup" "$c" "$s" "$dir/wrk-warmup.out"
	pids=$server_pid
	[ $server != nginx ] || pids="$pids $(worker_pids "$server_pid")"
	# shellcheck disable=SC2086
	t0=$(cpu_ticks $pids) b0=$(cpus_busy_ticks "$server_cpus") cb0=$(cpus_busy_ticks "$client_cpus")
	children_cpu >"$dir/cpu0"
	run_wrk "$duration" "$c" "$s" "$dir/wrk.out"
	children_cpu >"$dir/cpu1"
	c0=$(cat "$dir/cpu0") c1=$(cat "$dir/cpu1")
	# shellcheck disable=SC2086
	t1=$(cpu_ticks $pids) b1=$(cpus_busy_ticks "$server_cpus") cb1=$(cpus_busy_ticks "$client_cpus")
	note=""
	if [ $server = nginx ]; then
		note=$(grep -E '\[(emerg|alert|crit|error)\]' "$log" |
			awk 'NR == 1 { first = $0 } END { if (NR) printf "nginx logged %d errors, first: %s", NR, first }' ||
			true)
	fi
	died=0
	server_alive || died=1
	stop_server
	[ $died -eq 0 ] || note="the server died during the run, exit status $server_status: $(tail -n 1 "$log" 2>/dev/null)${note:+; $note}"
	res=$(grep '^wrk-result ' "$dir/wrk.out" || true)
	if [ -z "$res" ]; then
		note="${note:+$note; }wrk: $(grep -v '^wrk-result' "$dir/wrk.out" | head -n 1)"
		echo "  $cfg: $note" >&2
		csv_row "$s,$(size_bytes "$s"),$c,$server,$backend,$mode,$variant,$direct,$r,,,,,,,,,,,,,,,,,,$(csv_quote "$note")"
		return 0
	fi
	[ -z "$note" ] || echo "  $cfg: $note" >&2
	# afio-httpd prints "fallbacks=N" per worker at exit, and "path_ops=N",
	# its opens and stats (on libaio always the pool's); older ones nothing.
	fb=$(stat_sum fallbacks "$log")
	po=$(stat_sum path_ops "$log")
	csv_row "$(echo "$res" | awk -v pre="$s,$(size_bytes "$s"),$c,$server,$backend,$mode,$variant,$direct,$r" \
		-v ticks=$((t1 - t0)) -v others=$((b1 - b0 - (t1 - t0))) -v cbusy=$((cb1 - cb0)) -v hz="$(getconf CLK_TCK)" -v ccpu="$(awk -v a="$c0" -v b="$c1" 'BEGIN { print b - a }')" \
		-v fb="$fb" -v po="$po" -v note="$(csv_quote "$note")" '{
		for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		secs = v["duration_us"] / 1e6
		cpu = ticks / hz
		errs = v["connect"] + v["read"] + v["write"] + v["timeout"]
		# %.0f, not %d: mawk stops %d at 2^31 - 1.
		cothers = cbusy / hz - ccpu
		printf "%s,%.0f,%.0f,%.3f,%.1f,%.2f,%.0f,%.0f,%.0f,%.0f,%.3f,%.3f,%.2f,%.3f,%.3f,%.3f,%s,%s,%s\n", pre,
			v["requests"], v["bytes"], secs, v["requests"] / secs, v["bytes"] / secs / 1e6,
			errs, v["status"], v["p50_us"], v["p99_us"], cpu, cpu / secs,
			v["requests"] ? cpu * 1e6 / v["requests"] : 0, ccpu,
			(others > 0 ? others : 0) / hz / secs, (cothers > 0 ? cothers : 0) / secs, fb, po, note }')"
	tail -n 1 "$csv" | awk -F, -v cfg="$cfg" '{
		printf "  %-6s c%-4s %-18s %10.0f req/s %9.1f MB/s  cpu %.2f  %s errors\n",
			$1, $3, cfg, $13, $14, $20, $15 + $16 }'
}

# --- the rounds ---------------------------------------------------------------

ours=()
for b in ${backends//,/ }; do
	for m in ${modes//,/ }; do
		ours+=("$b:$m")
	done
done
theirs=()
for v in ${variants//,/ }; do
	theirs+=("nginx:$v")
done

# ours and nginx's spread evenly through a round: with 9 of ours and 3 of
# nginx's, o o o n o o o n o o o n.
round_order() {
	local no=${#ours[@]} nt=${#theirs[@]} i j=0 order=()
	for ((i = 0; i < no; i++)); do
		order+=("${ours[i]}")
		while [ $j -lt "$nt" ] && [ $(((j + 1) * no)) -le $(((i + 1) * nt)) ]; do
			order+=("${theirs[j]}")
			j=$((j + 1))
		done
	done
	for (( ; j < nt; j++)); do
		order+=("${theirs[j]}")
	done
	echo "${order[@]}"
}

# Whoever started us under 'flock /tmp/afio-bench.lock' already holds it
# (flock(1) passes the descriptor on); taking it again would wait forever.
lock_held() {
	local fd
	for fd in "/proc/$$/fd"/*; do
		[ "$(readlink "$fd")" != /tmp/afio-bench.lock ] || return 0
	done
	return 1
}
[ $lock -eq 0 ] || ! lock_held || lock=0

run_round() {
	local s=$1 c=$2 r=$3 cfg order
	read -r -a order <<<"$(round_order)"
	if [ $((r % 2)) -eq 0 ]; then
		for ((i = ${#order[@]} - 1; i >= 0; i--)); do
			run_cell "$s" "$c" "$r" "${order[i]}"
		done
	else
		for cfg in "${order[@]}"; do
			run_cell "$s" "$c" "$r" "$cfg"
		done
	fi
}

make_files
write_wrk_script
mkdir -p "$(dirname "$csv")"
echo "$csv_header" >"$csv"
[ $direct -eq 0 ] || [ -w /proc/sys/vm/drop_caches ] ||
	echo "http-bench: not root, page cache not dropped before direct cells" >&2
echo "http-bench: $("$nginx" -v 2>&1), $("$wrk" --version 2>&1 | head -n 1 | cut -d' ' -f1-2)," \
	"$nfiles files per size in $dir/www, ${duration}s per cell + ${warmup}s warm-up," \
	"server on CPU $server_cpus, wrk -t$wrk_threads on CPU $client_cpus"
start=$(date +%s)
# Lock held one round at a time (tens of seconds), so that others' short
# benchmarks can run in between instead of waiting for the whole matrix.
for ((r = 1; r <= repeat; r++)); do
	for s in ${sizes//,/ }; do
		for c in ${conns//,/ }; do
			echo "round $r/$repeat: $s files, $c connections"
			if [ $lock -eq 1 ]; then
				exec 9>>/tmp/afio-bench.lock
				flock -n 9 || {
					echo "  waiting for /tmp/afio-bench.lock (someone else's benchmark)"
					flock ${lock_wait:+-w "$lock_wait"} 9 ||
						echo "  waited $lock_wait s, going on without the lock"
				}
				run_round "$s" "$c" "$r"
				flock -u 9
				exec 9>&-
			else
				run_round "$s" "$c" "$r"
			fi
		done
	done
done
echo "http-bench: $(($(date +%s) - start)) s; load average $(cut -d' ' -f1 /proc/loadavg)"

report=(python3 "$here/http-report.py" --csv "$csv" --png "$png")
"${report[@]}"
