#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""afio-bench --compare: every available backend x mode over a matrix of
workloads, and next to them, on the same file, one after the other:

  * fio with the same engine, like for like: our batches against fio with
    --iodepth_batch_submit=QD --iodepth_batch_complete_min=1, our
    --submit-each against fio's default (one request per submit), fio's
    buffers page-aligned like ours (--iomem=mmap);
  * the raw engines (afio-bench --raw): liburing, libaio and pread/pwrite
    without the library, what a backend costs over the engine it wraps;
  * the thread pool's peers: libuv's pool (afio-uv-bench), glibc's POSIX
    AIO (fio --ioengine=posixaio) and io_uring's io-wq (our io_uring ASYNC),
    with fio psync x N, the limit for INLINE, beside them;
  * event-loop stalls: the longest and the p99 time of our calls, against
    fio's submission latency (slat).

Prints tables, writes a CSV and, when gnuplot is installed, a PNG chart of
the ratios, and ends with a verdict (verdict.py, shared with the echo and
HTTP benches).  Standard library only."""

import argparse
import csv
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import verdict  # noqa: E402  (beside this file, in the tree and installed)

BACKENDS = ["io_uring", "libaio", "threads"]
MODES = ["inline", "async", "hybrid"]
SHORT = {"io_uring": "uring", "libaio": "libaio", "threads": "threads"}
# Two runs of a ratio agree when they are within this of each other.
AGREE = 0.15


def parse_size(s):
    m = re.fullmatch(r"(\d+)([kKmMgGtT]?)(i?[bB])?", s.strip())
    if not m:
        raise argparse.ArgumentTypeError("bad size '%s' (e.g. 4k, 256m, 1g)" % s)
    shift = {"": 0, "k": 10, "m": 20, "g": 30, "t": 40}[m.group(2).lower()]
    v = int(m.group(1)) << shift
    if v <= 0:
        raise argparse.ArgumentTypeError("size must be > 0")
    return v


def size_list(s):
    return [parse_size(x) for x in s.split(",") if x]


def choice_list(allowed):
    def f(s):
        items = [x for x in s.split(",") if x]
        for x in items:
            if x not in allowed:
                raise argparse.ArgumentTypeError(
                    "'%s' is not one of %s" % (x, ", ".join(allowed)))
        return items
    return f


def workload_list(s):
    """randread:4k:buf,randwrite:4k:dir,..."""
    out = []
    for item in [x for x in s.split(",") if x]:
        parts = item.split(":")
        if (len(parts) != 3 or parts[0] not in ("randread", "randwrite", "read", "write")
                or parts[2] not in ("buf", "dir")):
            raise argparse.ArgumentTypeError(
                "'%s' is not RW:BS:buf|dir (e.g. randread:4k:buf)" % item)
        out.append({"rw": parts[0], "bs": parse_size(parts[1]), "direct": parts[2] == "dir"})
    return out


def human_size(v):
    for suffix, shift in (("g", 30), ("m", 20), ("k", 10)):
        if v >= 1 << shift and v % (1 << shift) == 0:
            return "%d%s" % (v >> shift, suffix)
    return str(v)


def fmt_iops(v):
    if v is None:
        return "-"
    if v >= 100000:
        return "%.0fk" % (v / 1000)
    if v >= 1000:
        return "%.1fk" % (v / 1000)
    return "%.0f" % v


def fmt_us(v):
    if v is None:
        return "-"
    if v >= 10000:
        return "%.0fm" % (v / 1000)
    if v >= 1000:
        return "%.1fm" % (v / 1000)
    return "%.0f" % v


def fmt(v, f="%.2f"):
    return "-" if v is None else f % v


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def cpu_us_per_io(r):
    if not r or not r.get("ios"):
        return None
    return r["cpu_s"] / r["ios"] * 1e6


def is_read(w):
    return w["rw"] in ("read", "randread")


def label(w):
    return "%-9s %4s %-3s" % (w["rw"], human_size(w["bs"]), "dir" if w["direct"] else "buf")


# ---- what is run ----
#
# A job is a tuple naming one program run for a workload:
#   ("afio", backend, mode, submit)   afio-bench through the library
#   ("raw", engine)                   afio-bench --raw (psync: one thread)
#   ("fio", engine, submit)           fio; submit "batch" or "each"
#   ("uv",)                           afio-uv-bench, libuv's pool
# fio's engines: io_uring, libaio, posixaio (each), psync (N jobs).

def job_name(j):
    if j[0] == "afio":
        return "%s/%s%s" % (SHORT[j[1]], j[2][:3], ",each" if j[3] == "each" else "")
    if j[0] == "raw":
        return "raw %s" % (j[1] if j[1] != "psync" else "psync x1")
    if j[0] == "uv":
        return "libuv"
    return "fio %s%s" % (j[1], {"batch": ",batch", "each": ""}.get(j[2], ""))


class Runner:
    def __init__(self, args):
        self.a = args
        self.baseline = {}

    def run_json(self, cmd):
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True)
        if p.returncode != 0 or not p.stdout.strip():
            sys.stderr.write("  failed: %s\n  %s" % (" ".join(cmd), p.stderr))
            return None
        r = json.loads(p.stdout.strip().splitlines()[-1])
        r["cmd"] = " ".join(cmd)
        return r

    def bench_args(self, w):
        a = self.a
        if w.get("op"):
            where = (["--tree", a.tree, "--files", str(a.files)] if w["op"] != "sendfile"
                     else ["--file", a.file])
            return ["--op", w["op"], "--bs", str(w["bs"]), "--qd", str(a.qd),
                    "--runtime", str(a.runtime), "--json"] + where
        return ["--rw", w["rw"], "--bs", str(w["bs"]), "--qd", str(a.qd),
                "--direct" if w["direct"] else "--buffered", "--size", str(a.size),
                "--runtime", str(a.runtime), "--file", a.file, "--json"]

    def run(self, job, w):
        a = self.a
        if job[0] == "afio":
            # A program that opens its files knows how: it says so once
            # (afio_fd_hint()) rather than have each submit ask the kernel;
            # and afio-bench's loop watches the eventfd with poll(2),
            # level-triggered (AFIO_LEVEL_EVENTFD).
            cmd = [a.afio_bench, "--backend", job[1], "--mode", job[2],
                   "--threads", str(a.threads), "--fd-hint", "--level-eventfd"] + \
                self.bench_args(w)
            if job[3] == "each":
                cmd.append("--submit-each")
            return self.run_json(cmd)
        if job[0] == "raw":
            threads = 1 if job[1] == "psync" else a.threads
            return self.run_json([a.afio_bench, "--raw", job[1], "--threads", str(threads)]
                                 + self.bench_args(w))
        if job[0] == "uv":
            return self.run_json([a.uv_bench, "--threads", str(a.threads)]
                                 + self.bench_args(w))
        return self.fio(job[1], job[2], w)

    def fio_cmd(self, engine, submit, w, runtime_ms):
        a = self.a
        jobs = a.threads if engine == "psync" else 1
        qd = 1 if engine == "psync" else a.qd
        cmd = ["fio", "--name=afio", "--filename=" + a.file, "--rw=" + w["rw"],
               "--bs=%d" % w["bs"], "--ioengine=" + engine, "--iodepth=%d" % qd,
               "--numjobs=%d" % jobs, "--direct=%d" % int(w["direct"]),
               "--size=%d" % a.size, "--time_based", "--runtime=%dms" % runtime_ms,
               "--norandommap", "--randrepeat=0", "--invalidate=0",
               # Page-aligned buffers, as ours: with its default malloc
               # buffers fio copies from the page cache several times
               # slower at 64 KiB and above.
               "--iomem=mmap", "--slat_percentiles=1", "--output-format=json"]
        if submit == "batch":
            cmd += ["--iodepth_batch_submit=%d" % a.qd, "--iodepth_batch_complete_min=1"]
        return cmd, jobs

    def fio_startup(self, engine, submit, w):
        """CPU fio spends starting and stopping, measured by a 1 ms run of the
        same engine and request size; taken off its whole-process CPU."""
        key = (engine, w["bs"])
        if key not in self.baseline:
            r = self.fio(engine, submit, w, runtime_ms=1)
            self.baseline[key] = r["whole_cpu_s"] if r else 0.0
        return self.baseline[key]

    def fio(self, engine, submit, w, runtime_ms=None):
        a = self.a
        if runtime_ms is None:
            runtime_ms = max(1, int(a.runtime * 1000))
        cmd, jobs = self.fio_cmd(engine, submit, w, runtime_ms)
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True)
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        whole = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
        if p.returncode != 0:
            sys.stderr.write("  fio failed: %s\n  %s" % (" ".join(cmd), p.stderr))
            return None
        out = p.stdout
        try:
            j = json.loads(out[out.index("{"):])
        except ValueError:
            sys.stderr.write("  fio: unreadable output\n")
            return None
        iops = own = 0.0
        ios = 0
        p50 = p99 = p999 = slat_max = slat_p99 = None
        for job in j["jobs"]:
            d = job["read"] if is_read(w) else job["write"]
            iops += d["iops"]
            ios += d["total_ios"]
            rt = job.get("job_runtime", d.get("runtime", 0)) / 1000.0
            own += (job["usr_cpu"] + job["sys_cpu"]) / 100.0 * rt
            pct = d.get("clat_ns", {}).get("percentile", {})
            if p50 is None and pct:
                p50 = pct.get("50.000000", 0) / 1000.0
                p99 = pct.get("99.000000", 0) / 1000.0
                p999 = pct.get("99.900000", 0) / 1000.0
            slat = d.get("slat_ns", {})
            if slat.get("N"):
                slat_max = max(slat_max or 0, slat["max"] / 1000.0)
                sp = slat.get("percentile", {}).get("99.000000")
                if sp is not None:
                    slat_p99 = max(slat_p99 or 0, sp / 1000.0)
        # fio's usr_cpu/sys_cpu leave out threads that are not the job's
        # own (io_uring's io-wq workers, glibc's POSIX AIO threads): count
        # the whole process, less what fio spends starting and stopping.
        cpu = own
        if runtime_ms > 1:
            cpu = max(own, whole - self.fio_startup(engine, submit, w))
        return {"backend": "fio-" + engine, "mode": engine, "submit": submit,
                "rw": w["rw"], "bs": w["bs"], "qd": a.qd, "direct": w["direct"],
                "iops": iops, "mib_s": iops * w["bs"] / 2**20, "cpu_s": cpu,
                "iops_per_cpu_s": ios / cpu if cpu else 0,
                "lat_p50_us": p50, "lat_p99_us": p99, "lat_p999_us": p999,
                "fallbacks": 0, "ios": ios, "runtime_s": a.runtime, "threads": jobs,
                "slat_max_us": slat_max, "slat_p99_us": slat_p99,
                "whole_cpu_s": whole, "fio_own_cpu_s": own, "cmd": " ".join(cmd)}


def create_file(path, size):
    chunk = os.urandom(1 << 20)
    with open(path, "wb") as f:
        left = size
        while left > 0:
            n = min(left, len(chunk))
            f.write(chunk[:n])
            left -= n
        f.flush()
        os.fsync(f.fileno())


_warm_buf = bytearray(1 << 20)


def warm_cache(path, size):
    view = memoryview(_warm_buf)
    with open(path, "rb", buffering=0) as f:
        left = size
        while left > 0:
            n = f.readinto(view[:min(left, len(view))])
            if not n:
                break
            left -= n


def probe(afio_bench):
    avail, skipped = [], {}
    p = subprocess.run([afio_bench, "--probe"], stdout=subprocess.PIPE,
                       universal_newlines=True)
    for line in p.stdout.splitlines():
        parts = line.split("\t")
        if len(parts) >= 3:
            if parts[1] == "available":
                avail.append(parts[0])
            else:
                skipped[parts[0]] = parts[2]
    return avail, skipped


def find_probe(afio_bench):
    """afio-probe beside afio-bench: in the build tree or installed."""
    here = os.path.dirname(os.path.abspath(afio_bench))
    for c in (os.path.join(here, "..", "tools", "afio-probe"), os.path.join(here, "afio-probe")):
        if os.access(c, os.X_OK):
            return c
    return shutil.which("afio-probe")


def probe_auto(afio_bench, avail, skipped):
    """What AUTO picks here and why, as CSV rows of kind 'probe': one per
    backend with afio_probe()'s reason, and one for AUTO's pick."""
    order = [b for b in BACKENDS if b in avail or b in skipped]
    reasons = {b: ("available", "%s: available" % b) if b in avail else
               ("unavailable", skipped[b]) for b in order}
    pick = mode = None
    tool = find_probe(afio_bench)
    if tool:
        p = subprocess.run([tool], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                           universal_newlines=True)
        for line in p.stdout.splitlines():
            m = re.match(r"\s+(\S+)\s+(available|unavailable)\s+(.*)", line)
            if m and m.group(1) in BACKENDS:
                reasons[m.group(1)] = (m.group(2), m.group(3))
            m = re.match(r"auto picks: (\S+), mode (\S+)", line)
            if m:
                pick, mode = m.group(1), m.group(2)
    if pick is None:
        # AUTO's order, as afio_create() documents it.
        pick = next((b for b in BACKENDS if b in avail), "none")
        mode = os.environ.get("AFIO_MODE") or "inline"
    if os.environ.get("AFIO_BACKEND"):
        why = "AFIO_BACKEND=%s in the environment" % os.environ["AFIO_BACKEND"]
    elif pick not in BACKENDS:
        why = "no backend probes available"
    else:
        passed = ["%s is %s (%s)" % (b, reasons[b][0], reasons[b][1]) for b in BACKENDS
                  if b in reasons and b != pick and BACKENDS.index(b) < BACKENDS.index(pick)]
        why = "; ".join(passed + ["%s is the first of %s that probes available"
                                  % (pick, " > ".join(BACKENDS))])
    why += ("; AFIO_MODE=%s in the environment" % os.environ["AFIO_MODE"]
            if os.environ.get("AFIO_MODE") else "; INLINE is the default mode")
    rows = [{"kind": "probe", "job": "afio-probe", "backend": b, "submit": st, "cmd": r}
            for b, (st, r) in reasons.items()]
    rows.append({"kind": "probe", "job": "auto", "backend": pick, "mode": mode,
                 "cmd": why, "submit": "afio-probe" if tool else "afio-bench --probe"})
    return rows


class Progress:
    """Cell i of N and the time left, on a terminal only; nothing in CI."""

    def __init__(self, total, quiet=False):
        self.total = total
        self.done = 0
        self.t0 = time.time()
        self.on = (sys.stderr.isatty() and not quiet
                   and os.environ.get("CI", "") not in ("true", "1"))

    def step(self, what):
        self.done += 1
        if not self.on:
            return
        el = time.time() - self.t0
        left = el / self.done * max(0, self.total - self.done)
        sys.stderr.write("\r\033[K  cell %d of %d  %-32s %3.0f s left"
                         % (self.done, self.total, what[:32], left))
        sys.stderr.flush()

    def grow(self, n):
        self.total += n

    def end(self):
        if self.on:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def main():
    ap = argparse.ArgumentParser(
        prog="afio-bench --compare",
        description="Every available backend x mode over a workload matrix, next to fio, "
                    "the raw engines and the thread pool's peers.")
    ap.add_argument("--afio-bench", required=True, help=argparse.SUPPRESS)
    ap.add_argument("--runtime", type=float, default=1.0, help="seconds per cell (default 1)")
    ap.add_argument("--size", type=parse_size, default=parse_size("256m"),
                    help="file size (default 256m)")
    ap.add_argument("--file", help="file or block device to use (default: create one in --dir "
                    "and remove it afterwards)")
    ap.add_argument("--dir", default=".", help="where to create the file (default .)")
    ap.add_argument("--qd", type=int, default=32, help="queue depth (default 32)")
    ap.add_argument("--threads", type=int, default=4,
                    help="pool workers: ours, libuv's, and fio psync numjobs (default 4)")
    ap.add_argument("--bs", type=size_list, default=size_list("4k,64k,1m"))
    ap.add_argument("--rw", type=choice_list(["randread", "randwrite", "read", "write"]),
                    default=["randread", "randwrite"])
    ap.add_argument("--io", type=choice_list(["buffered", "direct"]),
                    default=["buffered", "direct"])
    ap.add_argument("--workloads", type=workload_list,
                    help="instead of --rw x --io x --bs: RW:BS:buf|dir,... "
                         "(e.g. randread:4k:buf,randwrite:4k:dir)")
    ap.add_argument("--ops", type=choice_list(["openat", "statx", "sendfile"]),
                    help="instead of reads and writes: these ops through every backend and "
                         "mode, libuv's pool and a plain loop of the same calls")
    ap.add_argument("--files", type=int, default=4096,
                    help="--ops openat,statx: files in the tree (default 4096)")
    ap.add_argument("--backend", "--backends", dest="backends",
                    type=choice_list(BACKENDS), default=BACKENDS)
    ap.add_argument("--mode", "--modes", dest="modes", type=choice_list(MODES), default=MODES)
    ap.add_argument("--repeat", type=int, default=2,
                    help="alternated runs of every cell; medians (default 2)")
    ap.add_argument("--max-repeat", type=int,
                    help="a ratio whose runs disagree by more than 15%% is run again, up "
                         "to this many times in all (default --repeat + 2, or 1 with "
                         "--repeat 1)")
    ap.add_argument("--no-fio", action="store_true", help="skip fio")
    ap.add_argument("--no-peers", action="store_true",
                    help="skip the raw engines and the thread pool's peers")
    ap.add_argument("--csv", default="afio-compare.csv", help="(default afio-compare.csv)")
    ap.add_argument("--png", default="afio-compare.png",
                    help="chart, drawn when gnuplot is installed (default afio-compare.png)")
    ap.add_argument("--quiet", action="store_true",
                    help="print only the verdict, not the tables")
    ap.add_argument("--json", action="store_true",
                    help="print the verdict as one JSON object; the rest goes to stderr")
    ap.add_argument("--from-csv", metavar="PATH",
                    help="run nothing: tables, verdict and chart from the CSV of an earlier "
                         "run")
    a = ap.parse_args()
    if a.from_csv:
        return from_csv(a)
    if a.qd < 1 or a.threads < 1 or a.repeat < 1 or not a.runtime > 0:
        ap.error("--qd, --threads, --repeat and --runtime must be positive")
    if a.max_repeat is None:
        # One run cannot disagree with itself.
        a.max_repeat = a.repeat + 2 if a.repeat >= 2 else a.repeat
    a.max_repeat = max(a.max_repeat, a.repeat)

    a.have_fio = not a.no_fio and shutil.which("fio") is not None
    uv = os.path.join(os.path.dirname(os.path.abspath(a.afio_bench)), "afio-uv-bench")
    a.uv_bench = uv if os.access(uv, os.X_OK) else None
    avail, skipped = probe(a.afio_bench)
    backends = [b for b in a.backends if b in avail]
    for b in a.backends:
        if b not in avail:
            say(a, "skipped %-9s %s" % (b, skipped.get(b, "not available")))
    if not backends:
        say(a, "no backend available")
        return 1
    if not a.no_fio and not a.have_fio:
        say(a, "skipped fio: not installed (apt-get install fio)")
    if not a.no_peers and not a.uv_bench:
        say(a, "skipped libuv: afio-uv-bench not built (apt-get install libuv1-dev, rebuild)")

    created = None
    if not a.file:
        fd, created = tempfile.mkstemp(prefix="afio-compare.", dir=a.dir)
        os.close(fd)
        a.file = created
    try:
        if created or not os.path.exists(a.file):
            t = time.time()
            create_file(a.file, a.size)
            say(a, "created %s (%s of data) in %.1f s" % (a.file, human_size(a.size),
                                                         time.time() - t))
        if a.ops:
            return run_ops(a, backends)
        return run(a, backends, probe_auto(a.afio_bench, avail, skipped))
    finally:
        if created:
            os.unlink(created)


def jobs_for(a, backends):
    jobs = [("afio", b, m, "batch") for b in backends for m in a.modes]
    for b in ("io_uring", "libaio"):
        if b in backends and "inline" in a.modes and a.have_fio:
            jobs.append(("afio", b, "inline", "each"))
    if a.have_fio:
        for e in ("io_uring", "libaio"):
            if e in backends:
                jobs += [("fio", e, "batch"), ("fio", e, "each")]
    if not a.no_peers:
        jobs += [("raw", e) for e in ("io_uring", "libaio") if e in backends]
        jobs.append(("raw", "psync"))
        if a.uv_bench:
            jobs.append(("uv",))
        if a.have_fio:
            jobs += [("fio", "posixaio", "each"), ("fio", "psync", "each")]
    return jobs


def ratio_rows(a, backends):
    """(table, name, ours, peer): the ratios that are checked for agreement."""
    rows = []
    if a.have_fio:
        for b in ("io_uring", "libaio"):
            if b in backends and "inline" in a.modes:
                rows.append(("fio", "%s/inl : fio %s,batch" % (SHORT[b], b),
                             ("afio", b, "inline", "batch"), ("fio", b, "batch")))
                rows.append(("fio", "%s/inl,each : fio %s" % (SHORT[b], b),
                             ("afio", b, "inline", "each"), ("fio", b, "each")))
    if not a.no_peers:
        for b, e in (("io_uring", "io_uring"), ("libaio", "libaio"), ("threads", "psync")):
            if b in backends and "inline" in a.modes:
                rows.append(("raw", "%s/inl : raw %s" % (SHORT[b], e if e != "psync" else
                                                         "psync x1"),
                             ("afio", b, "inline", "batch"), ("raw", e)))
        if "threads" in backends and "inline" in a.modes and a.have_fio:
            rows.append(("raw", "threads/inl : fio psync x%d" % a.threads,
                         ("afio", "threads", "inline", "batch"), ("fio", "psync", "each")))
        if "threads" in backends and "async" in a.modes:
            ours = ("afio", "threads", "async", "batch")
            if a.uv_bench:
                rows.append(("pool", "threads/asy : libuv", ours, ("uv",)))
            if a.have_fio:
                rows.append(("pool", "threads/asy : fio posixaio", ours,
                             ("fio", "posixaio", "each")))
            if "io_uring" in backends:
                rows.append(("pool", "threads/asy : uring/asy (io-wq)", ours,
                             ("afio", "io_uring", "async", "batch")))
    return rows


def pair_ratios(ours, peer, key=lambda r: r["iops"]):
    """Ratios of the runs of one repeat each: ours and peer map a repeat to
    its run (None where the run failed)."""
    return verdict.pair({k: key(o) if o else None for k, o in ours.items()},
                        {k: key(p) if p else None for k, p in peer.items()})


def settled(ratios):
    """Two runs agree within AGREE of each other."""
    rs = sorted(ratios)
    return any(rs[i + 1] <= rs[i] * (1 + AGREE) for i in range(len(rs) - 1))


def run(a, backends, probe_rows):
    r = Runner(a)
    uname = os.uname()
    say(a, "%s, %d CPUs, kernel %s; file %s; qd %d, %d pool threads, %.2f s per cell, "
        "%d repeats (up to %d); load average %.2f"
        % (uname.machine, os.cpu_count() or 1, uname.release, a.file, a.qd, a.threads,
           a.runtime, a.repeat, a.max_repeat, os.getloadavg()[0]))
    is_blk = os.path.exists(a.file) and not os.path.isfile(a.file)

    if a.workloads:
        workloads = a.workloads
    else:
        workloads = [{"rw": rw, "bs": bs, "direct": io == "direct"}
                     for rw in a.rw for io in a.io for bs in a.bs]
    jobs = jobs_for(a, backends)
    checks = ratio_rows(a, backends)
    res = {}    # (label, job) -> {repeat: run or None}
    rows = list(probe_rows)
    prog = Progress(len(workloads) * len(jobs) * a.repeat, a.quiet or a.json)
    t_start = time.time()

    def one(w, job, rep):
        lab = label(w)
        # A daemon here reclaims idle page cache: warm the file right
        # before each buffered read, not once per workload.
        if not w["direct"] and is_read(w) and not is_blk:
            warm_cache(a.file, a.size)
        out = r.run(job, w)
        res.setdefault((lab, job), {})[rep] = out
        if out:
            rows.append(dict(out, kind=job[0], job=job_name(job), repeat=rep))
        prog.step("%s %s" % (lab, job_name(job)))

    for w in workloads:
        lab = label(w)
        for rep in range(a.repeat):
            if w["rw"] in ("write", "randwrite"):
                os.sync()
            # Every other repeat runs backwards, so that no run is always
            # the first after the page cache was warmed or synced.
            for job in jobs if rep % 2 == 0 else reversed(jobs):
                one(w, job, rep)
        # A ratio whose runs disagree is run again, alternated, until two
        # agree or --max-repeat.
        for rep in range(a.repeat, a.max_repeat):
            again = [(o, p) for _, _, o, p in checks
                     if not settled(pair_ratios(res.get((lab, o), {}),
                                                res.get((lab, p), {})))]
            if not again:
                break
            todo = []
            for o, p in again:
                todo += [j for j in (o, p) if j not in todo]
            prog.grow(len(todo))
            if w["rw"] in ("write", "randwrite"):
                os.sync()
            for job in todo if rep % 2 == 0 else reversed(todo):
                one(w, job, rep)
    prog.end()
    if "io_uring" in backends and not a.no_peers:
        rows += nop_runs(a, r)

    with open(a.csv, "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=CSV_FIELDS, extrasaction="ignore")
        wr.writeheader()
        for row in rows:
            wr.writerow(dict(row, cpu_us_per_io=cpu_us_per_io(row)))
    say(a, "\nwrote %s (%d runs) in %.0f s; load average %.2f (other work on the machine "
        "makes figures noisy)" % (a.csv, len(rows) - len(probe_rows), time.time() - t_start,
                                  os.getloadavg()[0]))
    return report(a, rows)


CSV_FIELDS = ["kind", "job", "backend", "mode", "submit", "rw", "bs", "direct", "qd", "threads",
              "repeat", "iops", "mib_s", "cpu_s", "iops_per_cpu_s", "cpu_us_per_io",
              "cpu_ns_per_req",
              "lat_p50_us", "lat_p99_us", "lat_p999_us", "loop_stall_max_us",
              "loop_stall_p99_us", "loop_slept_max_us", "slat_max_us", "slat_p99_us",
              "fallbacks", "ios", "runtime_s", "whole_cpu_s", "fio_own_cpu_s", "cmd"]
NUMERIC = set(CSV_FIELDS[8:-1]) - {"submit"}


def job_of(row):
    """The job tuple a CSV row (or a run) was made by."""
    kind = row["kind"]
    if kind == "afio":
        return ("afio", row["backend"], row["mode"], row.get("submit") or "batch")
    if kind == "raw":
        return ("raw", row["backend"][len("raw-"):])
    if kind == "fio":
        return ("fio", row["mode"], row["submit"])
    return ("uv",)


def read_runs(path):
    """The runs of a CSV that --compare wrote, with numbers as numbers."""
    rows = []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            for k in NUMERIC:
                if row.get(k) not in (None, ""):
                    row[k] = float(row[k])
                else:
                    row[k] = None
            if row["kind"] != "probe":
                row["bs"] = int(row["bs"])
                row["direct"] = row["direct"] in ("True", "true", "1")
                row["repeat"] = int(row["repeat"])
            rows.append(row)
    return rows


def from_csv(a):
    """Tables, verdict and chart again from a CSV of an earlier run."""
    rows = read_runs(a.from_csv)
    runs = [x for x in rows if x["kind"] != "probe"]
    if not runs:
        say(a, "no runs in %s" % a.from_csv)
        return 1
    mine = [x for x in runs if x["kind"] == "afio"]
    a.backends = [b for b in BACKENDS if any(x["backend"] == b for x in mine)]
    a.modes = [m for m in MODES if any(x["mode"] == m for x in mine)]
    a.have_fio = any(x["kind"] == "fio" for x in runs)
    a.uv_bench = any(x["kind"] == "uv" for x in runs)
    a.no_peers = not any(x["kind"] in ("raw", "uv") for x in runs)
    a.qd = int(runs[0]["qd"])
    a.threads = int((mine or runs)[0]["threads"])
    a.runtime = (mine or runs)[0]["runtime_s"]
    say(a, "from %s: %d runs" % (a.from_csv, len(runs)))
    return report(a, rows)


def print_tables(a, workloads, backends, jobs, checks, res):
    """The tables of the figures and of the ratios, before the verdict."""
    def runs(lab, job):
        return [x for x in res.get((lab, job), {}).values() if x]

    def med(lab, job, key):
        return median([x.get(key) for x in runs(lab, job)])

    def med_cpu(lab, job):
        return median([cpu_us_per_io(x) for x in runs(lab, job)])

    combos = [(b, m) for b in backends for m in a.modes]
    colw = 10
    heads = ["%s/%s" % (SHORT[b], m) for b, m in combos]
    print()
    print("IOPS (median; * = best in the row; 'bound' = cpu: a core was busy, "
          "dev: waiting for the device)")
    print("%-18s" % "workload" + "".join("%*s" % (colw, h[:colw - 1]) for h in heads)
          + "  bound")
    for w in workloads:
        lab = label(w)
        vals = [med(lab, ("afio", b, m, "batch"), "iops") for b, m in combos]
        best = max([v for v in vals if v is not None], default=None)
        cells, bound = [], "-"
        for (b, m), v in zip(combos, vals):
            cells.append("%*s" % (colw, fmt_iops(v) + ("*" if v is not None and v == best
                                                       else " ")))
            if v is not None and v == best:
                busy = median([x["cpu_s"] / x["runtime_s"]
                               for x in runs(lab, ("afio", b, m, "batch"))])
                bound = ("cpu" if busy > 0.75 else "dev") + " %.1f" % busy
        print("%-18s" % lab + "".join(cells) + "  " + bound)

    print()
    print("CPU per I/O in us (whole process, user+sys; lower is better)")
    print("%-18s" % "workload" + "".join("%*s" % (colw, h[:colw - 1]) for h in heads))
    for w in workloads:
        lab = label(w)
        vals = [med_cpu(lab, ("afio", b, m, "batch")) for b, m in combos]
        best = min([v for v in vals if v is not None], default=None)
        print("%-18s" % lab + "".join(
            "%*s" % (colw, fmt(v) + ("*" if v is not None and v == best else " "))
            for v in vals))

    titles = {
        "fio": "Ours / fio, like for like (batch against fio --iodepth_batch_submit=%d "
               "--iodepth_batch_complete_min=1, ',each' against fio's default; "
               "fio --iomem=mmap)" % a.qd,
        "raw": "Ours (--fd-hint --level-eventfd) / the raw engine, no library (afio-bench --raw; "
               "goal IOPS >= 0.97, CPU/IO <= 1.03)",
        "pool": "The thread pool and its peers, %d threads each (goal IOPS >= 1.2, "
                "CPU/IO <= 1.0)" % a.threads,
    }
    for table in ("fio", "raw", "pool"):
        mine = [c for c in checks if c[0] == table]
        if not mine:
            continue
        print()
        print(titles[table])
        print("('~': no two alternated runs of the ratio agreed within 15%; spread shown)")
        print("%-18s %-32s %8s %8s %6s %11s %7s %7s %6s" %
              ("workload", "ours : peer", "ours", "peer", "IOPS", "(spread)", "cpu/io",
               "peer", "CPU"))
        for w in workloads:
            lab = label(w)
            for _, name, o, p in mine:
                rs = pair_ratios(res.get((lab, o), {}), res.get((lab, p), {}))
                cs = pair_ratios(res.get((lab, o), {}), res.get((lab, p), {}), cpu_us_per_io)
                oi, pi = med(lab, o, "iops"), med(lab, p, "iops")
                oc, pc = med_cpu(lab, o), med_cpu(lab, p)
                ratio = median(rs)
                spread = "%.2f-%.2f" % (min(rs), max(rs)) if len(rs) > 1 else ""
                mark = "" if settled(rs) or len(rs) < 2 else "~"
                print("%-18s %-32s %8s %8s %6s %11s %7s %7s %6s" % (
                    lab, name, fmt_iops(oi), fmt_iops(pi), fmt(ratio) + mark, spread,
                    fmt(oc), fmt(pc), fmt(median(cs))))

    # Stalls: ours per backend/mode, fio's submission latency beside them.
    fio_slat = [("fio", e, s) for e in ("libaio", "io_uring") for s in ("each", "batch")
                if ("fio", e, s) in jobs]
    print()
    print("Event-loop stalls in us: our longest call to afio_submit()/afio_poll(ctx, 0, 0) "
          "and its p99 (max/p99),")
    print("fio's submission latency (slat max/p99), and a raw engine's longest round; 'm' = "
          "ms.  '!' marks a call of ours that slept >= 1 ms (device, lock, page cache)")
    raws = [j for j in (("raw", "libaio"), ("raw", "io_uring")) if j in jobs]
    heads2 = heads + [job_name(j)[4:] for j in fio_slat] + [job_name(j) for j in raws]
    print("%-18s" % "workload" + "".join("%*s" % (colw + 1, h[:colw]) for h in heads2))
    for w in workloads:
        lab = label(w)
        cells = []
        for b, m in combos:
            job = ("afio", b, m, "batch")
            mx, p99 = med(lab, job, "loop_stall_max_us"), med(lab, job, "loop_stall_p99_us")
            slept = max([x.get("loop_slept_max_us", 0) for x in runs(lab, job)], default=0)
            cells.append("%s/%s%s" % (fmt_us(mx), fmt_us(p99), "!" if slept >= 1000 else ""))
        for j in fio_slat:
            cells.append("%s/%s" % (fmt_us(med(lab, j, "slat_max_us")),
                                    fmt_us(med(lab, j, "slat_p99_us"))))
        for j in raws:
            cells.append("%s/%s" % (fmt_us(med(lab, j, "loop_stall_max_us")),
                                    fmt_us(med(lab, j, "loop_stall_p99_us"))))
        print("%-18s" % lab + "".join("%*s" % (colw + 1, c) for c in cells))

    if "io_uring" in backends and "libaio" in backends:
        print()
        print("io_uring / libaio IOPS (best mode of each)")
        for w in workloads:
            lab = label(w)
            u = max([v for v in (med(lab, ("afio", "io_uring", m, "batch"), "iops")
                                 for m in a.modes) if v], default=None)
            l = max([v for v in (med(lab, ("afio", "libaio", m, "batch"), "iops")
                                 for m in a.modes) if v], default=None)
            if u and l:
                print("%-18s %.2f" % (lab, u / l))


def runs_by_workload(rows):
    """The workloads in the order they ran, and (label, job) -> {repeat: run}."""
    workloads, res = [], {}
    for x in rows:
        if x["kind"] in ("probe", "nop"):
            continue
        w = {"rw": x["rw"], "bs": int(x["bs"]), "direct": bool(x["direct"])}
        if w not in workloads:
            workloads.append(w)
        res.setdefault((label(w), job_of(x)), {})[int(x["repeat"])] = x
    return workloads, res


# What each table's ratios are held to (bench/README.md, "The comparison");
# the limits and io-wq are shown beside the peers, not held to a goal.
GROUPS = {
    "fio": ("ours / fio, like for like", verdict.Goal(1.0, 1.0)),
    "raw": ("ours / the raw engine", verdict.Goal(0.97, 1.03)),
    "pool": ("the thread pool / its peers", verdict.Goal(1.2, 1.0)),
}
NOT_A_PEER = ("fio psync", "io-wq")


def ratios_of(workloads, checks, res):
    out = []
    for table, name, o, p in checks:
        group, goal = GROUPS[table]
        if any(s in name for s in NOT_A_PEER):
            goal = None
        for w in workloads:
            lab = label(w)
            ours, peer = res.get((lab, o), {}), res.get((lab, p), {})
            out.append(verdict.Ratio(group, name, chart_cell(w), pair_ratios(ours, peer),
                                     pair_ratios(ours, peer, cpu_us_per_io), goal))
    return out


def chart_cell(w):
    return "%s\n%s %s" % (w["rw"], human_size(w["bs"]), "dir" if w["direct"] else "buf")


def best_of(workloads, backends, modes, res):
    """The best backend/mode of each workload by IOPS, as verdict facts;
    and each backend/mode's share of that best, per workload."""
    winners, share = [], {}
    for w in workloads:
        lab = label(w)
        vals = {(b, m): median([x["iops"] for x in res.get((lab, ("afio", b, m, "batch")),
                                                            {}).values() if x])
                for b in backends for m in modes}
        vals = {k: v for k, v in vals.items() if v}
        if not vals:
            continue
        top = max(vals, key=vals.get)
        winners.append(("%s/%s" % top, re.sub(r"\s+", " ", lab), fmt_iops(vals[top])))
        share[lab] = {k: v / vals[top] for k, v in vals.items()}
    return verdict.best_facts(winners), share


