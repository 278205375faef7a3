#!/bin/bash
# The echo server benchmark (bench/README.md, "Echo server"): afio-echo on
# every backend and mode (INLINE also with --recv pooled: a row
# BACKEND/MODE+pooled), the plain epoll echo server, and the same pattern
# straight on liburing (uring-raw, and uring-multishot with one multishot
# receive per connection: what io_uring gives with no library), against the
# same load generator, at several connection counts.
#
#   bench/echo-bench.sh [--build DIR] [--conns "1 2 100 1000 2000 5000"]
#                       [--rows "io_uring/inline ... epoll"] [--repeat N]
#                       [--warmup S] [--duration S] [--size BYTES] [--out DIR]
#                       [--quiet-wait S] [--nice N]
#   bench/echo-bench.sh --check [--build DIR] [--out DIR]
#
# The server runs on CPU 0 and the client on CPU 1 (taskset).  For each
# repeat and connection count, every row runs once, in an order that is
# reversed from one run to the next, so that no row always comes first;
# each such round holds /tmp/afio-bench.lock, so that no other benchmark
# runs meanwhile.  Tests and builds do not take that lock: before each
# run the script waits (up to --quiet-wait seconds) until the CPUs are
# nearly idle, and echo-bench reports what others took during the run
# (others_cpu_pct); --nice -10 (root) also lets server and client take
# the CPUs from builds that start meanwhile.  Writes OUT/echo-bench.csv
# (every run),
# OUT/echo-summary.csv (medians), OUT/echo-bench.png (the ratios to the
# peers, bench/echo-report.py), and prints the tables and the verdict.
# --check: a few short runs of every row without the lock, for the test
# suite; fails unless each one ran (a refusal where async cannot serve the
# connections counts as running); no figure is judged.
set -euo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
build=$src/build
conns="1 2 100 1000 2000 5000"
rows="io_uring/inline io_uring/inline+pooled io_uring/async io_uring/hybrid libaio/inline libaio/inline+pooled libaio/async libaio/hybrid threads/inline threads/inline+pooled threads/async threads/hybrid epoll uring-raw uring-multishot"
repeat=3
warmup=1
duration=2
size=1024
out=
check=
quiet_wait=60
nice=0
client_timeout=120

while [ $# -gt 0 ]; do
	case "$1" in
	--build) build=$(cd "$2" && pwd); shift 2 ;;
	--conns) conns=$2; shift 2 ;;
	--rows) rows=$2; shift 2 ;;
	--repeat) repeat=$2; shift 2 ;;
	--warmup) warmup=$2; shift 2 ;;
	--duration) duration=$2; shift 2 ;;
	--size) size=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--quiet-wait) quiet_wait=$2; shift 2 ;;
	--nice) nice=$2; shift 2 ;;
	--check) check=1 conns="2 1100" repeat=1 warmup=0.1 duration=0.2 quiet_wait=0 client_timeout=30; shift ;;
	-h|--help) sed -n '2,29s/^# \{0,1\}//p' "$0"; exit 0 ;;
	*) echo "echo-bench.sh: unknown option $1" >&2; exit 2 ;;
	esac
done
out=${out:-$build}
mkdir -p "$out"
echo_bin=$build/examples/afio-echo
epoll_bin=$build/bench/epoll-echo-server
client=$build/bench/echo-bench
uring_bin=$build/bench/uring-echo-server
for f in "$echo_bin" "$epoll_bin" "$client"; do
	[ -x "$f" ] || { echo "echo-bench.sh: $f missing; build first (ninja -C $build)" >&2; exit 2; }
done
# Built only where liburing is.
if [ ! -x "$uring_bin" ]; then
	rows=$(echo $rows | tr ' ' '\n' | grep -v '^uring-' | tr '\n' ' ')
fi

csv=$out/echo-bench.csv
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "server,backend,mode,conns,repeat,req_s,cpu_us_per_req,server_cpu_pct,client_cpu_pct,others_cpu_pct,steal_pct,busy_before_pct,status" > "$csv"

