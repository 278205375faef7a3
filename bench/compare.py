#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""afio-bench --compare: every available backend x mode over a matrix of
workloads, side by side with fio running the same workload with the matching
engine on the same file.  Prints tables, writes a CSV and, when gnuplot is
installed, a PNG chart.  Standard library only."""

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

BACKENDS = ["io_uring", "libaio", "threads"]
MODES = ["inline", "async", "hybrid"]
# Our mode that does what fio's engine does: io_uring and libaio submit from
# the caller; psync with numjobs=N is N threads each blocking in pread/pwrite.
FIO_ENGINE = {"io_uring": "io_uring", "libaio": "libaio", "threads": "psync"}
FIO_MATCH_MODE = {"io_uring": "inline", "libaio": "inline", "threads": "async"}
# fio's kernel-async engines submit each request as it is queued (its default
# iodepth_batch_submit=1); ours batch what a poll round queues.  Both
# patterns are run next to fio: a batch costs less CPU, and on some devices
# one by one keeps more requests moving.
FIO_SUBMITS_EACH = ("io_uring", "libaio")


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


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


class Runner:
    def __init__(self, args):
        self.a = args
        self.ncpu = os.cpu_count() or 1
        self.baseline = {}

    def ours(self, backend, mode, w, each=False):
        a = self.a
        cmd = [a.afio_bench, "--backend", backend, "--mode", mode, "--rw", w["rw"],
               "--bs", str(w["bs"]), "--qd", str(a.qd),
               "--direct" if w["direct"] else "--buffered",
               "--size", str(a.size), "--runtime", str(a.runtime),
               "--file", a.file, "--threads", str(a.threads), "--json"]
        if each:
            cmd.append("--submit-each")
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True)
        if p.returncode != 0 or not p.stdout.strip():
            sys.stderr.write("  failed: %s\n  %s" % (" ".join(cmd), p.stderr))
            return None
        r = json.loads(p.stdout.strip().splitlines()[-1])
        r["cmd"] = " ".join(cmd)
        return r

    def fio_startup(self, backend, w):
        """CPU fio spends starting and stopping, measured by a 1 ms run of the
        same job; taken off its whole-process CPU."""
        key = (backend, w["bs"], w["direct"])
        if key not in self.baseline:
            runs = [self.fio(backend, w, runtime_ms=1) for _ in range(2)]
            vals = [x["whole_cpu_s"] for x in runs if x]
            self.baseline[key] = min(vals) if vals else 0.0
        return self.baseline[key]

    def fio(self, backend, w, runtime_ms=None):
        a = self.a
        engine = FIO_ENGINE[backend]
        if runtime_ms is None:
            runtime_ms = max(1, int(a.runtime * 1000))
        jobs = a.threads if engine == "psync" else 1
        qd = 1 if engine == "psync" else a.qd
        cmd = ["fio", "--name=afio", "--filename=" + a.file, "--rw=" + w["rw"],
               "--bs=%d" % w["bs"], "--ioengine=" + engine, "--iodepth=%d" % qd,
               "--numjobs=%d" % jobs, "--direct=%d" % int(w["direct"]),
               "--size=%d" % a.size, "--time_based",
               "--runtime=%dms" % runtime_ms,
               "--norandommap", "--randrepeat=0", "--invalidate=0",
               "--output-format=json"]
        # Whole-process CPU of fio and its job processes, start-up included,
        # for a cross-check of fio's own usr_cpu/sys_cpu figures.
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True)
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        whole = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
        out, err = p.stdout, p.stderr
        if p.returncode != 0:
            sys.stderr.write("  fio failed: %s\n  %s" % (" ".join(cmd), err))
            return None
        try:
            j = json.loads(out[out.index("{"):])
        except ValueError:
            sys.stderr.write("  fio: unreadable output\n")
            return None
        iops = cpu = 0.0
        ios = 0
        p50 = p99 = p999 = None
        for job in j["jobs"]:
            d = job["read"] if w["rw"] in ("read", "randread") else job["write"]
            iops += d["iops"]
            ios += d["total_ios"]
            rt = job.get("job_runtime", d.get("runtime", 0)) / 1000.0
            cpu += (job["usr_cpu"] + job["sys_cpu"]) / 100.0 * rt
            pct = d.get("clat_ns", {}).get("percentile", {})
            if p50 is None and pct:
                p50 = pct.get("50.000000", 0) / 1000.0
                p99 = pct.get("99.000000", 0) / 1000.0
                p999 = pct.get("99.900000", 0) / 1000.0
        # fio's usr_cpu/sys_cpu leave out io_uring's kernel workers (iou-wrk),
        # which are threads of the job process: for that engine count the
        # whole process, less what fio spends starting and stopping.
        own = cpu
        if runtime_ms > 1 and engine == "io_uring":
            cpu = max(own, whole - self.fio_startup(backend, w))
        return {"backend": backend, "mode": "fio-" + engine, "submit": "each",
                "rw": w["rw"], "bs": w["bs"],
                "qd": a.qd, "direct": w["direct"], "iops": iops,
                "mib_s": iops * w["bs"] / 2**20, "cpu_s": cpu,
                "iops_per_cpu_s": ios / cpu if cpu else 0,
                "lat_p50_us": p50, "lat_p99_us": p99, "lat_p999_us": p999,
                "fallbacks": 0, "ios": ios, "runtime_s": a.runtime,
                "threads": jobs, "whole_cpu_s": whole, "fio_own_cpu_s": own, "cmd": " ".join(cmd)}


def cpu_us_per_io(r):
    if not r or not r.get("ios"):
        return None
    return r["cpu_s"] / r["ios"] * 1e6


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


def warm_cache(path, size):
    with open(path, "rb", buffering=0) as f:
        left = size
        while left > 0:
            b = f.read(min(left, 1 << 20))
            if not b:
                break
            left -= len(b)


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


def label(w):
    return "%-9s %4s %-3s" % (w["rw"], human_size(w["bs"]), "dir" if w["direct"] else "buf")


def main():
    ap = argparse.ArgumentParser(
        prog="afio-bench --compare",
        description="Every available backend x mode over a workload matrix, next to fio.")
    ap.add_argument("--afio-bench", required=True, help=argparse.SUPPRESS)
    ap.add_argument("--runtime", type=float, default=1.0, help="seconds per cell (default 1)")
    ap.add_argument("--size", type=parse_size, default=parse_size("256m"),
                    help="file size (default 256m)")
    ap.add_argument("--file", help="file or block device to use (default: create one in --dir "
                    "and remove it afterwards)")
    ap.add_argument("--dir", default=".", help="where to create the file (default .)")
    ap.add_argument("--qd", type=int, default=32, help="queue depth (default 32)")
    ap.add_argument("--threads", type=int, default=4,
                    help="pool workers, and fio psync numjobs (default 4)")
    ap.add_argument("--bs", type=size_list, default=size_list("4k,64k,1m"))
    ap.add_argument("--rw", type=choice_list(["randread", "randwrite", "read", "write"]),
                    default=["randread", "randwrite"])
    ap.add_argument("--io", type=choice_list(["buffered", "direct"]),
                    default=["buffered", "direct"])
    ap.add_argument("--backend", "--backends", dest="backends",
                    type=choice_list(BACKENDS), default=BACKENDS)
    ap.add_argument("--mode", "--modes", dest="modes", type=choice_list(MODES), default=MODES)
    ap.add_argument("--repeat", type=int, default=1,
                    help="alternate ours and fio this many times per cell; medians (default 1)")
    ap.add_argument("--no-fio", action="store_true", help="skip the fio side")
    ap.add_argument("--csv", default="afio-compare.csv", help="(default afio-compare.csv)")
    ap.add_argument("--png", default="afio-compare.png",
                    help="chart, drawn when gnuplot is installed (default afio-compare.png)")
    # Options of the single-run mode that make no sense here.
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.qd < 1 or a.threads < 1 or a.repeat < 1 or not a.runtime > 0:
        ap.error("--qd, --threads, --repeat and --runtime must be positive")

    have_fio = not a.no_fio and shutil.which("fio") is not None
    avail, skipped = probe(a.afio_bench)
    backends = [b for b in a.backends if b in avail]
    for b in a.backends:
        if b not in avail:
            print("skipped %-9s %s" % (b, skipped.get(b, "not available")))
    if not backends:
        print("no backend available")
        return 1
    if not a.no_fio and not have_fio:
        print("skipped fio: not installed (apt-get install fio)")

    created = None
    if not a.file:
        fd, created = tempfile.mkstemp(prefix="afio-compare.", dir=a.dir)
        os.close(fd)
        a.file = created
    try:
        if created or not os.path.exists(a.file):
            t = time.time()
            create_file(a.file, a.size)
            print("created %s (%s of data) in %.1f s" % (a.file, human_size(a.size),
                                                        time.time() - t))
        return run(a, backends, have_fio)
    finally:
        if created:
            os.unlink(created)


def run(a, backends, have_fio):
    r = Runner(a)
    uname = os.uname()
    print("%s, %d CPUs, kernel %s; file %s; qd %d, %d pool threads, %.2f s per cell%s; "
          "load average %.2f"
          % (uname.machine, r.ncpu, uname.release, a.file, a.qd, a.threads, a.runtime,
             ", %d repeats" % a.repeat if a.repeat > 1 else "", os.getloadavg()[0]))
    is_blk = os.path.exists(a.file) and not os.path.isfile(a.file)

    workloads = []
    for rw in a.rw:
        for io in a.io:
            for bs in a.bs:
                workloads.append({"rw": rw, "bs": bs, "direct": io == "direct"})
    combos = [(b, m) for b in backends for m in a.modes]
    results = {}   # (label, backend, mode) -> [runs]
    fio_res = {}   # (label, backend) -> [runs]
    each_res = {}  # (label, backend) -> [runs] of the fio-matched mode, --submit-each
    rows = []
    t_start = time.time()
    for w in workloads:
        lab = label(w)
        jobs = []  # (kind, backend, mode), in the order of one repeat
        for b in backends:
            jobs += [("afio", b, m) for m in a.modes]
            if have_fio and b in FIO_SUBMITS_EACH and FIO_MATCH_MODE[b] in a.modes:
                jobs.append(("each", b, FIO_MATCH_MODE[b]))
            if have_fio:
                jobs.append(("fio", b, None))
        for rep in range(a.repeat):
            if not w["direct"] and w["rw"] in ("read", "randread") and not is_blk:
                warm_cache(a.file, a.size)
            if w["rw"] in ("write", "randwrite"):
                os.sync()
            # Every other repeat runs backwards, so that no run is always
            # the first after the page cache was warmed or synced.
            for kind, b, m in jobs if rep % 2 == 0 else reversed(jobs):
                if kind == "fio":
                    res = r.fio(b, w)
                    fio_res.setdefault((lab, b), []).append(res)
                elif kind == "each":
                    res = r.ours(b, m, w, each=True)
                    each_res.setdefault((lab, b), []).append(res)
                else:
                    res = r.ours(b, m, w)
                    results.setdefault((lab, b, m), []).append(res)
                if res:
                    rows.append(dict(res, kind="fio" if kind == "fio" else "afio",
                                     repeat=rep))
        sys.stderr.write("  %s done (%.0f s)\n" % (lab, time.time() - t_start))

    def med(runs, key):
        return median([x[key] for x in runs if x] if runs else [])

    def med_cpu_io(runs):
        return median([cpu_us_per_io(x) for x in runs if x] if runs else [])

    # Table 1: IOPS, winner marked.
    colw = 10
    heads = ["%s/%s" % (("uring" if b == "io_uring" else b), m) for b, m in combos]
    print()
    print("IOPS (median of %d; * = best in the row; 'bound' = cpu: a core was busy, "
          "dev: waiting for the device)" % a.repeat)
    print("%-18s" % "workload" + "".join("%*s" % (colw, h[:colw - 1]) for h in heads)
          + "  bound")
    for w in workloads:
        lab = label(w)
        vals = [med(results.get((lab, b, m)), "iops") for b, m in combos]
        best = max([v for v in vals if v is not None], default=None)
        cells = []
        for v in vals:
            s = fmt_iops(v) + ("*" if v is not None and v == best else " ")
            cells.append("%*s" % (colw, s))
        # Which limit: the winner's CPU use per second of wall time.
        bound = "-"
        for (b, m), v in zip(combos, vals):
            if v is not None and v == best:
                runs = [x for x in results[(lab, b, m)] if x]
                busy = statistics.median([x["cpu_s"] / x["runtime_s"] for x in runs])
                bound = "cpu" if busy > 0.75 else "dev"
                bound += " %.1f" % busy
        print("%-18s" % lab + "".join(cells) + "  " + bound)

    print()
    print("CPU per I/O in us (whole process, user+sys; lower is better)")
    print("%-18s" % "workload" + "".join("%*s" % (colw, h[:colw - 1]) for h in heads))
    for w in workloads:
        lab = label(w)
        vals = [med_cpu_io(results.get((lab, b, m))) for b, m in combos]
        best = min([v for v in vals if v is not None], default=None)
        cells = []
        for v in vals:
            s = "-" if v is None else "%.2f" % v
            s += "*" if v is not None and v == best else " "
            cells.append("%*s" % (colw, s))
        print("%-18s" % lab + "".join(cells))

    if have_fio:
        print()
        print("ours / fio with the same engine, same file, runs alternated "
              "(IOPS ratio >= 1 and CPU/IO ratio <= 1 are good)")
        print("(',each': ours submitted one by one, as fio's engine does by default)")
        print("%-18s %-24s %9s %9s %6s %9s %9s %6s" %
              ("workload", "ours vs fio", "ours", "fio", "IOPS", "cpu/io", "fio", "CPU"))
        def ratio_row(lab, name, o_runs, f_runs):
            oi, fi = med(o_runs, "iops"), med(f_runs, "iops")
            oc, fc = med_cpu_io(o_runs), med_cpu_io(f_runs)
            print("%-18s %-24s %9s %9s %6s %9s %9s %6s" % (
                lab, name, fmt_iops(oi), fmt_iops(fi),
                "%.2f" % (oi / fi) if oi and fi else "-",
                "%.2f" % oc if oc else "-", "%.2f" % fc if fc else "-",
                "%.2f" % (oc / fc) if oc and fc else "-"))

        for w in workloads:
            lab = label(w)
            for b in backends:
                m = FIO_MATCH_MODE[b]
                if m not in a.modes:
                    m = a.modes[0]
                o_runs = results.get((lab, b, m))
                f_runs = fio_res.get((lab, b))
                short = "%s/%s" % ("uring" if b == "io_uring" else b, m[:3])
                engine = FIO_ENGINE[b] + ("x%d" % a.threads if b == "threads" else "")
                ratio_row(lab, "%s:%s" % (short, engine), o_runs, f_runs)
                if (lab, b) in each_res:
                    ratio_row(lab, "%s,each:%s" % (short, engine), each_res[(lab, b)],
                              f_runs)

    if "io_uring" in backends and "libaio" in backends:
        print()
        print("io_uring / libaio IOPS (best mode of each)")
        for w in workloads:
            lab = label(w)
            u = max([v for v in (med(results.get((lab, "io_uring", m)), "iops")
                                 for m in a.modes) if v], default=None)
            l = max([v for v in (med(results.get((lab, "libaio", m)), "iops")
                                 for m in a.modes) if v], default=None)
            if u and l:
                print("%-18s %.2f" % (lab, u / l))

    fields = ["kind", "backend", "mode", "submit", "rw", "bs", "direct", "qd", "threads", "repeat",
              "iops", "mib_s", "cpu_s", "iops_per_cpu_s", "cpu_us_per_io", "lat_p50_us",
              "lat_p99_us", "lat_p999_us", "fallbacks", "ios", "runtime_s", "whole_cpu_s", "fio_own_cpu_s", "cmd"]
    with open(a.csv, "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        wr.writeheader()
        for row in rows:
            row = dict(row, cpu_us_per_io=cpu_us_per_io(row))
            wr.writerow(row)
    print()
    print("wrote %s (%d runs) in %.0f s; load average %.2f (other work on the machine "
          "makes figures noisy)" % (a.csv, len(rows), time.time() - t_start,
                                    os.getloadavg()[0]))

    if shutil.which("gnuplot") and a.png:
        plot(a, workloads, combos, results, fio_res if have_fio else {}, backends)
    elif a.png:
        print("no chart: gnuplot not installed (apt-get install gnuplot-nox)")
    return 0


def plot(a, workloads, combos, results, fio_res, backends):
    cols = ["%s/%s" % (b, m) for b, m in combos]
    fio_cols = ["fio-%s" % FIO_ENGINE[b] for b in backends] if fio_res else []
    with tempfile.NamedTemporaryFile("w", suffix=".dat", delete=False) as dat:
        dat.write("workload " + " ".join(cols + fio_cols) + "\n")
        for w in workloads:
            lab = label(w)
            vals = []
            for b, m in combos:
                v = median([x["iops"] for x in results.get((lab, b, m), []) if x])
                vals.append("%.0f" % v if v else "NaN")
            for b in backends if fio_res else []:
                v = median([x["iops"] for x in fio_res.get((lab, b), []) if x])
                vals.append("%.0f" % v if v else "NaN")
            dat.write('"%s" %s\n' % (re.sub(r"\s+", " ", lab), " ".join(vals)))
        name = dat.name
    # One hue per backend, lighter for later modes; fio in greys.
    shades = {"io_uring": ["#08519c", "#3182bd", "#9ecae1"],
              "libaio": ["#006d2c", "#31a354", "#a1d99b"],
              "threads": ["#a63603", "#e6550d", "#fdae6b"]}
    greys = ["#252525", "#636363", "#bdbdbd"]
    colors = [shades[b][MODES.index(m)] for b, m in combos]
    colors += [greys[BACKENDS.index(b)] for b in backends] if fio_cols else []
    clauses = []
    for i, c in enumerate(colors):
        src = "'%s'" % name if i == 0 else "''"
        xtic = ":xtic(1)" if i == 0 else ""
        clauses.append("%s using %d%s title columnhead lc rgb '%s'" % (src, i + 2, xtic, c))
    script = """
set terminal pngcairo size 1400,700 noenhanced font ",10"
set output '%s'
set title 'afio-bench: IOPS per workload, qd %d, %.2f s per cell'
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set logscale y
set ylabel 'IOPS (log scale)'
set xtics rotate by -30
set key outside right top
set grid ytics
plot %s
""" % (a.png, a.qd, a.runtime, ", ".join(clauses))
    p = subprocess.run(["gnuplot"], input=script, universal_newlines=True,
                       stderr=subprocess.PIPE)
    os.unlink(name)
    if p.returncode == 0:
        print("wrote %s" % a.png)
    else:
        sys.stderr.write("gnuplot failed: %s\n" % p.stderr)


if __name__ == "__main__":
    sys.exit(main())