def report(a, rows):
    workloads, res = runs_by_workload(rows)
    backends = [b for b in BACKENDS if any(k[1][0] == "afio" and k[1][1] == b for k in res)]
    jobs = jobs_for(a, backends)
    checks = ratio_rows(a, backends)
    if not (a.quiet or a.json):
        print_tables(a, workloads, backends, jobs, checks, res)
    ratios = ratios_of(workloads, checks, res)
    facts = []
    probes = [x for x in rows if x["kind"] == "probe"]
    pick = [x for x in probes if x["job"] == "auto"]
    if pick:
        facts.append(("AUTO", "%s, mode %s (%s): %s" % (pick[0]["backend"], pick[0]["mode"],
                                                         pick[0]["submit"], pick[0]["cmd"])))
    else:
        facts.append(("AUTO", "not in this CSV (written before the probe was recorded)"))
    seen = [x for x in probes if x["job"] == "afio-probe"]
    if seen:
        facts.append(("probes", "; ".join("%s" % x["cmd"] for x in seen)))
    best, share = best_of(workloads, backends, a.modes, res)
    if pick and share:
        mine = (pick[0]["backend"], pick[0]["mode"])
        got = {re.sub(r"\s+", " ", lab): s[mine] for lab, s in share.items() if mine in s}
        if got:
            low = min(got, key=got.get)
            facts.append(("AUTO's pick", "%s of the best IOPS here, over %d workloads%s"
                          % (verdict.span(list(got.values())).replace("-", " to "), len(got),
                             "" if got[low] == 1 else " (lowest: %s)" % low)))
    facts += best
    facts += nop_facts(rows)
    if a.png:
        verdict.chart(a.png, "afio-bench --compare: ours / peer per workload\nqd %d, %d pool "
                      "threads, %.2f s cells; bar: median of the runs paired round by round, "
                      "whisker: their range" % (a.qd, a.threads, a.runtime),
                      ratios, [chart_cell(w) for w in workloads],
                      say=lambda s: say(a, s))
    if a.json:
        print(json.dumps(dict(verdict.verdict_json(ratios, facts), csv=a.csv, png=a.png)))
    else:
        print("\n".join(verdict.verdict_lines(
            ratios, facts, goals_from='bench/README.md, "The comparison"')))
    return 0