# The first value of key=... in a line of echo-bench output.
field() {
	sed -n "s/.* $1=\([^ ]*\).*/\1/p; s/^$1=\([^ ]*\).*/\1/p" <<<"$2" | head -1
}

# The machine's busy share of all CPUs over half a second, in percent.
busy_pct() {
	local a b
	a=$(head -1 /proc/stat)
	sleep 0.5
	b=$(head -1 /proc/stat)
	echo "$a $b" | awk '{ busy = ($13+$14+$15+$18+$19) - ($2+$3+$4+$7+$8);
		all = busy + ($16+$17) - ($5+$6); printf "%.0f", all ? 100 * busy / all : 0 }'
}

# Waits until the CPUs are nearly idle, or quiet_wait seconds have gone.
wait_quiet() {
	local start=$SECONDS
	busy=$(busy_pct)
	while [ "$busy" -gt 10 ] && [ $((SECONDS - start)) -lt "$quiet_wait" ]; do
		sleep 1
		busy=$(busy_pct)
	done
}

# Where a process that does not end sits in the kernel, for the log.
say_stuck() {
	echo "    stuck: pid $1 ($(tr '\0' ' ' < /proc/$1/cmdline 2>/dev/null | cut -c1-80))"
	for t in /proc/$1/task/*; do
		echo "    task ${t##*/}: $(cat "$t/wchan" 2>/dev/null) $(head -3 "$t/stack" 2>/dev/null | tr '\n' ' ')"
	done | head -8
}

# stop_server PID: SIGTERM, and SIGKILL 10 s later; false when it took that.
stop_server() {
	kill -TERM "$1" 2>/dev/null || true
	for _ in $(seq 100); do
		kill -0 "$1" 2>/dev/null || return 0
		sleep 0.1
	done
	say_stuck "$1"
	kill -KILL "$1" 2>/dev/null || true
	return 1
}

