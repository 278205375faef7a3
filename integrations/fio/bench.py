#!/usr/bin/env python3
"""fio's own engines against fio-asyncfio.so in fio's harness, alternated.

Every pair runs the same fio command line but for --ioengine (and our
afio_* options): same file, same queue depth, same batching
(--iodepth_batch_submit=QD --iodepth_batch_complete_min=1, or with
--submit each fio's default of one submit per request, or both), same
buffers (--iomem=mmap).  Each round runs every pair, A then B, the order swapped
every other round; the report gives per pair the median of the per-round
ratios (ours / theirs) with their min-max, and the medians of fio's IOPS,
clat p50/p99, slat mean/max and CPU (usr+sys %); for a mixed job IOPS
are both directions' and latencies its reads'.

  integrations/fio/bench.py [--rounds 5] [--runtime 3] [--qd 32] [--out FILE.md]
                            [--pairs io_uring,libaio,floor] [--workloads "4k randread O_DIRECT"]
                            [--submit batch|each|both]

Runs under flock /tmp/afio-bench.lock, one benchmark at a time.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

# (name, ours: afio options, theirs: fio engine, what the goal is; None:
# no goal, shown for what the pool gains over one synchronous thread)
PAIRS = [
    ("io_uring", ["--afio_backend=io_uring", "--afio_mode=inline"], "io_uring", 0.95),
    ("libaio", ["--afio_backend=libaio", "--afio_mode=inline"], "libaio", 0.95),
    ("threads/async", ["--afio_backend=threads", "--afio_mode=async"], "posixaio", 1.2),
    ("threads/inline", ["--afio_backend=threads", "--afio_mode=inline"], "posixaio", 1.2),
    ("threads/async", ["--afio_backend=threads", "--afio_mode=async"], "psync", None),
    # The engine without the library (floor.c): what the engine's own work
    # and the ring's setup cost against fio's io_uring; only when asked.
    ("floor", [], "io_uring", None),
]
WORKLOADS = [
    ("4k randread cached", ["--rw=randread", "--bs=4k", "--direct=0"]),
    ("4k randread O_DIRECT", ["--rw=randread", "--bs=4k", "--direct=1"]),
    ("64k randread cached", ["--rw=randread", "--bs=64k", "--direct=0"]),
    ("4k randwrite buffered", ["--rw=randwrite", "--bs=4k", "--direct=0"]),
    ("4k randwrite O_DIRECT", ["--rw=randwrite", "--bs=4k", "--direct=1"]),
    # The depths at either end, and mixed jobs, as fio users run them
    # (later options override --iodepth and the batch above).
    ("4k randread O_DIRECT qd1", ["--rw=randread", "--bs=4k", "--direct=1",
                                  "--iodepth=1", "--iodepth_batch_submit=1"]),
    ("4k randread O_DIRECT qd128", ["--rw=randread", "--bs=4k", "--direct=1",
                                    "--iodepth=128", "--iodepth_batch_submit=128"]),
    ("16k randrw 70/30 O_DIRECT", ["--rw=randrw", "--rwmixread=70", "--bs=16k", "--direct=1"]),
    ("4k randrw 70/30 cached fsync=64", ["--rw=randrw", "--rwmixread=70", "--bs=4k",
                                       "--direct=0", "--fsync=64"]),
]


def batching(submit, qd):
    """fio's options for a batch of qd per submit, or none: its default
    commits after every request."""
    if submit == "each":
        return []
    return [f"--iodepth_batch_submit={qd}", "--iodepth_batch_complete_min=1"]


def fio_run(fio, engine_args, work, submit, args, path):
    # Through the page cache, fio's default invalidate=1 would start each
    # run by writing back what the run before dirtied (256 MB after a
    # buffered write run) and dropping the file from the cache: the run
    # then measured the disk catching up, and "cached" reads the disk.
    cached = ["--invalidate=0"] if "--direct=0" in work else []
    cmd = [fio, "--name=b", f"--filename={path}", f"--size={args.size}",
           f"--runtime={args.runtime}", "--time_based", "--ramp_time=0.5",
           f"--iodepth={args.qd}"] + batching(submit, args.qd) + [
           "--iomem=mmap", "--output-format=json"] + cached + work + engine_args
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    # What a write run dirtied goes to the disk now, outside any run.
    os.sync()
    # the engine's own lines (which backend runs) come before fio's JSON
    job = json.loads(out[re.search(r"^\{", out, re.M).start():])["jobs"][0]
    # A mixed job's IOPS are both directions'; its latencies the reads'.
    rd = job["write"] if not job["read"]["io_bytes"] else job["read"]
    pct = rd["clat_ns"].get("percentile", {})
    return {
        "iops": job["read"]["iops"] + job["write"]["iops"],
        "p50": pct.get("50.000000", 0) / 1000,
        "p99": pct.get("99.000000", 0) / 1000,
        "slat_mean": rd["slat_ns"]["mean"] / 1000,
        "slat_max": rd["slat_ns"]["max"] / 1000,
        "cpu": job["usr_cpu"] + job["sys_cpu"],
        "cmd": " ".join(cmd),
    }


def med(xs):
    return statistics.median(xs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runtime", type=int, default=3)
    ap.add_argument("--qd", type=int, default=32)
    ap.add_argument("--size", default="256m")
    ap.add_argument("--fio", default=os.environ.get("FIO", "/usr/bin/fio"))
    ap.add_argument("--dir", default=os.environ.get("AFIO_FIO_DIR",
                                                    os.path.join(REPO, "build-fio", "bench-data")))
    ap.add_argument("--out", help="write the markdown table here too")
    ap.add_argument("--pairs", help="comma-separated pair names (io_uring,libaio,threads/async,threads/inline,"
                    "floor: the engine on bare liburing, floor.c) or fio engines (psync)")
    ap.add_argument("--workloads", help="comma-separated workload names, as in the table")
    ap.add_argument("--submit", choices=("batch", "each", "both"), default="batch",
                    help="batches of --qd per submit (default), one submit per request "
                    "(fio's default), or both")
    args = ap.parse_args()
    submits = ("batch", "each") if args.submit == "both" else (args.submit,)

    asked = args.pairs.split(",") if args.pairs else []
    pairs = [p for p in PAIRS
             if p[0] in asked or (p[0] != "floor" and (not asked or p[2] in asked))]
    workloads = [w for w in WORKLOADS if not args.workloads or w[0] in args.workloads.split(",")]
    engine = subprocess.run([os.path.join(HERE, "build.sh")], check=True,
                            capture_output=True, text=True).stdout.strip().splitlines()[-1]
    os.makedirs(args.dir, exist_ok=True)
    path = os.path.join(args.dir, "bench-file")
    subprocess.run([args.fio, "--name=lay", f"--filename={path}", f"--size={args.size}",
                    "--rw=write", "--bs=1m", "--output=/dev/null"], check=True)
    ours_engine = [f"--ioengine=external:{engine}"]
    floor_engine = [f"--ioengine=external:{os.path.join(os.path.dirname(engine), 'fio-asyncfio-floor.so')}"]

    results = {}  # (workload, pair) -> {"a": [...], "b": [...]}
    for r in range(args.rounds):
        for (wname, work), submit in [(w, s) for w in workloads for s in submits]:
            if submit == "each":
                wname += ", each"
            for pname, afio_opts, theirs, _ in pairs:
                a_args = (floor_engine if pname == "floor" else ours_engine) + afio_opts
                b_args = [f"--ioengine={theirs}"]
                order = [("a", a_args), ("b", b_args)]
                if r % 2:
                    order.reverse()
                cell = results.setdefault((wname, pname, theirs), {"a": [], "b": []})
                for side, eargs in order:
                    cell[side].append(fio_run(args.fio, eargs, work, submit, args, path))
                ra, rb = cell["a"][-1], cell["b"][-1]
                print(f"round {r + 1} {wname:22} {pname:15} ours {ra['iops']:9.0f} "
                      f"{theirs} {rb['iops']:9.0f} ratio {ra['iops'] / rb['iops']:.3f}",
                      file=sys.stderr, flush=True)
    os.remove(path)

    commit = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    lines = [
        f"fio {subprocess.run([args.fio, '--version'], capture_output=True, text=True).stdout.strip()}, "
        f"commit {commit}, {args.rounds} rounds alternated, {args.runtime} s each, "
        f"iodepth {args.qd}, " + ("one submit per request (fio's default)" if submits == ("each",)
                                  else f"iodepth_batch_submit={args.qd}, "
                                  "iodepth_batch_complete_min=1"
                                  + (" (rows marked 'each': fio's default, one submit per "
                                     "request)" if "each" in submits else "")) +
        f", iomem=mmap, file {args.size} on {args.dir}",
        "",
        "| workload | ours | fio engine | IOPS ours | IOPS fio | ratio (median, min-max) | goal | "
        "clat p50/p99 µs ours | fio | slat mean/max µs ours | fio | CPU % ours | fio |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (wname, pname, theirs), cell in results.items():
        goal = next(g for p, _, t, g in PAIRS if (p, t) == (pname, theirs))
        ratios = [a["iops"] / b["iops"] for a, b in zip(cell["a"], cell["b"])]
        m = {side: {k: med([x[k] for x in cell[side]]) for k in
                    ("iops", "p50", "p99", "slat_mean", "slat_max", "cpu")}
             for side in ("a", "b")}
        ok = "—" if goal is None else f"≥{goal} " + ("met" if med(ratios) >= goal else "missed")
        lines.append(
            f"| {wname} | {pname} | {theirs} | {m['a']['iops']:.0f} | {m['b']['iops']:.0f} | "
            f"{med(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) | {ok} | "
            f"{m['a']['p50']:.1f}/{m['a']['p99']:.1f} | {m['b']['p50']:.1f}/{m['b']['p99']:.1f} | "
            f"{m['a']['slat_mean']:.1f}/{m['a']['slat_max']:.0f} | "
            f"{m['b']['slat_mean']:.1f}/{m['b']['slat_max']:.0f} | "
            f"{m['a']['cpu']:.0f} | {m['b']['cpu']:.0f} |")
    first = next(iter(results.values()))
    lines += ["", "Commands (one round, one pair; the others differ only in --ioengine/afio_* and the workload):",
              "", "    " + first["a"][0]["cmd"], "    " + first["b"][0]["cmd"]]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    if os.environ.get("AFIO_BENCH_LOCKED") != "1":
        os.environ["AFIO_BENCH_LOCKED"] = "1"
        os.execvp("flock", ["flock", "/tmp/afio-bench.lock", sys.executable] + sys.argv)
    main()
