#!/bin/sh
# SPDX-License-Identifier: MIT
# afio-bench end to end, briefly: bad arguments exit 2; one short run per
# backend that probes as available, in every mode (buffered random reads,
# and direct random writes where the file system takes O_DIRECT), and one
# per raw engine (--raw) and through libuv (afio-uv-bench, when built),
# prints one JSON object with every documented key, completes I/O without
# errors and removes its scratch file; --compare (without fio) writes a CSV
# with a line per run, ends with its verdict and removes its scratch file too.  No figure is judged: only that the
# program measures and reports.  Usage: bench-check.sh AFIO-BENCH SCRATCH-DIR
set -u

bench=$1
dir=$2/bench-check.$$
fail=0
mkdir -p "$dir" || exit 1
trap 'rm -rf "$dir"' EXIT

not_ok() {
	echo "FAIL: $*"
	fail=1
}

expect_exit2() {
	"$bench" "$@" >/dev/null 2>"$dir/err"
	rc=$?
	if [ $rc -ne 2 ] || [ ! -s "$dir/err" ]; then
		not_ok "afio-bench $* exited $rc (want 2 and a message)"
	fi
}

expect_exit2 --bs 3x
expect_exit2 --bs 0
expect_exit2 --qd 0
expect_exit2 --backend nosuch
expect_exit2 --mode nosuch
expect_exit2 --rw sideways
expect_exit2 --runtime -1
expect_exit2 --size 1k --bs 4k
expect_exit2 --direct --buffered
expect_exit2 --no-such-option
expect_exit2 stray
expect_exit2 --raw nosuch

# One JSON object with the keys the documentation promises, and sane values.
check_json() {
	python3 -c '
import json, sys
want_submit = sys.argv[1]
d = json.loads(sys.argv[2])
keys = ["backend", "mode", "rw", "bs", "qd", "direct", "iops", "mib_s", "cpu_s",
        "iops_per_cpu_s", "lat_p50_us", "lat_p99_us", "lat_p999_us", "fallbacks"]
if not d["backend"] == "libuv":
    keys += ["loop_stall_max_us", "loop_stall_p99_us", "loop_calls"]
missing = [k for k in keys if k not in d]
if missing:
    sys.exit("missing keys %s" % missing)
if d["ios"] <= 0 or d["iops"] <= 0 or d["errors"] != 0:
    sys.exit("ios %s iops %s errors %s" % (d["ios"], d["iops"], d["errors"]))
if not 0 < d["lat_p50_us"] <= d["lat_p99_us"] <= d["lat_p999_us"]:
    sys.exit("latency percentiles out of order")
if d["submit"] != want_submit:
    sys.exit("submit %s, want %s" % (d["submit"], want_submit))
if "loop_calls" in keys and (d["loop_calls"] <= 0 or
                             not 0 < d["loop_stall_p99_us"] <= d["loop_stall_max_us"]):
    sys.exit("loop stall figures out of order")
' "$@"
}

# O_DIRECT where the file system takes it (tmpfs before Linux 6.6 does not).
if dd if=/dev/zero of="$dir/direct-probe" bs=4096 count=1 oflag=direct 2>/dev/null; then
	direct_rw="--rw randwrite --direct"
else
	echo "bench-check: no O_DIRECT in $dir; direct runs left out"
	direct_rw="--rw randwrite --buffered"
fi
rm -f "$dir/direct-probe"

backends=$("$bench" --probe | awk '$2 == "available" { print $1 }')
[ -n "$backends" ] || not_ok "afio-bench --probe found no backend"
for b in $backends; do
	for m in inline async hybrid; do
		for io in "--rw randread --buffered" "$direct_rw"; do
			# shellcheck disable=SC2086
			out=$("$bench" --dir "$dir" --backend "$b" --mode "$m" $io --bs 4k \
				--qd 8 --size 4m --runtime 0.05 --json) ||
				not_ok "afio-bench --backend $b --mode $m $io exited $?"
			check_json batch "$out" ||
				not_ok "afio-bench --backend $b --mode $m $io: $out"
		done
	done
	# shellcheck disable=SC2086
	out=$("$bench" --dir "$dir" --backend "$b" $direct_rw --submit-each --qd 4 \
		--size 4m --runtime 0.05 --json) || not_ok "--submit-each on $b exited $?"
	check_json each "$out" || not_ok "--submit-each on $b: $out"
done
# The same workload straight on each engine, and through libuv's pool.
raw_engines=$(echo "$backends" | sed 's/threads/psync/')
uv=$(dirname "$bench")/afio-uv-bench
for e in $raw_engines; do
	# shellcheck disable=SC2086
	out=$("$bench" --dir "$dir" --raw "$e" $direct_rw --qd 4 --threads 2 --size 4m \
		--runtime 0.05 --json) || not_ok "--raw $e exited $?"
	check_json batch "$out" || not_ok "--raw $e: $out"
done
peers=$(echo "$raw_engines" | wc -w)
if [ -x "$uv" ]; then
	head -c 4194304 /dev/urandom >"$dir/uv.dat"
	out=$("$uv" --file "$dir/uv.dat" --size 4194304 --bs 4096 --qd 4 --threads 2 \
		--runtime 0.05 --json) || not_ok "afio-uv-bench exited $?"
	check_json each "$out" || not_ok "afio-uv-bench: $out"
	rm -f "$dir/uv.dat"
	peers=$((peers + 1))
fi
"$bench" --compare --no-fio --repeat 1 --runtime 0.05 --size 4m --bs 4k --rw randread \
	--io buffered --dir "$dir" --csv "$dir/c.csv" --png '' >"$dir/compare.out" 2>&1 ||
	not_ok "afio-bench --compare exited $?: $(cat "$dir/compare.out")"
# Less the header, the probe's lines (what AUTO picks and why) and the
# nops, which say what a request costs on io_uring: 3 pairs at each of
# 2 batch sizes.
runs=$(($(grep -vc -e '^probe,' -e '^nop,' "$dir/c.csv") - 1))
want=$(($(echo "$backends" | wc -w) * 3 + peers))
[ "$runs" -eq "$want" ] || not_ok "--compare wrote $runs runs, want $want"
nops=$(grep -c '^nop,' "$dir/c.csv" || true)
case " $(echo $backends) " in
*" io_uring "*)
	[ "$nops" -eq 12 ] || not_ok "--compare wrote $nops nop runs, want 12"
	grep -q '^request cost: .* at batch 32' "$dir/compare.out" ||
		not_ok "--compare's verdict does not say what a request costs: $(cat "$dir/compare.out")" ;;
*)
	[ "$nops" -eq 0 ] || not_ok "--compare ran nops without io_uring" ;;
esac
grep -q '^randread    4k buf' "$dir/compare.out" ||
	not_ok "--compare printed no table row: $(cat "$dir/compare.out")"
grep -q '^Event-loop stalls' "$dir/compare.out" ||
	not_ok "--compare printed no stall table: $(cat "$dir/compare.out")"
tail -n 1 "$dir/compare.out" | grep -q '^Goals met in' ||
	not_ok "--compare did not end with its verdict: $(tail -n 3 "$dir/compare.out")"
grep -q '^AUTO: ' "$dir/compare.out" ||
	not_ok "--compare's verdict does not say what AUTO picks: $(cat "$dir/compare.out")"
leftover=$(find "$dir" -name 'afio-bench.*' -o -name 'afio-compare.*')
[ -z "$leftover" ] || not_ok "scratch files left behind: $leftover"

[ $fail -eq 0 ] && echo "bench-check: ok ($(echo $backends))"
exit $fail
