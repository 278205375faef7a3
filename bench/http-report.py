#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Tables, a CSV of medians and a chart from the runs bench/http-bench.sh
wrote (one CSV line per run).  Standard library only; the chart needs
gnuplot (Debian's gnuplot-nox)."""
import argparse
import csv
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

SUMMARY_FIELDS = ["size", "bytes", "conns", "config", "server", "backend", "mode",
                  "variant", "direct", "runs", "req_s", "mb_s", "cpu_us_per_req",
                  "server_cpu_util", "client_cpu_util", "others_cpu_util",
                  "client_others_cpu_util", "lat_p50_us", "lat_p99_us",
                  "errors", "non_2xx", "fallbacks", "path_ops", "nginx_best", "ratio_to_nginx_best"]


def config_of(row):
    if row["server"] == "nginx":
        return "nginx/" + row["variant"]
    return "%s/%s" % (row["backend"], row["mode"])


def num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def median(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def human(v):
    if v is None:
        return "-"
    if v >= 10000:
        return "%.1fk" % (v / 1000)
    return "%.0f" % v


def summarize(rows):
    """One entry per (size, conns, config): medians over the repeats."""
    groups = {}
    order = []
    for row in rows:
        key = (row["size"], int(row["conns"]), config_of(row))
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(row)
    out = []
    for key in order:
        runs = [r for r in groups[key] if num(r["req_s"]) is not None]
        first = groups[key][0]
        s = {"size": key[0], "bytes": int(first["bytes"]), "conns": key[1], "config": key[2],
             "server": first["server"], "backend": first["backend"], "mode": first["mode"],
             "variant": first["variant"], "direct": first["direct"], "runs": len(runs),
             "notes": sorted({r.get("note") for r in groups[key] if r.get("note")})}
        for f in ("req_s", "mb_s", "cpu_us_per_req", "server_cpu_util", "others_cpu_util",
                  "client_others_cpu_util", "lat_p50_us", "lat_p99_us"):
            s[f] = median([num(r.get(f)) for r in runs])
        s["client_cpu_util"] = median([num(r["client_cpu_s"]) / num(r["duration_s"])
                                       for r in runs if num(r["duration_s"])])
        s["errors"] = sum(int(num(r["errors"]) or 0) for r in runs)
        s["non_2xx"] = sum(int(num(r["non_2xx"]) or 0) for r in runs)
        fbs = [int(num(r["fallbacks"])) for r in runs if num(r["fallbacks"]) is not None]
        s["fallbacks"] = max(fbs) if fbs else ""
        pos = [int(num(r.get("path_ops"))) for r in runs if num(r.get("path_ops")) is not None]
        s["path_ops"] = max(pos) if pos else ""
        out.append(s)
    cells = sorted({(s["bytes"], s["size"], s["conns"]) for s in out})
    for _, size, conns in cells:
        mine = [s for s in out if s["size"] == size and s["conns"] == conns]
        nginx = [s for s in mine if s["server"] == "nginx" and s["req_s"]]
        best = max(nginx, key=lambda s: s["req_s"]) if nginx else None
        for s in mine:
            s["nginx_best"] = best["config"] if best else ""
            s["ratio_to_nginx_best"] = (s["req_s"] / best["req_s"]
                                        if best and s["req_s"] else None)
    return out, cells


def fmt(v, pat):
    return "-" if v is None else pat % v


def others(s):
    """Others' use of the server's CPU / of the client's."""
    return "%s/%s" % (fmt(s["others_cpu_util"], "%.2f"), fmt(s["client_others_cpu_util"], "%.2f"))


def print_notes(summary):
    """What did not start, died or logged errors, once per configuration."""
    seen = {}
    for s in summary:
        for n in s["notes"]:
            seen.setdefault((s["config"], n), []).append("%s c%d" % (s["size"], s["conns"]))
    if seen:
        print()
    for (config, note), where in seen.items():
        print("%s (%s): %s" % (config, ", ".join(where), note))


def pool_note(s):
    """What went to the thread pool: libaio's fallbacks, and how many of the
    server's requests were opens and stats, which Linux AIO cannot do."""
    if s["fallbacks"] == "":
        return ""
    if s["path_ops"] == "" or not s["fallbacks"]:
        return ", fallbacks %s" % s["fallbacks"]
    return ", fallbacks %s (opens+stats %s)" % (s["fallbacks"], s["path_ops"])


def print_tables(summary, cells, direct):
    unit = "GB/s" if direct else "MB/s"
    scale = 1000.0 if direct else 1.0
    print()
    print("median of each cell's runs; MB = 10^6 bytes of responses, heads included")
    print("cpu: server CPU-seconds per second (1.00: its core was busy); wrk: the client's")
    print("other: what other processes took of the server's CPU, and of wrk's (over 0.05:")
    print("       disturbed; re-run the cell)")
    print("ratio: req/s over the best nginx variant of the same size and connections")
    print("       (* marks it; c: wrk kept its CPU busy, so the client may have set the rate)")
    print("%-6s %5s  %-18s %9s %9s %10s %5s %6s %8s %8s %5s %9s  %s" %
          ("size", "conns", "server", "req/s", unit, "cpu us/req", "cpu", "ratio",
           "p50 us", "p99 us", "wrk", "other", "errors"))
    for _, size, conns in cells:
        for s in [s for s in summary if s["size"] == size and s["conns"] == conns]:
            if not s["runs"]:
                continue
            best = "*" if s["config"] == s["nginx_best"] else " "
            if (s["client_cpu_util"] or 0) >= CLIENT_BOUND:
                best += "c"
            bad = s["errors"] + s["non_2xx"]
            print("%-6s %5d  %-18s %9s %9s %10s %5s %5s%s %8s %8s %5s %9s  %s" % (
                size, conns, s["config"], human(s["req_s"]),
                fmt(s["mb_s"] and s["mb_s"] / scale, "%.3f" if direct else "%.1f"),
                fmt(s["cpu_us_per_req"], "%.1f"), fmt(s["server_cpu_util"], "%.2f"),
                fmt(s["ratio_to_nginx_best"], "%.2f"), best,
                fmt(s["lat_p50_us"], "%.0f"), fmt(s["lat_p99_us"], "%.0f"),
                fmt(s["client_cpu_util"], "%.2f"), others(s), "%d%s" % (bad, pool_note(s))))
    print_notes(summary)
    ours = [s for s in summary if s["server"] != "nginx" and s["runs"]]
    backends = []
    for s in ours:
        if s["backend"] not in backends:
            backends.append(s["backend"])
    if not backends:
        return
    print()
    print("best mode of each backend: req/s over the best nginx variant's; in brackets "
          "%s, and server CPU per request over that nginx's" % unit)
    print("%-6s %5s  %-20s" % ("size", "conns", "nginx best") +
          "".join("%-31s" % b for b in backends))
    for _, size, conns in cells:
        mine = [s for s in summary if s["size"] == size and s["conns"] == conns]
        ng = [s for s in mine if s["config"] == (mine[0]["nginx_best"] if mine else "")]
        ng_cpu = ng[0]["cpu_us_per_req"] if ng else None
        line = "%-6s %5d  %-20s" % (size, conns, "%s %s" % (
            ng[0]["variant"], human(ng[0]["req_s"])) if ng else "-")
        for b in backends:
            cand = [s for s in mine if s["backend"] == b and s["req_s"]]
            if not cand:
                line += "%-31s" % "-"
                continue
            top = max(cand, key=lambda s: s["req_s"])
            cpu = top["cpu_us_per_req"] / ng_cpu if ng_cpu and top["cpu_us_per_req"] else None
            cell = "%s %s (%s, cpu %s)" % (
                top["mode"], fmt(top["ratio_to_nginx_best"], "%.2f"),
                fmt(top["mb_s"] / scale, "%.3f" if direct else "%.0f"), fmt(cpu, "%.2f"))
            line += "%-31s" % cell
        print(line)


def write_summary(summary, path):
    with open(path, "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=SUMMARY_FIELDS, extrasaction="ignore")
        wr.writeheader()
        for s in summary:
            wr.writerow({k: ("%.4g" % v if isinstance(v, float) else v) for k, v in s.items()})


# Blues for io_uring, greens for libaio, oranges for the pool, darker for
# inline, lighter for hybrid; nginx's variants in greys.
HUE = {"io_uring": ("#08519c", "#3182bd", "#9ecae1"),
       "libaio": ("#006d2c", "#31a354", "#a1d99b"),
       "threads": ("#a63603", "#e6550d", "#fdae6b")}
MODES = ["inline", "async", "hybrid"]
GREYS = ["#252525", "#636363", "#969696", "#bdbdbd", "#d9d9d9"]
# wrk's CPU-seconds per second from which the client, not the server, may
# have set the rate.
CLIENT_BOUND = 0.95


def color_of(config, nginx_seen):
    if config.startswith("nginx/"):
        return GREYS[nginx_seen % len(GREYS)]
    backend, mode = config.split("/")
    return HUE.get(backend, GREYS)[MODES.index(mode) if mode in MODES else 0]


def write_columns(path, cells, configs, value):
    """One line per (size, connections), one column per configuration."""
    with open(path, "w") as f:
        f.write("cell " + " ".join(configs) + "\n")
        for size, conns in cells:
            vals = [value(size, conns, c) for c in configs]
            f.write('"%s c%d" %s\n' % (size, conns, " ".join(
                "NaN" if v is None else "%.4g" % v for v in vals)))


def plot(summary, cells, png, title):
    """Two panels: requests/s of everything, and ours over the best nginx."""
    configs = []
    for s in summary:
        if s["config"] not in configs:
            configs.append(s["config"])
    configs.sort(key=lambda c: c.startswith("nginx/"))
    by = {(s["size"], s["conns"], s["config"]): s for s in summary}
    pairs = [(size, conns) for _, size, conns in cells]

    def field(name):
        return lambda size, conns, c: by.get((size, conns, c), {}).get(name) or None

    # gnuplot refuses a histogram without a point: what never ran is left out.
    configs = [c for c in configs if any(field("req_s")(p[0], p[1], c) for p in pairs)]
    ours = [c for c in configs if not c.startswith("nginx/")
            and any(field("ratio_to_nginx_best")(p[0], p[1], c) for p in pairs)]

    tmp = tempfile.mkdtemp(prefix="http-report.")
    rates, ratios = os.path.join(tmp, "rates.dat"), os.path.join(tmp, "ratios.dat")
    write_columns(rates, pairs, configs, field("req_s"))
    write_columns(ratios, pairs, ours, field("ratio_to_nginx_best"))
    top_ratio = max([1.2] + [1.1 * s["ratio_to_nginx_best"] for s in summary
                             if s["ratio_to_nginx_best"]])
    styles = []
    seen = 0
    for i, c in enumerate(configs):
        styles.append("set linetype %d lc rgb '%s'" % (i + 1, color_of(c, seen)))
        seen += c.startswith("nginx/")
    script = "\n".join([
        "set terminal pngcairo size 1400,900 noenhanced font ',10'",
        "set output '%s'" % png,
        "set style data histogram",
        "set style histogram clustered gap 1",
        "set style fill solid 0.85 border -1",
        "set key outside right top",
        "set grid ytics",
        "\n".join(styles),
        "set multiplot layout 2,1 title '%s'" % title,
        "set logscale y",
        "set ylabel 'requests/s (log scale)'",
        "plot for [i=2:%d] '%s' using i:xtic(1) title columnhead" % (len(configs) + 1, rates),
        "unset logscale y",
        "set yrange [0:%.2f]" % top_ratio,
        "set ylabel 'over the best nginx variant'",
        "set xlabel 'file size, wrk connections'",
        "plot for [i=2:%d] '%s' using i:xtic(1) title columnhead, 1 with lines "
        "dt 2 lc rgb 'black' notitle" % (len(ours) + 1, ratios) if ours else "",
        "unset multiplot", ""])
    p = subprocess.run(["gnuplot"], input=script, universal_newlines=True,
                       stderr=subprocess.PIPE)
    shutil.rmtree(tmp, ignore_errors=True)
    if p.returncode == 0:
        print("wrote %s" % png)
    else:
        sys.stderr.write("gnuplot failed: %s\n" % p.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--csv", required=True, help="the runs, as http-bench.sh wrote them")
    ap.add_argument("--summary", help="medians (default: CSV with -summary before .csv)")
    ap.add_argument("--png", default="", help="chart, drawn when gnuplot is installed")
    a = ap.parse_args()
    with open(a.csv, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        print("no runs in %s" % a.csv)
        return 1
    summary, cells = summarize(rows)
    direct = any(r["direct"] == "1" for r in rows)
    print_tables(summary, cells, direct)
    path = a.summary or (a.csv[:-4] if a.csv.endswith(".csv") else a.csv) + "-summary.csv"
    write_summary(summary, path)
    print()
    print("wrote %s (%d runs) and %s" % (a.csv, len(rows), path))
    if a.png and shutil.which("gnuplot"):
        title = "afio-httpd and nginx, %s: requests/s, median of each cell" % (
            "O_DIRECT" if direct else "page-cached files")
        plot(summary, cells, a.png, title)
    elif a.png:
        print("no chart: gnuplot not installed (apt-get install gnuplot-nox)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
