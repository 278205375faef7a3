#!/usr/bin/env python3
"""Medians of nginx-bench.csv per cell, as a Markdown table of requests/s
with each server's ratio to stock Linux AIO and to stock's best config of
the cell, and a PNG bar chart of those ratios (gnuplot)."""
import csv
import os
import statistics
import subprocess
import sys

STOCK = ("stock-aio", "stock-threads", "stock-sendfile")


def main(path):
    rows = list(csv.DictReader(open(path)))
    cells, servers = {}, []
    for r in rows:
        cells.setdefault((r["size"], r["cache"]), {}).setdefault(r["server"], []).append(r)
        if r["server"] not in servers:
            servers.append(r["server"])

    def med(runs, key):
        return statistics.median(float(r[key]) for r in runs)

    print("| size | cache | server | req/s | x stock aio | x stock best | MiB/s | disk MiB/s"
          " | worker CPU us/req | p50 ms | p99 ms | errors |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    chart = []
    for (size, cache), by in cells.items():
        aio = med(by["stock-aio"], "req_per_s") if "stock-aio" in by else 0
        best = max((med(by[s], "req_per_s") for s in STOCK if s in by), default=0)
        for s in servers:
            if s not in by:
                continue
            rps = med(by[s], "req_per_s")
            x_aio = rps / aio if aio else 0
            x_best = rps / best if best else 0
            errors = sum(int(r["errors"]) for r in by[s])
            print(f"| {size} | {cache} | {s} | {rps:.0f} | {x_aio:.2f} | {x_best:.2f} |"
                  f" {med(by[s], 'MiB_per_s'):.0f} | {med(by[s], 'disk_MiB_per_s'):.0f} |"
                  f" {med(by[s], 'worker_cpu_us_per_req'):.1f} | {med(by[s], 'p50_ms'):.2f} |"
                  f" {med(by[s], 'p99_ms'):.2f} | {errors} |")
            chart.append((f"{size}/{cache}", s, x_best))

    dat = os.path.splitext(path)[0] + ".dat"
    labels = list(dict.fromkeys(c for c, _, _ in chart))
    with open(dat, "w") as f:
        f.write("cell " + " ".join(servers) + "\n")
        for c in labels:
            vals = {s: x for cc, s, x in chart if cc == c}
            f.write(c + " " + " ".join(f"{vals.get(s, 0):.3f}" for s in servers) + "\n")
    png = os.path.splitext(path)[0] + ".png"
    plot = f"""set terminal png size 1600,700
set output '{png}'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set ylabel 'requests/s relative to stock best config of the cell'
set xtics rotate by -30
set key outside right
set grid ytics
plot for [i=2:{len(servers) + 1}] '{dat}' using i:xtic(1) title columnhead(i)
"""
    subprocess.run(["gnuplot"], input=plot.encode(), check=True)


if __name__ == "__main__":
    main(sys.argv[1])