# run_cell ROW CONNS REPEAT: one server, one client run, one CSV line;
# sets stuck when a bound had to end the server or the client.
run_cell() {
	local row=$1 n=$2 rep=$3 backend=- mode=- server=epoll pid port line status=ok rc reason
	local busy=0
	stuck=
	[ "$quiet_wait" -gt 0 ] && wait_quiet
	# Emptied here and not by the server's own redirection, which the
	# background child does later: the wait below could meanwhile read
	# the previous server's announce, and take its port (connection
	# refused) or find the file emptied an instant after (no port).
	: >"$tmp/out"
	: >"$tmp/err"
	if [ "$row" = epoll ]; then
		nice -n "$nice" taskset -c 0 "$epoll_bin" --port 0 >"$tmp/out" 2>"$tmp/err" &
	elif [ "${row#uring-}" != "$row" ]; then
		server=$row
		nice -n "$nice" taskset -c 0 "$uring_bin" --port 0 \
			$([ "$row" = uring-multishot ] && echo --multishot) >"$tmp/out" 2>"$tmp/err" &
	else
		# BACKEND/MODE+lazy: afio-echo --eventfd lazy; +inside:
		# --eventfd none (the loop waits inside afio_poll()); +pooled:
		# --recv pooled; they may follow the mode, in any order.
		server=afio-echo backend=${row%/*} mode=${row#*/} eventfd=exact recv=own
		[ "${mode#*+lazy}" != "$mode" ] && eventfd=lazy
		[ "${mode#*+inside}" != "$mode" ] && eventfd=none
		[ "${mode#*+pooled}" != "$mode" ] && recv=pooled
		nice -n "$nice" taskset -c 0 "$echo_bin" --port 0 --backend "$backend" \
			--mode "${mode%%+*}" --eventfd $eventfd --recv $recv \
			--max-conn "$n" >"$tmp/out" 2>"$tmp/err" &
	fi
	pid=$!
	for _ in $(seq 200); do
		grep -q '^listening' "$tmp/out" 2>/dev/null && break
		kill -0 $pid 2>/dev/null || break
		sleep 0.05
	done
	port=$(sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$tmp/out")
	if [ -z "$port" ]; then
		if kill -0 $pid 2>/dev/null; then
			say_stuck $pid
			stop_server $pid || true
			stuck=1
			echo "no port announced in 10 s" >> "$tmp/err"
		fi
		rc=0
		wait $pid || rc=$?
		# What the server said, as one CSV-safe field; grep finding
		# nothing must not end the script (set -e).
		reason=$(grep -v ': backend ' "$tmp/err" | head -1 | tr ',' ';' || true)
		status="refused: ${reason:-exit $rc and nothing on stderr}"
		echo "$server,$backend,$mode,$n,$rep,,,,,,,$busy,$status" >> "$csv"
		printf '  %-16s %5s conns: %s\n' "$row" "$n" "$status"
		return
	fi
	if line=$(nice -n "$nice" taskset -c 1 timeout "$client_timeout" "$client" --port "$port" --conns "$n" --size "$size" \
			--warmup "$warmup" --duration "$duration" --server-pid $pid 2>"$tmp/cerr"); then
		:
	else
		status="failed: $(head -1 "$tmp/cerr" | tr ',' ';')"
		[ -s "$tmp/cerr" ] || { status="failed: client ended by the ${client_timeout} s bound"; stuck=1; }
	fi
	if ! stop_server $pid; then
		status="$status; server still running 10 s after SIGTERM"
		stuck=1
	fi
	wait $pid || status="$status; server exit $?: $(grep -v ': backend ' "$tmp/err" | head -1 | tr ',' ';')"
	echo "$server,$backend,$mode,$n,$rep,$(field req_s "$line"),$(field cpu_us_per_req "$line"),$(field server_cpu_pct "$line"),$(field client_cpu_pct "$line"),$(field others_cpu_pct "$line"),$(field steal_pct "$line"),$busy,$status" >> "$csv"
	printf '  %-16s %5s conns: %8s req/s  %6s us/req  server %5s%%  client %5s%%  others %5s%%\n' \
		"$row" "$n" "$(field req_s "$line")" "$(field cpu_us_per_req "$line")" \
		"$(field server_cpu_pct "$line")" "$(field client_cpu_pct "$line")" \
		"$(field others_cpu_pct "$line")"
}

# The rows of one round, forwards or backwards.
ordered_rows() {
	if [ $(($1 % 2)) -eq 0 ]; then
		echo $rows
	else
		echo $rows | tr ' ' '\n' | tac | tr '\n' ' '
	fi
}

echo "echo-bench: $(uname -r), $(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo '?'), " \
     "$size-byte messages, ${warmup}s warm-up + ${duration}s per run, $repeat repeats, nice $nice"
round=0
for rep in $(seq "$repeat"); do
	for n in $conns; do
		echo "repeat $rep, $n connections"
		[ -n "$check" ] || { exec 9>/tmp/afio-bench.lock; flock 9; }
		for row in $(ordered_rows $round); do
			run_cell "$row" "$n" "$rep"
			# The check is about every row running: one that a bound
			# had to end (said above, with where it sat) gets one more go.
			if [ -n "$check" ] && [ -n "$stuck" ]; then
				sed -i '$d' "$csv"
				echo "  $row at $n conns: stuck, run again"
				run_cell "$row" "$n" "$rep"
			fi
		done
		[ -n "$check" ] || flock -u 9
		round=$((round + 1))
	done
done

if [ -n "$check" ]; then
	bad=$(tail -n +2 "$csv" | grep -v ',ok$' | grep -v ',refused: .*at most 1024' || true)
	[ -z "$bad" ] || { echo "echo-bench.sh: runs that failed:"; echo "$bad"; exit 1; }
	echo "echo-bench.sh: all $(($(wc -l <"$csv") - 1)) runs ran"
fi
echo "runs: $csv, medians: $out/echo-summary.csv"
# Medians per row and connection count, the tables, the chart of the
# ratios (ours over epoll, and over the same on liburing) and the verdict,
# last.
python3 "$src/bench/echo-report.py" --csv "$csv" --summary "$out/echo-summary.csv" \
	--conns "$conns" --rows "$rows" --png "$([ -n "$check" ] || echo "$out/echo-bench.png")" \
	--title "$size-byte messages, server on CPU 0, client on CPU 1 ($(uname -r))"
