#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The benchmarks' reports from saved runs (tests/data/): afio-bench
--compare --from-csv, bench/echo-report.py and bench/http-report.py each
draw their chart of ratios and end with the verdict.  Checks that each PNG
is a PNG of the promised size, that the verdict is the last thing printed,
with its facts and a met/not met per series, and that the figures in it
are the ones the CSV gives (recomputed here from the runs).  Exits 77 only
when gnuplot is missing.
Usage: report-check.py SOURCE-ROOT SCRATCH-DIR"""
import csv
import json
import os
import re
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile

STATUS = re.compile(r"^  (met|NOT MET|met \d+/\d+|no goal) +\S")
fails = []


def check(cond, what):
    if not cond:
        fails.append(what)
    return cond


def png_size(path):
    """Width and height from the IHDR chunk, or None for what is no PNG."""
    try:
        with open(path, "rb") as f:
            head = f.read(24)
    except OSError:
        return None
    if len(head) < 24 or head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        return None
    return struct.unpack(">II", head[16:24])


def run(name, cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=120)
    check(p.returncode == 0, "%s exited %d: %s" % (name, p.returncode, p.stderr))
    return p.stdout


def check_verdict(name, out, facts, groups):
    """The verdict comes last: its heading, the facts, a header per group
    and a line per series that says met or not."""
    lines = out.rstrip("\n").split("\n")
    at = [i for i, l in enumerate(lines) if l.startswith("== Verdict ")]
    if not check(len(at) == 1, "%s: no verdict heading (or more than one)" % name):
        return []
    tail = lines[at[0] + 1:]
    for f in facts:
        check(any(l.startswith(f + ":") for l in tail), "%s: no '%s:' line in the verdict"
              % (name, f))
    for g in groups:
        check(any(l.startswith(g) for l in tail), "%s: no group '%s' in the verdict"
              % (name, g))
    series = [l for l in tail if STATUS.match(l)]
    check(series, "%s: no series line saying met or not" % name)
    check(re.match(r"Goals met in \d+ of the \d+ cells", tail[-1]),
          "%s: the verdict's last line is %r" % (name, tail[-1]))
    return series


def check_png(name, path, min_size):
    size = png_size(path)
    if check(size, "%s: %s is not a PNG" % (name, path)):
        check(size[0] >= min_size[0] and size[1] >= min_size[1],
              "%s: %s is %dx%d, want at least %dx%d" % ((name, path) + size + min_size))
        check(os.path.getsize(path) > 20000, "%s: %s is nearly empty" % (name, path))


def compare(src, data, out):
    runs = os.path.join(data, "afio-compare.csv")
    png = os.path.join(out, "compare.png")
    cmd = [sys.executable, os.path.join(src, "bench", "compare.py"), "--afio-bench",
           "/nonexistent", "--from-csv", runs, "--csv", os.path.join(out, "unused.csv")]
    text = run("compare", cmd + ["--png", png])
    check_png("compare", png, (1000, 1000))
    series = check_verdict("compare", text, ["AUTO", "probes", "AUTO's pick", "best"],
                           ["ours / fio, like for like", "ours / the raw engine",
                            "the thread pool / its peers"])
    check(len(series) == 11, "compare: %d series lines, want 11" % len(series))
    check("IOPS (median" in text.split("== Verdict")[0], "compare: the tables are missing")
    quiet = run("compare --quiet", cmd + ["--png", "", "--quiet"])
    check("IOPS (median" not in quiet and "== Verdict" in quiet,
          "compare --quiet: tables printed or verdict missing")
    verdict = json.loads(run("compare --json", cmd + ["--png", "", "--json"]))
    # One ratio recomputed from the runs: io_uring INLINE over raw
    # liburing, 4k cached reads, the median of the rounds' ratios.
    by = {}
    with open(runs, newline="") as f:
        for r in csv.DictReader(f):
            if r["kind"] != "probe" and r["rw"] == "randread" and r["bs"] == "4096" \
                    and r["direct"] == "False":
                by[(r["job"], r["repeat"])] = float(r["iops"])
    want = statistics.median(by[("uring/inl", k)] / by[("raw io_uring", k)]
                             for j, k in by if j == "raw io_uring" and ("uring/inl", k) in by)
    got = [x for x in verdict["ratios"] if x["series"] == "uring/inl : raw io_uring"
           and x["cell"] == "randread 4k buf"]
    if check(len(got) == 1, "compare --json: no uring/inl : raw io_uring ratio"):
        check(abs(got[0]["rate"] - want) < 1e-9, "compare --json: ratio %s, want %s"
              % (got[0]["rate"], want))
        check(got[0]["met"] == (round(got[0]["rate"], 2) >= 0.97 and
                                round(got[0]["cpu"], 2) <= 1.03),
              "compare --json: met %s for %s" % (got[0]["met"], got[0]))
    check(verdict["facts"].get("AUTO", "").startswith("io_uring, mode inline"),
          "compare --json: AUTO fact %r" % verdict["facts"].get("AUTO"))


def echo(src, data, out):
    png = os.path.join(out, "echo.png")
    summary = os.path.join(out, "echo-summary.csv")
    text = run("echo", [sys.executable, os.path.join(src, "bench", "echo-report.py"),
                        "--csv", os.path.join(data, "echo-bench.csv"), "--summary", summary,
                        "--png", png])
    check_png("echo", png, (1000, 1000))
    check_verdict("echo", text, ["best of ours", "goals"],
                  ["io_uring / epoll", "libaio / epoll", "threads / epoll"])
    with open(summary, newline="") as f:
        check(len(list(csv.DictReader(f))) > 0, "echo: empty summary")


def http(src, data, out):
    png = os.path.join(out, "http.png")
    text = run("http", [sys.executable, os.path.join(src, "bench", "http-report.py"),
                        "--csv", os.path.join(data, "http-bench.csv"),
                        "--summary", os.path.join(out, "http-summary.csv"), "--png", png])
    check_png("http", png, (1000, 1000))
    check_verdict("http", text, ["best of ours", "nginx's best", "peer"],
                  ["best mode of each backend", "io_uring / nginx's best"])


def main():
    src, scratch = sys.argv[1], sys.argv[2]
    if not shutil.which("gnuplot"):
        print("report-check: gnuplot missing (scripts/install-deps.sh --bench)")
        return 77
    os.makedirs(scratch, exist_ok=True)
    out = tempfile.mkdtemp(prefix="report-check.", dir=scratch)
    data = os.path.join(src, "tests", "data")
    try:
        for t in (compare, echo, http):
            try:
                t(src, data, out)
            except (OSError, ValueError, KeyError, subprocess.TimeoutExpired) as e:
                fails.append("%s: %r" % (t.__name__, e))
    finally:
        shutil.rmtree(out, ignore_errors=True)
    for f in fails:
        print("FAIL: " + f)
    if not fails:
        print("report-check: ok")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
