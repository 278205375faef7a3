#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What each backend and mode costs over the engine it wraps.

Every backend and mode against afio-bench --raw on the same file, in
alternated pairs (the order turns every pair), all pinned to one CPU:
io_uring against liburing (ASYNC against liburing with IOSQE_ASYNC on
every request), libaio against libaio, the pool INLINE against one thread
in a pread/pwrite loop, and what ASYNC and HYBRID hand to the pool's
workers (every request on the pool, buffered I/O on libaio) against
--raw pool, as many threads behind one locked queue.  The library waits
inside afio_poll() as the raw loops wait inside their engine's call
(--wait eventfd: on its exported eventfd, as an epoll loop does, which
the raw loops do not).  Prints, per cell, the median of the paired ratios of
IOPS and of CPU per I/O, with their spread, against the goal in
bench/README.md, "What the library costs" (IOPS >= 0.97x at CPU per I/O
<= 1.03x).

  bench/raw-cost.py [--build DIR] [--file F] [--pairs 5] [--runtime 1]
                    [--backends io_uring,libaio,threads] [--modes inline,async,hybrid]
                    [--workloads randread:4k:buf,...] [--lazy-eventfd]
                    [--caller-writes] [--fd-hint] [--level-eventfd]
                    [--wait poll|eventfd] [--csv OUT.csv]

Takes /tmp/afio-bench.lock, one benchmark at a time.  Cached reads read
the file into the page cache before each pair.
"""
import argparse
import csv
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RAW = {"io_uring": "io_uring", "libaio": "libaio", "threads": "psync"}
WORKLOADS = "randread:4k:buf,randread:64k:buf,randwrite:4k:buf,randread:4k:dir"
GOAL_IOPS, GOAL_CPU = 0.97, 1.03


def run(bench, args):
    out = subprocess.run(["taskset", "-c", "1", bench] + args + ["--json"],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(os.path.dirname(HERE), "build"))
    ap.add_argument("--file", help="the data file (default: raw-cost.dat in --build, "
                    "out of the source tree's way)")
    ap.add_argument("--size", default="256m")
    ap.add_argument("--qd", default="32")
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--runtime", default="1")
    ap.add_argument("--backends", default="io_uring,libaio,threads")
    ap.add_argument("--modes", default="inline,async,hybrid")
    ap.add_argument("--workloads", default=WORKLOADS)
    ap.add_argument("--lazy-eventfd", action="store_true",
                    help="the library runs with AFIO_LAZY_EVENTFD")
    ap.add_argument("--caller-writes", action="store_true",
                    help="the library runs with AFIO_CALLER_WRITES")
    ap.add_argument("--level-eventfd", action="store_true",
                    help="the library runs with AFIO_LEVEL_EVENTFD (with --wait eventfd)")
    ap.add_argument("--fd-hint", action="store_true",
                    help="the library is told how the file is opened (afio_fd_hint)")
    ap.add_argument("--wait", choices=["poll", "eventfd"], default="poll",
                    help="how the library's loop waits (afio-bench --wait)")
    ap.add_argument("--threads", default="4", help="the pool's workers, both sides")
    ap.add_argument("--csv", help="every run, one row each")
    a = ap.parse_args()
    if not a.file:
        a.file = os.path.join(a.build, "raw-cost.dat")
    bench = os.path.join(a.build, "bench", "afio-bench")
    rows, table = [], []
    for spec in a.workloads.split(","):
        rw, bs, io = spec.split(":")
        common = ["--file", a.file, "--size", a.size, "--rw", rw, "--bs", bs, "--qd", a.qd,
                  "--runtime", a.runtime, "--direct" if io == "dir" else "--buffered"]
        for be in a.backends.split(","):
            if io == "dir" and be == "threads":
                continue  # the pool has no O_DIRECT engine of its own to match
            for mode in a.modes.split(","):
                lib = ["--backend", be, "--mode", mode, "--wait", a.wait,
                       "--threads", a.threads] + common + \
                      (["--lazy-eventfd"] if a.lazy_eventfd else []) + \
                      (["--caller-writes"] if a.caller_writes else []) + \
                      (["--fd-hint"] if a.fd_hint else []) + \
                      (["--level-eventfd"] if a.level_eventfd else [])
                to_workers = mode != "inline" and (be == "threads" or
                                                   (be == "libaio" and io == "buf"))
                raw = ["--raw", "pool" if to_workers else RAW[be]] + common
                if be == "io_uring" and mode == "async":
                    raw += ["--mode", "async"]
                if to_workers:
                    raw += ["--threads", a.threads]
                elif be == "threads":
                    raw += ["--threads", "1"]
                iops, cpu = [], []
                for i in range(a.pairs):
                    if io == "buf" and rw.endswith("read") and os.path.exists(a.file):
                        with open(a.file, "rb") as f:
                            while f.read(1 << 20):
                                pass
                    got = {}
                    for side, args in ([("lib", lib), ("raw", raw)] if i % 2 == 0
                                       else [("raw", raw), ("lib", lib)]):
                        got[side] = run(bench, args)
                        rows.append({"workload": spec, "backend": be, "mode": mode,
                                     "pair": i, "side": side, "raw_engine": raw[1], "iops": got[side]["iops"],
                                     "cpu_ns_per_req": got[side]["cpu_ns_per_req"]})
                    iops.append(got["lib"]["iops"] / got["raw"]["iops"])
                    cpu.append(got["lib"]["cpu_ns_per_req"] / got["raw"]["cpu_ns_per_req"])
                lib_ns = statistics.median(r["cpu_ns_per_req"] for r in rows[-2 * a.pairs:]
                                           if r["side"] == "lib")
                raw_ns = statistics.median(r["cpu_ns_per_req"] for r in rows[-2 * a.pairs:]
                                           if r["side"] == "raw")
                mi, mc = statistics.median(iops), statistics.median(cpu)
                line = ("| %s | %s/%s (%s) | %.2f (%.2f-%.2f) | %.2f (%.2f-%.2f) | %.0f | %.0f | %s |"
                        % (spec, be, mode, raw[1], mi, min(iops), max(iops), mc, min(cpu), max(cpu),
                           lib_ns, raw_ns,
                           "met" if mi >= GOAL_IOPS and mc <= GOAL_CPU else "not met"))
                table.append(line)
                print(line, file=sys.stderr, flush=True)
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    print("| workload | backend/mode (raw engine) | IOPS ours/raw (median, min-max) | CPU per I/O ours/raw "
          "| ours ns/req | raw ns/req | goal %.2fx, %.2fx CPU |" % (GOAL_IOPS, GOAL_CPU))
    print("|---|---|---|---|---|---|---|")
    print("\n".join(table))


if __name__ == "__main__":
    if os.environ.get("AFIO_BENCH_LOCKED") != "1":
        os.environ["AFIO_BENCH_LOCKED"] = "1"
        os.execvp("flock", ["flock", "/tmp/afio-bench.lock", sys.executable] + sys.argv)
    main()
