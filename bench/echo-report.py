#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Tables, a CSV of medians, a chart of ratios and the verdict from the
runs bench/echo-bench.sh wrote (one CSV line per run).  Ratios pair the
runs of one round, where ours and the peer ran back to back.
Standard library only; the chart needs gnuplot (Debian's gnuplot-nox).

  echo-report.py --csv RUNS --summary MEDIANS [--png PATH] [--conns "..."]
                 [--rows "..."] [--title TEXT]"""
import argparse
import csv
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import verdict  # noqa: E402

# bench/README.md, "Echo server", "Against the goals": INLINE at these
# connection counts, against epoll, at no more CPU per request.
GOAL_CONNS = ("100", "1000", "5000")
GOALS = {"io_uring": 1.2, "threads": 1.0, "libaio": 0.9}
# others_cpu_pct above which a run was disturbed by someone else's work.
DISTURBED_PCT = 25
MODE_COLORS = {"inline": verdict.PALETTE[0], "async": verdict.PALETTE[1],
               "hybrid": verdict.PALETTE[2]}


def med(v):
    return statistics.median(v) if v else None


def read_runs(path):
    """(row, conns) -> {repeat: (req/s, CPU us per request, others' CPU %)},
    and what stopped the cells that did not run."""
    runs, notes, rows, conns = {}, {}, [], []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            row = r["server"] if r["server"] != "afio-echo" else r["backend"] + "/" + r["mode"]
            rows += [row] if row not in rows else []
            conns += [r["conns"]] if r["conns"] not in conns else []
            key = (row, r["conns"])
            if r["status"] == "ok" and r["req_s"]:
                runs.setdefault(key, {})[r["repeat"]] = (
                    float(r["req_s"]), float(r["cpu_us_per_req"]),
                    float(r["others_cpu_pct"] or 0))
            else:
                notes[key] = r["status"]
    return runs, notes, rows, conns


def summarize(runs, notes, rows, conns):
    summary = {}
    for row in rows:
        for n in conns:
            got = runs.get((row, n), {})
            base = runs.get(("epoll", n), {})
            req = [v[0] for v in got.values()]
            cpu = [v[1] for v in got.values()]
            rreq = verdict.pair({k: v[0] for k, v in got.items()},
                                {k: v[0] for k, v in base.items()})
            rcpu = verdict.pair({k: v[1] for k, v in got.items()},
                                {k: v[1] for k, v in base.items()})
            summary[(row, n)] = (len(req), med(req), min(req, default=None),
                                 max(req, default=None), med(cpu), min(cpu, default=None),
                                 max(cpu, default=None), med(rreq), med(rcpu),
                                 notes.get((row, n), "") if not req else "",
                                 max((v[2] for v in got.values()), default=None))
    return summary


def fmt(v, f):
    return "" if v is None else f % v


def write_summary(path, summary):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["row", "conns", "runs", "req_s", "req_s_min", "req_s_max",
                    "cpu_us_per_req", "cpu_min", "cpu_max", "req_s_vs_epoll", "cpu_vs_epoll",
                    "note"])
        for (row, n), s in summary.items():
            w.writerow([row, n, s[0], fmt(s[1], "%.0f"), fmt(s[2], "%.0f"), fmt(s[3], "%.0f"),
                        fmt(s[4], "%.2f"), fmt(s[5], "%.2f"), fmt(s[6], "%.2f"),
                        fmt(s[7], "%.2f"), fmt(s[8], "%.2f"), s[9]])


def k(v):
    return "%.1fk" % (v / 1000) if v is not None else "-"


def print_tables(summary, rows, conns):
    def table(title, cell):
        print("\n" + title + "\n")
        print("| | " + " | ".join(n + " conns" for n in conns) + " |")
        print("|---" * (len(conns) + 1) + "|")
        for row in rows:
            print("| " + row + " | " + " | ".join(cell(summary[(row, n)]) for n in conns)
                  + " |")

    table("requests/s, median (min-max)",
          lambda s: "%s (%s-%s)" % (k(s[1]), k(s[2]), k(s[3])) if s[0] else "n/a")
    table("server CPU per request, us, median (min-max)",
          lambda s: "%.2f (%.2f-%.2f)" % (s[4], s[5], s[6]) if s[0] else "n/a")
    table("against epoll, same round: requests/s ratio, CPU per request ratio (medians)",
          lambda s: "%.2fx, %s" % (s[7], fmt(s[8], "%.2fx") or "-") if s[7] is not None
          else "n/a")
    table("CPU others took during the runs, % of one CPU, the most of any run",
          lambda s: "%.0f" % s[10] if s[0] else "n/a")
    for (row, n), s in summary.items():
        if s[9]:
            print("%s at %s conns: %s" % (row, n, s[9]))


def ratios_of(runs, rows, conns):
    """Each backend's modes against epoll, pooled receives against the same
    row with a buffer per connection, io_uring's against the same pattern on
    liburing, and the servers without a library against epoll."""
    def one(group, series, row, peer, n, goal=None):
        got, base = runs.get((row, n), {}), runs.get((peer, n), {})
        return verdict.Ratio(group, series, n + " conns",
                             verdict.pair({x: v[0] for x, v in got.items()},
                                          {x: v[0] for x, v in base.items()}),
                             verdict.pair({x: v[1] for x, v in got.items()},
                                          {x: v[1] for x, v in base.items()}), goal)
    out = []
    for b in ("io_uring", "libaio", "threads"):
        for row in [r for r in rows if r.startswith(b + "/")]:
            mode = row.split("/")[1]
            for n in conns:
                goal = (verdict.Goal(GOALS[b], 1.0, "inline")
                        if mode == "inline" and n in GOAL_CONNS else None)
                out.append(one("%s / epoll" % b, mode, row, "epoll", n, goal))
    for row in [r for r in rows if "+pooled" in r]:
        own = row.replace("+pooled", "")
        if own in rows:
            out += [one("pooled / own receive buffer", row, row, own, n) for n in conns]
    if "uring-raw" in rows:
        for row in [r for r in rows if r.startswith("io_uring/")]:
            out += [one("io_uring / uring-raw (no library)", row.split("/")[1], row,
                        "uring-raw", n) for n in conns]
        for row in ("uring-raw", "uring-multishot"):
            if row in rows:
                out += [one("no library / epoll", row, row, "epoll", n)
                        for n in conns]
    return [r for r in out if r.rates]


def best_facts(summary, rows, conns):
    wins = []
    for n in conns:
        ours = [(summary[(r, n)][1], r) for r in rows if "/" in r and summary[(r, n)][1]]
        if ours:
            v, r = max(ours)
            wins.append((r, n + " conns", k(v) + " req/s"))
    return verdict.best_facts(wins, "best of ours")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--csv", required=True, help="the runs, as echo-bench.sh wrote them")
    ap.add_argument("--summary", required=True, help="where the medians go")
    ap.add_argument("--png", default="", help="chart of the ratios ('' for none)")
    ap.add_argument("--conns", help="connection counts, in this order (default: as run)")
    ap.add_argument("--rows", help="rows, in this order (default: as run)")
    ap.add_argument("--title", default="", help="what the chart's title adds")
    a = ap.parse_args()
    runs, notes, rows, conns = read_runs(a.csv)
    if not rows:
        print("no runs in %s" % a.csv)
        return 1
    rows = [r for r in a.rows.split() if r in rows] if a.rows else rows
    conns = [n for n in a.conns.split() if n in conns] if a.conns else conns
    summary = summarize(runs, notes, rows, conns)
    write_summary(a.summary, summary)
    print_tables(summary, rows, conns)
    ratios = ratios_of(runs, rows, conns)
    if a.png:
        verdict.chart(a.png, "echo: ours / peer per connection count%s\nbar: median of the "
                      "runs paired round by round, whisker: their range"
                      % (", " + a.title if a.title else ""), ratios,
                      [n + " conns" for n in conns], rate_name="requests/s",
                      cpu_name="CPU per request", colors=MODE_COLORS)
    facts = best_facts(summary, rows, conns)
    ran = [key for key, v in summary.items() if v[0]]
    busy = [key for key in ran if (summary[key][10] or 0) > DISTURBED_PCT]
    if busy:
        facts.append(("disturbed", "others took over %d%% of a CPU in %d of the %d cells "
                      "(table above): re-run before quoting them" % (DISTURBED_PCT, len(busy),
                                                                      len(ran))))
    facts.append(("goals", "INLINE at %s connections, against epoll at no more CPU per "
                  "request: %s" % (", ".join(GOAL_CONNS), ", ".join(
                      "%s %.1fx" % (b, g) for b, g in GOALS.items()))))
    print("\n".join(verdict.verdict_lines(
        ratios, facts, rate_name="req/s", cells_name="connection counts",
        goals_from='bench/README.md, "Echo server", "Against the goals"')))
    return 0


if __name__ == "__main__":
    sys.exit(main())
