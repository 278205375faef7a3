#!/usr/bin/env python3
"""Medians of nginx-bench.csv per cell, as Markdown tables: requests/s with
each server's ratio to stock Linux AIO and to stock's best config of the
cell, what limited each row, and the interference rows (p99 of cached small
files while cold large ones are read); and a PNG chart of the ratios and of
those p99s (gnuplot).

What limited a row, from the run's CPU figures (medians):
  cpu     CPU 0 (the worker's) was >= 90% busy: the worker, its interrupts
          (loopback TCP) and anything else the machine ran there
  client  CPU 0 was not, CPU 1 (wrk's) was >= 90% busy
  io      neither, and the disk was read: the disk or the time a read waits
  -       none of these
A cell where any row is client-bound compares worker CPU per request
(stock's / this one's, so above 1 is better) instead of requests/s: the
requests/s there say what the client managed, not the server.  A row whose
CPU 0 took more than 10% for others' work is marked "d" (disturbed).

  nginx-bench-report.py CSV [--png PNG]     (PNG: CSV's name with .png)
"""
import csv
import os
import statistics
import subprocess
import sys

STOCK = ("stock-aio", "stock-threads", "stock-sendfile")
NUM = ("req_per_s", "MiB_per_s", "disk_MiB_per_s", "worker_cpu_us_per_req",
       "worker_busy_pct", "server_cpu_irq_pct", "server_cpu_other_pct",
       "client_cpu_busy_pct", "p50_ms", "p99_ms", "big_req_per_s", "big_p99_ms")


def limit(m):
    cpu0 = m["worker_busy_pct"] + m["server_cpu_irq_pct"] + m["server_cpu_other_pct"]
    if cpu0 >= 90:
        return "cpu"
    if m["client_cpu_busy_pct"] >= 90:
        return "client"
    if m["disk_MiB_per_s"] >= 1:
        return "io"
    return "-"


def medians(runs):
    m = {k: statistics.median(float(r[k]) for r in runs) for k in NUM}
    m["errors"] = sum(int(r["errors"]) + int(r["big_errors"]) for r in runs)
    m["log_errors"] = sum(int(r["log_errors"]) for r in runs)
    m["runs"] = len(runs)
    m["limit"] = limit(m)
    m["disturbed"] = m["server_cpu_other_pct"] > 10
    return m


