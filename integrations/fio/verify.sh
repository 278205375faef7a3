#!/bin/bash
# fio's verify (crc32c, verify_backlog, verify_fatal) through fio-asyncfio.so
# on every backend that probes available, in each mode: jobs/verify.fio.
# Fails on any verify error, any job error, a job that read nothing back, or
# a run whose engine did not say it ran on the backend and mode asked for.
#
#   integrations/fio/verify.sh            # short: 16 MiB per job, one pass (CI)
#   integrations/fio/verify.sh --long     # 256 MiB per job, three passes
#   --backends "io_uring libaio"  --modes "inline hybrid"   to narrow it
#
# Environment: FIO (default /usr/bin/fio), AFIO_FIO_DIR (where the files go;
# not tmpfs: the jobs use O_DIRECT), AFIO_FIO_BUILD as for build.sh.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
here="$repo/integrations/fio"
out="${AFIO_FIO_BUILD:-$repo/build-fio}"
fio="${FIO:-/usr/bin/fio}"
size=16m loops=1
backends="io_uring libaio threads" modes="inline async hybrid"
while [ $# -gt 0 ]; do
	case $1 in
	--long) size=256m loops=3 ;;
	--backends) backends="$2"; shift ;;
	--modes) modes="$2"; shift ;;
	*) echo "verify.sh: unknown argument $1 (--long, --backends LIST, --modes LIST)" >&2; exit 2 ;;
	esac
	shift
done

engine="$("$here/build.sh")"
probe="$repo/${AFIO_BUILD_DIR:-build}/tools/afio-probe"
dir="${AFIO_FIO_DIR:-$out/verify-data}"
logs="$out/verify-logs"
mkdir -p "$dir" "$logs"
if [ "$(stat -f -c %T "$dir")" = tmpfs ]; then
	echo "verify.sh: $dir is on tmpfs, which has no O_DIRECT; set AFIO_FIO_DIR" >&2
	exit 1
fi

available() {
	[ -x "$probe" ] || return 0
	"$probe" | grep -E "^  $1 +available" >/dev/null
}

# every job: no error, something written and read back
check_json() {
	python3 - "$1" <<-'EOF'
	import json, re, sys
	text = open(sys.argv[1]).read()
	# the engine's own lines (which backend runs) come before fio's JSON
	jobs = json.loads(text[re.search(r"^\{", text, re.M).start():])["jobs"]
	bad = [j["jobname"] for j in jobs
	       if j["error"] or not j["read"]["io_bytes"] or not j["write"]["io_bytes"]]
	print(len(jobs), "jobs,", "failed: " + " ".join(bad) if bad else "all verified")
	sys.exit(1 if bad or not jobs else 0)
	EOF
}

status=0
printf '%-9s %-7s %-6s %s\n' backend mode secs result
for b in $backends; do
	if ! available "$b"; then
		printf '%-9s %-7s %-6s %s\n' "$b" - - "skipped: $("$probe" | grep -E "^  $b " | sed 's/^ *//')"
		continue
	fi
	for m in $modes; do
		rm -rf "${dir:?}"/*
		log="$logs/$b-$m.log" json="$logs/$b-$m.json"
		start=$(date +%s.%N)
		rc=0
		AFIO_FIO_ENGINE="$engine" AFIO_FIO_BACKEND="$b" AFIO_FIO_MODE="$m" \
		AFIO_FIO_DIR="$dir" AFIO_FIO_SIZE="$size" AFIO_FIO_LOOPS="$loops" \
			"$fio" --output-format=json --output="$json" "$here/jobs/verify.fio" >"$log" 2>&1 || rc=$?
		secs=$(printf '%.1f' "$(echo "$(date +%s.%N) - $start" | bc)")
		if [ $rc -ne 0 ]; then
			result="fio exit $rc: $(grep -m3 -E 'verify|fio:|err' "$log" "$json" | tr '\n' ' ')"
			status=1
		elif ! grep -q "^fio-asyncfio: " "$json" ||
			grep "^fio-asyncfio: " "$json" | grep -vq ": $b: .*mode $m"; then
			# every context, each clone's too, on the backend and mode asked for
			result="not every job on $b/$m: $(grep fio-asyncfio "$json" | grep -vm1 ": $b: .*mode $m" || true)"
			status=1
		elif ! result="$(check_json "$json")"; then
			status=1
		fi
		printf '%-9s %-7s %-6s %s\n' "$b" "$m" "$secs" "$result"
	done
done
rm -rf "${dir:?}"/*
[ $status -eq 0 ] || echo "verify.sh: failures; logs in $logs" >&2
exit $status
