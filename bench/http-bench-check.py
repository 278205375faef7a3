#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench/http-bench.sh end to end on a tiny setting: one backend, one file
size, a second per cell, against every cached nginx variant.  Checks that it
exits 0, writes the run CSV and the medians CSV with the documented columns,
a line per configuration whose requests were all answered with 200, and
leaves no scratch directory and no server behind.  No figure is judged;
the benchmark lock is waited for up to 60 s all the same, so as not to
load both CPUs under someone's measurement.
Exits 77 (skipped) where nginx or wrk is missing.
Usage: http-bench-check.py HTTP-BENCH.SH AFIO-HTTPD SCRATCH-DIR"""
import csv
import os
import shutil
import subprocess
import sys
import tempfile

RUN_COLUMNS = ["size", "bytes", "conns", "server", "backend", "mode", "variant", "direct",
               "repeat", "requests", "resp_bytes", "duration_s", "req_s", "mb_s", "errors",
               "non_2xx", "lat_p50_us", "lat_p99_us", "server_cpu_s", "server_cpu_util",
               "cpu_us_per_req", "client_cpu_s", "others_cpu_util", "client_others_cpu_util", "fallbacks",
               "path_ops", "note"]
SUMMARY_COLUMNS = ["size", "bytes", "conns", "config", "server", "backend", "mode",
                   "variant", "direct", "runs", "req_s", "mb_s", "cpu_us_per_req",
                   "server_cpu_util", "client_cpu_util", "others_cpu_util",
                   "client_others_cpu_util", "lat_p50_us", "lat_p99_us",
                   "errors", "non_2xx", "fallbacks", "path_ops", "nginx_best", "ratio_to_nginx_best"]
VARIANTS = ["sendfile", "plain", "aio"]


def read_csv(path):
    with open(path, newline="") as f:
        r = csv.reader(f)
        header = next(r, [])
        return header, [dict(zip(header, row)) for row in r]


def servers_left(mark):
    """Processes whose command line names our scratch directory."""
    left = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                if mark.encode() in f.read():
                    left.append(pid)
        except OSError:
            pass
    return left


def main():
    script, httpd, scratch = sys.argv[1:4]
    if not (shutil.which("nginx") or os.path.exists("/usr/sbin/nginx")) or \
            not shutil.which("wrk"):
        print("http-bench-check: nginx or wrk missing (scripts/install-deps.sh --http)")
        return 77
    os.makedirs(scratch, exist_ok=True)
    out = tempfile.mkdtemp(prefix="http-bench-check.", dir=scratch)
    run_csv = os.path.join(out, "runs.csv")
    cmd = [script, "--httpd", httpd, "--scratch-in", out, "--sizes", "4k", "--files", "4",
           "--conns", "8", "--backends", "threads", "--modes", "inline",
           "--nginx", ",".join(VARIANTS), "--duration", "1", "--warmup", "0",
           "--repeat", "1", "--csv", run_csv, "--png", "", "--lock-wait", "60"]
    fails = []
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True, timeout=240)
        print(p.stdout)
        if p.returncode == 77:
            return 77
        if p.returncode != 0:
            fails.append("exit %d" % p.returncode)
        header, rows = read_csv(run_csv)
        if header != RUN_COLUMNS:
            fails.append("run CSV columns %s, want %s" % (header, RUN_COLUMNS))
        want = ["threads/inline"] + ["nginx/" + v for v in VARIANTS]
        got = [r["backend"] + "/" + r["mode"] if r["server"] == "afio-httpd"
               else "nginx/" + r["variant"] for r in rows]
        if sorted(got) != sorted(want):
            fails.append("runs %s, want one each of %s" % (got, want))
        for r in rows:
            if int(r["requests"] or 0) <= 0 or r["non_2xx"] != "0" or r["size"] != "4k":
                fails.append("run not served in full: %s" % r)
        header, summary = read_csv(run_csv[:-4] + "-summary.csv")
        if header != SUMMARY_COLUMNS:
            fails.append("summary columns %s, want %s" % (header, SUMMARY_COLUMNS))
        if len(summary) != len(want):
            fails.append("%d summary lines, want %d" % (len(summary), len(want)))
        leftover = [n for n in os.listdir(out) if n.startswith("http-bench.")]
        if leftover:
            fails.append("scratch directory left behind: %s" % leftover)
        left = servers_left(out)
        if left:
            fails.append("servers left running: %s" % left)
    except (OSError, subprocess.TimeoutExpired, StopIteration) as e:
        fails.append(str(e))
    finally:
        shutil.rmtree(out, ignore_errors=True)
    for f in fails:
        print("FAIL: " + f)
    if not fails:
        print("http-bench-check: ok")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