# What the library adds to a request over raw liburing, in CPU ns, at the
# batch sizes of the goal (bench/README.md, "What the library costs").
NOP_QDS = (1, 32)
NOP_GOAL_NS = {32: 30}


def nop_runs(a, r):
    """Nops through the library on io_uring and on raw liburing, alternated."""
    rows = []
    for qd in NOP_QDS:
        for rep in range(max(3, a.repeat)):
            pair = [("afio", ["--backend", "io_uring"]), ("raw", ["--raw", "io_uring"])]
            for kind, how in pair if rep % 2 == 0 else reversed(pair):
                out = r.run_json([a.afio_bench] + how + ["--op", "nop", "--qd", str(qd),
                                                         "--runtime", str(a.runtime), "--json"])
                if out:
                    rows.append(dict(out, kind="nop", job=kind, repeat=rep))
    return rows


def nop_facts(rows):
    """The verdict's line on a request's own cost, paired run by run."""
    nops = [x for x in rows if x["kind"] == "nop"]
    parts = []
    for qd in sorted({int(x["qd"]) for x in nops}):
        runs = {}
        for x in nops:
            if int(x["qd"]) == qd:
                runs.setdefault(int(x["repeat"]), {})[x["job"]] = float(x["cpu_ns_per_req"])
        pairs = [p for p in runs.values() if "afio" in p and "raw" in p]
        if not pairs:
            continue
        extra = [p["afio"] - p["raw"] for p in pairs]
        goal = NOP_GOAL_NS.get(qd)
        mark = "" if goal is None else ("; goal <= %d ns: %s" % (
            goal, "met" if median(extra) <= goal else "NOT MET"))
        # Raw's own time says how fast the machine runs today: the goal is
        # in nanoseconds, and a slower day makes every figure larger.
        parts.append("%+.0f ns per request at batch %d (runs %+.0f to %+.0f; raw %.0f ns%s)"
                     % (median(extra), qd, min(extra), max(extra),
                        median([p["raw"] for p in pairs]), mark))
    if not parts:
        return []
    return [("request cost", "library over raw liburing, nops, CPU: " + "; ".join(parts))]


