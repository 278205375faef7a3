#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The library of one build against another's, workload by workload.

Runs the afio-bench of each build on the same file in alternated pairs
(the order turns every pair), pinned to one CPU (--cpus: others), and prints per workload
the median of the paired ratios new/old of IOPS and of CPU per request,
with their spread: what a change to the library did, against the commit
before it.

  bench/vs-build.py --old DIR --new DIR [--file F] [--pairs 5] [--runtime 1]
                    [--workloads nop:0:io_uring:inline,randread:4k:libaio:inline:dir,...]

A workload is OP:BS:BACKEND:MODE[:dir] (OP randread, randwrite or nop; BS
ignored for nop; dir: O_DIRECT, else buffered).  Takes /tmp/afio-bench.lock, one benchmark at a time;
cached reads read the file into the page cache before each pair.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

WORKLOADS = ",".join([
    "nop:0:io_uring:inline", "nop:0:threads:inline",
    "randread:4k:io_uring:inline", "randread:4k:io_uring:async",
    "randread:4k:libaio:inline", "randread:4k:threads:inline",
    "randread:4k:threads:hybrid", "randread:64k:io_uring:inline",
    "randwrite:4k:io_uring:inline", "randwrite:4k:threads:async",
])


def run(bench, args, cpus):
    out = subprocess.run(["taskset", "-c", cpus, bench] + args + ["--json"],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def warm(path):
    with open(path, "rb") as f:
        while f.read(1 << 20):
            pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--old", required=True, help="build directory of the commit before")
    ap.add_argument("--new", required=True, help="build directory of the change")
    ap.add_argument("--file", help="the data file (default: vs-build.dat in --new, "
                    "which is out of the source tree's way)")
    ap.add_argument("--size", default="256m")
    ap.add_argument("--qd", default="32")
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--runtime", default="1")
    ap.add_argument("--workloads", default=WORKLOADS)
    ap.add_argument("--cpus", default="1",
                    help="the CPUs both builds run on (taskset -c; default one CPU, "
                    "where the pool's workers only take turns)")
    a = ap.parse_args()
    if not a.file:
        a.file = os.path.join(a.new, "vs-build.dat")
    benches = {side: os.path.join(d, "bench", "afio-bench")
               for side, d in (("old", a.old), ("new", a.new))}
    print("| workload | IOPS new/old (median, min-max) | CPU per request new/old |")
    print("|---|---|---|")
    slower = 0
    for spec in a.workloads.split(","):
        op, bs, backend, mode, *io = spec.split(":")
        args = ["--backend", backend, "--mode", mode, "--qd", a.qd, "--runtime", a.runtime]
        if op == "nop":
            args += ["--op", "nop"]
        else:
            args += ["--file", a.file, "--size", a.size, "--rw", op, "--bs", bs,
                     "--direct" if io == ["dir"] else "--buffered"]
        iops, cpu = [], []
        for i in range(a.pairs):
            if op == "randread" and os.path.exists(a.file):
                warm(a.file)
            got = {}
            for side in (("old", "new") if i % 2 == 0 else ("new", "old")):
                got[side] = run(benches[side], args, a.cpus)
            iops.append(got["new"]["iops"] / got["old"]["iops"])
            cpu.append(got["new"]["cpu_ns_per_req"] / got["old"]["cpu_ns_per_req"])
        mi, mc = statistics.median(iops), statistics.median(cpu)
        slower += mi < 0.97
        print("| %s | %.2f (%.2f-%.2f) | %.2f (%.2f-%.2f) |"
              % (spec, mi, min(iops), max(iops), mc, min(cpu), max(cpu)), flush=True)
    print("\n%s" % ("no workload slower than before (0.97x)" if not slower else
                    "%d workload(s) below 0.97x of before" % slower))


if __name__ == "__main__":
    if os.environ.get("AFIO_BENCH_LOCKED") != "1":
        os.environ["AFIO_BENCH_LOCKED"] = "1"
        os.execvp("flock", ["flock", "/tmp/afio-bench.lock", sys.executable] + sys.argv)
    main()
