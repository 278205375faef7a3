#!/bin/bash
# CI for the fio engine: builds it against Debian's fio source, shows the
# installed /usr/bin/fio loading and running it, a fio of another version
# refused at load, bad engine options refused by fio's parser, fio's verify
# catching a corrupted block read through the engine (so a pass means
# something), trim punching holes, then verify.sh's short run on every
# backend and mode.  About a minute on 2 CPUs.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
here="$repo/integrations/fio"
out="${AFIO_FIO_BUILD:-$repo/build-fio}"
fio="${FIO:-/usr/bin/fio}"
dir="${AFIO_FIO_DIR:-$out/check-data}"
mkdir -p "$dir"
trap 'rm -rf "${dir:?}"/*' EXIT

engine="$("$here/build.sh")"
fail() { echo "check.sh: $*" >&2; exit 1; }
run() { "$fio" --ioengine=external:"$engine" --directory="$dir" --verify_state_save=0 "$@"; }

log="$(run --name=load --rw=randread --size=4m --bs=4k --iodepth=8 2>&1)" ||
	fail "$fio could not run the engine: $log"
grep -q '^fio-asyncfio: load: ' <<<"$log" || fail "the engine did not say which backend runs: $log"
echo "check: $("$fio" --version) loads and runs fio-asyncfio.so ($(grep -m1 '^fio-asyncfio' <<<"$log"))"

# A mode given in the job wins over AFIO_MODE; each clone of numjobs says
# where it runs.
log="$(AFIO_MODE=async run --name=mode --afio_mode=inline --numjobs=2 --rw=randread --size=1m 2>&1)" ||
	fail "the mode job failed: $log"
[ "$(grep -c '^fio-asyncfio: mode\(\.1\)\?: .*mode inline$' <<<"$log")" = 2 ] ||
	fail "not two clones in the job's mode: $log"
echo "check: afio_mode in the job wins over AFIO_MODE, every clone reports"

wrong="$out/fio-asyncfio-wrong-version.so"
"$here/build.sh" --claim-version fio-0.0 "$wrong" >/dev/null 2>&1
if log="$("$fio" --ioengine=external:"$wrong" --directory="$dir" --name=wrong --size=1m 2>&1)"; then
	fail "an engine built for fio-0.0 ran in $("$fio" --version)"
fi
grep -q "built for fio-0.0, refusing to run in $("$fio" --version)" <<<"$log" ||
	fail "no clear refusal of a version mismatch: $log"
echo "check: an engine built for another fio is refused at load"
rm -f "$wrong"

for bad in --afio_backend=bogus --afio_mode=fast --afio_threads=0; do
	if log="$(run --name=bad "$bad" --size=1m 2>&1)"; then
		fail "$bad was accepted"
	fi
	grep -q "fio: failed parsing ${bad#--}" <<<"$log" || fail "$bad: not fio's parse error: $log"
done
echo "check: bad engine options get fio's parse error"

# A block changed behind fio's back must fail verify through the engine:
# written once, one byte of the third block flipped, read back with
# verify_only.  The job stops at that block with 31 reads in flight, which
# fio must reap before it frees their io_us: malloc's perturbation makes a
# callback on a freed one crash the job ("got signal").
for b in io_uring libaio threads; do
	rm -rf "${dir:?}"/*
	run --name=corrupt --afio_backend="$b" --rw=write --bs=4k --size=4m --direct=1 \
		--verify=crc32c --do_verify=0 >/dev/null 2>&1
	f="$(ls "$dir"/corrupt*)"
	printf '\xff' | dd of="$f" bs=1 seek=$((2 * 4096 + 100)) conv=notrunc status=none
	if log="$(MALLOC_PERTURB_=165 run --name=corrupt --afio_backend="$b" --rw=write --bs=4k \
		--size=4m --direct=1 --iodepth=32 --verify=crc32c --verify_only --verify_fatal=1 2>&1)"; then
		fail "$b: a corrupted block passed verify"
	fi
	grep -q "verify: bad header\|crc32c: verify failed\|bad magic" <<<"$log" ||
		fail "$b: no verify error for the corrupted block: $log"
	! grep -q "got signal" <<<"$log" || fail "$b: the job crashed after the verify error: $log"
done
echo "check: a corrupted block fails fio's verify on io_uring, libaio and threads, with reads in flight"

for b in io_uring libaio threads; do
	rm -rf "${dir:?}"/*
	run --name=trim --afio_backend="$b" --rw=write --bs=64k --size=4m >/dev/null 2>&1
	before=$(du -k "$dir"/trim* | cut -f1)
	log="$(run --name=trim --afio_backend="$b" --rw=trim --bs=64k --size=4m --iodepth=8 \
		--loops=2 --output-format=json 2>&1)" || fail "$b: trim failed: $log"
	after=$(du -k "$dir"/trim* | cut -f1)
	[ "$after" -lt "$before" ] || fail "$b: trim left ${after} KiB of ${before} KiB allocated"
	# fio counts a trim by the bytes it was given: two passes, 8 MiB
	trimmed="$(python3 -c 'import json, re, sys
t = sys.stdin.read()
print(json.loads(t[re.search(r"^\{", t, re.M).start():])["jobs"][0]["trim"]["io_bytes"])' <<<"$log")"
	[ "$trimmed" = 8388608 ] || fail "$b: fio counted $trimmed bytes trimmed of 8388608"
done
echo "check: trim punches holes on io_uring, libaio and threads, and fio counts its bytes"

"$here/verify.sh"