def main(path, png):
    rows = list(csv.DictReader(open(path)))
    cells, servers = {}, []
    for r in rows:
        cells.setdefault((r["size"], r["cache"]), {}).setdefault(r["server"], []).append(r)
        if r["server"] not in servers:
            servers.append(r["server"])

    print("Ratios: requests/s over stock `aio on` + directio (x aio) and over"
          " the best of the three stock configs of the cell (x best); in a"
          " client-bound cell (basis `cpu/req`) the ratios are of worker CPU"
          " per request, stock's over this one's. limit: what bounded the row"
          " (cpu: the worker's CPU; client: wrk's CPU; io: the disk or read"
          " latency); d: others' work took >10% of the worker's CPU.\n")
    print("| size | cache | server | req/s | x aio | x best | basis | limit | MiB/s | disk MiB/s"
          " | worker CPU us/req | worker busy % | client CPU % | p50 ms | p99 ms | errors |")
    print("|---|---|---|---:|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    chart, summary, interference = [], [], {}
    for (size, cache), by in cells.items():
        med = {s: medians(by[s]) for s in servers if s in by}
        if cache == "interference":
            interference = med
            continue
        client_bound = any(m["limit"] == "client" for m in med.values())
        if client_bound:
            # lower CPU per request is better: figure = requests per CPU second
            fig = {s: 1e6 / m["worker_cpu_us_per_req"] if m["worker_cpu_us_per_req"] else 0
                   for s, m in med.items()}
        else:
            fig = {s: m["req_per_s"] for s, m in med.items()}
        aio = fig.get("stock-aio", 0)
        best_s = max((s for s in STOCK if s in fig), key=lambda s: fig[s], default=None)
        best = fig[best_s] if best_s else 0
        for s, m in med.items():
            x_aio = fig[s] / aio if aio else 0
            x_best = fig[s] / best if best else 0
            mark = m["limit"] + (" d" if m["disturbed"] else "")
            errs = f"{m['errors']}" + (f" (log {m['log_errors']})" if m["log_errors"] else "")
            print(f"| {size} | {cache} | {s} | {m['req_per_s']:.0f} | {x_aio:.2f} | {x_best:.2f} |"
                  f" {'cpu/req' if client_bound else 'req/s'} | {mark} |"
                  f" {m['MiB_per_s']:.0f} | {m['disk_MiB_per_s']:.0f} |"
                  f" {m['worker_cpu_us_per_req']:.1f} | {m['worker_busy_pct']:.0f} |"
                  f" {m['client_cpu_busy_pct']:.0f} | {m['p50_ms']:.2f} | {m['p99_ms']:.2f} | {errs} |")
            chart.append((f"{size}/{cache}", s, x_best))
        patched = {s: fig[s] for s in fig if s not in STOCK}
        top = max(patched, key=patched.get) if patched else None
        summary.append((size, cache, "cpu/req" if client_bound else "req/s", best_s,
                        fig.get("io_uring-inline", 0) / aio if aio else 0,
                        fig.get("io_uring-inline", 0) / best if best else 0,
                        top, patched[top] / best if top and best else 0,
                        max((fig[s] for s in fig if s.startswith("io_uring")), default=0) / aio if aio else 0,
                        max((fig[s] for s in fig if s.startswith("io_uring")), default=0) / best if best else 0))

    print("\n### Per cell\n")
    print("| size | cache | basis | stock best | io_uring-inline x aio | io_uring-inline x best"
          " | best io_uring x aio | best io_uring x best | best patched | its x best |")
    print("|---|---|---|---|---:|---:|---:|---:|---|---:|")
    for size, cache, basis, best_s, ia, ib, top, tb, ua, ub in summary:
        print(f"| {size} | {cache} | {basis} | {best_s} | {ia:.2f} | {ib:.2f} | {ua:.2f} | {ub:.2f} | {top} | {tb:.2f} |")

    if interference:
        th = interference.get("stock-threads", {}).get("p99_ms", 0)
        sf = interference.get("stock-sendfile", {}).get("p99_ms", 0)
        print("\n### Interference: cached 4 KiB files on 50 connections while 150 read cold 1 MiB files\n")
        print("The figure is the small files' p99; `/ threads` and `/ sendfile` are that p99 over"
              " stock `aio threads`'s and stock sendfile's (below 1 is better).\n")
        print("| server | 4 KiB req/s | 4 KiB p50 ms | 4 KiB p99 ms | / threads | / sendfile"
              " | 1 MiB req/s | 1 MiB p99 ms | disk MiB/s | worker busy % | client CPU % | errors |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for s, m in interference.items():
            mark = " d" if m["disturbed"] else ""
            print(f"| {s}{mark} | {m['req_per_s']:.0f} | {m['p50_ms']:.2f} | {m['p99_ms']:.1f} |"
                  f" {m['p99_ms'] / th if th else 0:.2f} | {m['p99_ms'] / sf if sf else 0:.2f} |"
                  f" {m['big_req_per_s']:.0f} | {m['big_p99_ms']:.0f} | {m['disk_MiB_per_s']:.0f} |"
                  f" {m['worker_busy_pct']:.0f} | {m['client_cpu_busy_pct']:.0f} | {m['errors']} |")

    base = os.path.splitext(png)[0]
    dat, idat = base + ".dat", base + "-interference.dat"
    labels = list(dict.fromkeys(c for c, _, _ in chart))
    with open(dat, "w") as f:
        f.write("cell " + " ".join(servers) + "\n")
        for c in labels:
            vals = {s: x for cc, s, x in chart if cc == c}
            f.write(c + " " + " ".join(f"{vals.get(s, 0):.3f}" for s in servers) + "\n")
    panels = bool(labels) + bool(interference)
    if not panels:
        return
    plot = f"""set terminal png noenhanced size 1800,{650 * panels + 100}
set output '{png}'
set multiplot layout {panels},1
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set xtics rotate by -30
set grid ytics
"""
    if labels:
        plot += f"""set title "nginx: each server against stock nginx's best config of the cell (client-bound cells: worker CPU per request)"
set ylabel 'x stock best (higher is better)'
set key outside right
plot for [i=2:{len(servers) + 1}] '{dat}' using i:xtic(1) title columnhead(i)
"""
    if interference:
        with open(idat, "w") as f:
            for s, m in interference.items():
                f.write(f"{s} {m['p99_ms']:.2f}\n")
        plot += f"""set title 'cached 4 KiB files while cold 1 MiB files are read on the same worker: p99 of the 4 KiB requests'
set ylabel 'p99 ms (log scale, lower is better)'
set logscale y
set style histogram clustered gap 1
unset key
plot '{idat}' using 2:xtic(1) linecolor rgb '#4477aa'
"""
    plot += "unset multiplot\n"
    subprocess.run(["gnuplot"], input=plot.encode(), check=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    png = None
    if "--png" in args:
        i = args.index("--png")
        png = args[i + 1]
        del args[i:i + 2]
    main(args[0], png or os.path.splitext(args[0])[0] + ".png")
