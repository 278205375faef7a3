#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Tables, a CSV of medians, a chart of ratios and the verdict from the
runs bench/http-bench.sh wrote (one CSV line per run).  Ratios pair the
runs of one round.  Standard library only; the chart needs gnuplot
(Debian's gnuplot-nox)."""
import argparse
import csv
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import verdict  # noqa: E402

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
             "notes": sorted({r.get("note") for r in groups[key] if r.get("note")}),
             "rounds": {r["repeat"]: r for r in runs}}
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
            s["peer"] = best
            paired = against(s, best, "req_s")
            # The median of the rounds' ratios where both ran in a round.
            s["ratio_to_nginx_best"] = (statistics.median(paired) if paired else
                                        s["req_s"] / best["req_s"]
                                        if best and s["req_s"] else None)
    return out, cells


def against(s, peer, field):
    """Ratios of s over peer, round by round."""
    if not peer:
        return []
    return verdict.pair({k: num(r.get(field)) for k, r in s["rounds"].items()},
                        {k: num(r.get(field)) for k, r in peer["rounds"].items()})


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


# wrk's CPU-seconds per second from which the client, not the server, may
# have set the rate.
CLIENT_BOUND = 0.95
# What others took of a CPU above which a cell was disturbed.
DISTURBED = 0.05
# The modes' colours are the echo bench's; the backends' differ from them.
COLORS = {"inline": verdict.PALETTE[0], "async": verdict.PALETTE[1],
          "hybrid": verdict.PALETTE[2], "io_uring": "#56B4E9", "libaio": "#CC79A7",
          "threads": "#8C6D31"}
# bench/README.md, "HTTP file server": the best mode of each
# backend at least nginx's best, from the page cache.
GOAL = verdict.Goal(1.0)


def cell_name(size, conns):
    return "%s\n%d conns" % (size, conns)


def ratios_of(summary, cells, direct):
    """The best mode of each backend against nginx's best, held to the
    goal; then each backend's modes."""
    out = []
    ours = [s for s in summary if s["server"] != "nginx" and s["runs"] and s["peer"]]
    backends = []
    for s in ours:
        backends += [s["backend"]] if s["backend"] not in backends else []
    for _, size, conns in cells:
        mine = [s for s in ours if s["size"] == size and s["conns"] == conns]
        for b in backends:
            cand = [s for s in mine if s["backend"] == b and s["req_s"]]
            if cand:
                top = max(cand, key=lambda s: s["req_s"])
                out.append(verdict.Ratio(
                    "best mode of each backend", b, cell_name(size, conns),
                    against(top, top["peer"], "req_s"),
                    against(top, top["peer"], "cpu_us_per_req"), None if direct else GOAL))
    for b in backends:
        for s in [s for s in ours if s["backend"] == b]:
            out.append(verdict.Ratio("%s / nginx's best" % b, s["mode"],
                                     cell_name(s["size"], s["conns"]),
                                     against(s, s["peer"], "req_s"),
                                     against(s, s["peer"], "cpu_us_per_req")))
    return [r for r in out if r.rates]


def best_facts(summary, cells):
    ours, theirs = [], []
    for _, size, conns in cells:
        mine = [s for s in summary if s["size"] == size and s["conns"] == conns and s["req_s"]]
        for side, into in (([s for s in mine if s["server"] != "nginx"], ours),
                           ([s for s in mine if s["server"] == "nginx"], theirs)):
            if side:
                top = max(side, key=lambda s: s["req_s"])
                into.append((top["config"], "%s c%d" % (size, conns), human(top["req_s"])))
    return verdict.best_facts(ours, "best of ours") + verdict.best_facts(theirs, "nginx's best")


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
    ratios = ratios_of(summary, cells, direct)
    if a.png:
        verdict.chart(a.png, "afio-httpd / nginx's best variant per cell, %s\nbar: median of "
                      "the runs paired round by round, whisker: their range" % (
                          "O_DIRECT" if direct else "page-cached files"),
                      ratios, [cell_name(size, conns) for _, size, conns in cells],
                      rate_name="requests/s", cpu_name="CPU per request",
                      colors=COLORS)
    facts = best_facts(summary, cells)
    facts.append(("peer", "nginx's best variant of each cell; CPU is the server's"))
    ran = [x for x in summary if x["runs"]]
    busy = [x for x in ran if max(x["others_cpu_util"] or 0,
                                   x["client_others_cpu_util"] or 0) > DISTURBED]
    if busy:
        facts.append(("disturbed", "others took over %.2f of the server's or wrk's CPU in %d "
                      "of the %d cells ('other' above): re-run before quoting them"
                      % (DISTURBED, len(busy), len(ran))))
    if direct:
        facts.append(("goals", "none from the disk (--direct); the goal is for cached files"))
    print("\n".join(verdict.verdict_lines(
        ratios, facts, rate_name="req/s",
        goals_from='bench/README.md, "HTTP file server"')))
    return 0


if __name__ == "__main__":
    sys.exit(main())