def say(a, text):
    """Progress and notes: stderr with --json, whose stdout is the verdict."""
    print(text, file=sys.stderr if a.json else sys.stdout)


def make_tree(a):
    a.tree = tempfile.mkdtemp(prefix="afio-tree.", dir=a.dir)
    for i in range(a.files):
        d = os.path.join(a.tree, "d%02d" % (i % 16))
        os.makedirs(d, exist_ok=True)
        open(os.path.join(d, "f%05d" % i), "w").close()


def run_ops(a, backends):
    """The ops, ours against libuv's pool and a plain loop: ops per second
    (openat: an open and a close; sendfile: MiB/s) and CPU per op."""
    r = Runner(a)
    make_tree(a)
    try:
        print("ops: %s; qd %d, %d pool threads, %.2f s per cell, %d repeats; %d files in "
              "a tree, sendfile of %s at a time from a cached %s file to %d TCP "
              "connections on 127.0.0.1; load average %.2f"
              % (",".join(a.ops), a.qd, a.threads, a.runtime, a.repeat, a.files,
                 human_size(a.bs[0]), human_size(a.size), a.qd, os.getloadavg()[0]))
        jobs = [("afio", b, m, "batch") for b in backends for m in a.modes]
        jobs += [("raw", "psync")] + ([("uv",)] if a.uv_bench else [])
        res = {}
        prog = Progress(len(a.ops) * len(jobs) * a.repeat)
        for op in a.ops:
            w = {"op": op, "bs": a.bs[0]}
            for rep in range(a.repeat):
                for job in jobs if rep % 2 == 0 else reversed(jobs):
                    res.setdefault((op, job), []).append(r.run(job, w))
                    prog.step("%s %s" % (op, job_name(job)))
        prog.end()
    finally:
        shutil.rmtree(a.tree, ignore_errors=True)

    def val(op, job):
        key = "mib_s" if op == "sendfile" else "iops"
        return median([x[key] for x in res.get((op, job), []) if x])

    def cpu(op, job):
        return median([cpu_us_per_io(x) for x in res.get((op, job), []) if x])

    names = [job_name(j).replace("raw psync x1", "sync loop") for j in jobs]
    print()
    print("ops per second (sendfile: MiB/s), median of %d; CPU per op in us below" % a.repeat)
    print("%-9s" % "op" + "".join("%11s" % n[:10] for n in names))
    for op in a.ops:
        print("%-9s" % op + "".join("%11s" % (fmt_iops(val(op, j)) if op != "sendfile" else
                                             fmt(val(op, j), "%.0f")) for j in jobs))
        print("%-9s" % "  cpu/op" + "".join("%11s" % fmt(cpu(op, j)) for j in jobs))
    if a.uv_bench:
        print()
        print("against libuv (goal: io_uring >= 1.0 at CPU/op <= 1.0; the pool >= 1.0) and "
              "the plain loop")
        print("%-9s %-14s %8s %8s %8s %8s" % ("op", "ours", "/libuv", "cpu", "/loop", "cpu"))
        for op in a.ops:
            for b, m in [(b, m) for b in backends for m in a.modes]:
                j = ("afio", b, m, "batch")
                o, u, l = val(op, j), val(op, ("uv",)), val(op, ("raw", "psync"))
                oc, uc, lc = cpu(op, j), cpu(op, ("uv",)), cpu(op, ("raw", "psync"))
                print("%-9s %-14s %8s %8s %8s %8s" % (
                    op, job_name(j), fmt(o / u if o and u else None),
                    fmt(oc / uc if oc and uc else None), fmt(o / l if o and l else None),
                    fmt(oc / lc if oc and lc else None)))
    rows = [dict(x, kind=j[0], job=job_name(j), repeat=i)
            for (op, j), xs in res.items() for i, x in enumerate(xs) if x]
    fields = ["kind", "job", "backend", "mode", "rw", "bs", "qd", "threads", "repeat", "iops",
              "mib_s", "cpu_s", "cpu_us_per_io", "lat_p50_us", "lat_p99_us",
              "loop_stall_max_us", "loop_stall_p99_us", "fallbacks", "ios", "runtime_s", "cmd"]
    with open(a.csv, "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        wr.writeheader()
        for row in rows:
            wr.writerow(dict(row, cpu_us_per_io=cpu_us_per_io(row)))
    print()
    print("wrote %s (%d runs); load average %.2f" % (a.csv, len(rows), os.getloadavg()[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
