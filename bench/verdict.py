# SPDX-License-Identifier: MIT
"""What every benchmark here ends with: a verdict of a few lines, and a
chart of ratios (ours over a peer, per cell, with the spread of the runs).

A benchmark describes each comparison in each cell as a Ratio, from runs
of ours and of the peer paired round by round (the two ran back to back),
and hands the list to verdict_lines(), verdict_json() and chart().
compare.py (afio-bench --compare), echo-report.py (bench/echo-bench.sh)
and http-report.py (bench/http-bench.sh) do.  Standard library only; the
chart needs gnuplot (Debian's gnuplot-nox)."""

import os
import shutil
import statistics
import subprocess
import sys
import tempfile

# Told apart by people who do not see red and green apart (Okabe and Ito's
# palette, yellow left out: it vanishes on white).
# Between clusters, in bar widths.
GAP = 1.5
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000"]


class Goal:
    """At least rate_min times the peer's rate, at most cpu_max times its
    CPU per operation; either may be None.  who: what it is for, when not
    every series of its group (e.g. "inline")."""

    def __init__(self, rate_min=None, cpu_max=None, who=None):
        self.rate_min = rate_min
        self.cpu_max = cpu_max
        self.who = who

    def __str__(self):
        parts = []
        if self.rate_min is not None:
            parts.append(">= %.2fx" % self.rate_min)
        if self.cpu_max is not None:
            parts.append("CPU <= %.2fx" % self.cpu_max)
        return ("%s: " % self.who if self.who else "") + ", ".join(parts)

    def _key(self):
        return (self.rate_min, self.cpu_max, self.who)

    def __eq__(self, other):
        return isinstance(other, Goal) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())


def _clean(values):
    return [v for v in values if v is not None and v > 0]


class Ratio:
    """One comparison in one cell.  rates and cpus: ours over the peer, one
    per round in which both ran (rate: IOPS or requests/s; cpu: CPU per
    operation)."""

    def __init__(self, group, series, cell, rates, cpus, goal=None):
        self.group = group
        self.series = series
        self.cell = cell
        self.rates = _clean(rates)
        self.cpus = _clean(cpus)
        self.goal = goal

    @staticmethod
    def _med(vs):
        return statistics.median(vs) if vs else None

    @property
    def rate(self):
        return self._med(self.rates)

    @property
    def cpu(self):
        return self._med(self.cpus)

    def met(self):
        """True or False against the goal, on the medians; None without a
        goal or a figure."""
        g = self.goal
        if g is None or self.rate is None or (g.cpu_max is not None and self.cpu is None):
            return None
        return not self.shortfall()

    def shortfall(self):
        """What misses the goal: the rate, the CPU or both."""
        # Judged as printed, to two places: 1.004 shows as 1.00 and meets 1.00.
        g, out = self.goal, []
        if g.rate_min is not None and round(self.rate, 2) < g.rate_min:
            out.append("%.2fx" % self.rate)
        if g.cpu_max is not None and self.cpu is not None and round(self.cpu, 2) > g.cpu_max:
            out.append("CPU %.2fx" % self.cpu)
        return ", ".join(out)


def pair(ours, peer):
    """Ratios of the rounds present in both: ours and peer map a round to
    a figure (None or absent where that run failed)."""
    return [ours[k] / peer[k] for k in ours
            if k in peer and ours[k] is not None and peer[k]]


def span(vs):
    if not vs:
        return "-"
    lo, hi = min(vs), max(vs)
    return "%.2f" % lo if "%.2f" % lo == "%.2f" % hi else "%.2f-%.2f" % (lo, hi)


def _groups(ratios):
    out = {}
    for r in ratios:
        out.setdefault(r.group, {}).setdefault(r.series, []).append(r)
    return out


def _series_line(name, rs, rate_name):
    """met / NOT MET / met N/M, the series, the range of its medians over
    the cells and of its single runs, and the cells that miss the goal."""
    rates = [r.rate for r in rs if r.rate is not None]
    cpus = [r.cpu for r in rs if r.cpu is not None]
    runs = [v for r in rs for v in r.rates]
    judged = [r for r in rs if r.met() is not None]
    bad = [r for r in judged if not r.met()]
    if not judged:
        status = "no goal"
    elif not bad:
        status = "met"
    elif len(bad) == len(judged):
        status = "NOT MET"
    else:
        status = "met %d/%d" % (len(judged) - len(bad), len(judged))
    line = "  %-8s %-32s %s %sx" % (status, name, rate_name, span(rates))
    if len(runs) > len(rates):
        line += " (runs %s)" % span(runs)
    line += ", CPU %s" % (span(cpus) + "x" if cpus else "-")
    if bad and len(bad) < len(judged):
        line += "; misses %s" % ", ".join(
            "%s (%s)" % (r.cell.replace("\n", " "), r.shortfall()) for r in bad[:2])
        if len(bad) > 2:
            line += " +%d more" % (len(bad) - 2)
    return line


def verdict_lines(ratios, facts=(), rate_name="IOPS", goals_from="bench/README.md",
                  cells_name="cells"):
    """The verdict: the facts first (label, text; an empty label goes on
    with the line above), then a line per series of each group."""
    out = ["", "== Verdict " + "=" * 67]
    for label, text in facts:
        out.append("%-13s %s" % (label + ":" if label else "", text))
    out.append("ours / peer: median of the runs paired round by round; range over the %s, "
               "'runs': of single runs;" % cells_name)
    out.append("CPU: CPU per operation, lower is better; goals: %s" % goals_from)
    met = judged = 0
    for group, series in _groups(ratios).items():
        goals = {r.goal for rs in series.values() for r in rs if r.goal is not None}
        out.append(group + ("" if not goals else "  (goal %s)" % " or ".join(
            sorted(str(g) for g in goals))))
        for name, rs in series.items():
            out.append(_series_line(name, rs, rate_name))
            verdicts = [r.met() for r in rs if r.met() is not None]
            judged += len(verdicts)
            met += sum(verdicts)
    if judged:
        out.append("Goals met in %d of the %d cells held to one." % (met, judged))
    return out


def best_facts(items, label="best"):
    """(config, cell, figure) of the winner of each cell, as verdict facts
    gathered by winner: "io_uring/inline in 4k (73k), 1m (1.9k)"."""
    by = {}
    for config, cell, figure in items:
        by.setdefault(config, []).append("%s (%s)" % (cell.replace("\n", " "), figure))
    return [(label if i == 0 else "", "%s in %s" % (c, ", ".join(cs)))
            for i, (c, cs) in enumerate(by.items())]


def verdict_json(ratios, facts=()):
    merged, last = {}, None
    for label, text in facts:
        last = label or last
        merged[last] = merged[last] + "; " + text if last in merged else text
    return {
        "facts": merged,
        "ratios": [{
            "group": r.group, "series": r.series, "cell": r.cell.replace("\n", " "),
            "rate": r.rate, "rate_runs": r.rates, "cpu": r.cpu, "cpu_runs": r.cpus,
            "goal_rate_min": r.goal.rate_min if r.goal else None,
            "goal_cpu_max": r.goal.cpu_max if r.goal else None,
            "met": r.met()} for r in ratios],
    }


def _quote(s):
    return '"%s"' % s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


# Ratios above this are drawn to it, with their value written on top: a
# linear axis that reached a 100x outlier would flatten every bar near 1.
TOP = 4.0


def _step(top):
    """A tick step that gives at most about eight ticks."""
    for step in (0.1, 0.2, 0.5, 1.0):
        if top / step <= 8:
            return step
    return 1.0


def _panel(dat, cells, series, colors, title, goal, who, column, lower_better):
    """One histogram: a cluster per cell, a bar per series with the runs'
    range as its error bar, the 1.0 line, and the goal's in the key."""
    his = [v for rs in series.values() for r in rs
           for v in (r.rates if column == 0 else r.cpus)]
    top = min(TOP, max([1.3] + [1.1 * v for v in his] + ([1.1 * goal] if goal else [])))
    lines = [
        # The title heads the key, which sits above the plot.
        "set key title %s" % _quote(title),
        "set yrange [0:%.3f]" % top,
        "set ytics %g" % _step(top),
        "set xrange [-0.6:%.1f]" % (len(cells) - 0.4),
        "set xtics (%s)" % ", ".join("%s %d" % (_quote(c), i) for i, c in enumerate(cells)),
        "unset arrow",
        "set arrow from graph 0, first 1 to graph 1, first 1 nohead lw 2 lc rgb 'black' front",
    ]
    by = {(r.series, r.cell): r for rs in series.values() for r in rs}
    for j, name in enumerate(series):
        for i, cell in enumerate(cells):
            r = by.get((name, cell))
            v = r and (r.rate if column == 0 else r.cpu)
            if v and v > top:
                # Where gnuplot puts bar j of a cluster of len(series).
                x = i + (j - (len(series) - 1) / 2.0) / (len(series) + GAP)
                lines.append("set label %s at first %.3f, first %.3f center front "
                             "font ',10'" % (_quote("%.3gx" % v), x, top * 0.96))
    plots = []
    for i, name in enumerate(series):
        c = 2 + 3 * (2 * i + column)
        plots.append("%s using %d:%d:%d title %s lc rgb '%s'" % (
            _quote(dat) if not plots else "''", c, c + 1, c + 2, _quote(name), colors[name]))
    if goal is not None:
        lines.append("set arrow from graph 0, first %g to graph 1, first %g nohead lw 2.5 "
                     "dt (8, 6) lc rgb '#D55E00' front" % (goal, goal))
        # Only for the key: the line itself is the arrow above.
        plots.append("NaN with lines lw 2.5 dt (8, 6) lc rgb '#D55E00' title %s"
                     % _quote("goal%s %s %.2fx" % (" (%s)" % who if who else "",
                                                   "<=" if lower_better else ">=", goal)))
    lines.append("plot " + ", ".join(plots))
    return lines


def chart(png, title, ratios, cells, rate_name="IOPS", cpu_name="CPU per I/O",
          colors=None, say=print):
    """Writes png: a row per group, its rate ratio on the left and its CPU
    ratio on the right, linear axes; cells in the given order.  Returns
    True when the chart was drawn."""
    if not shutil.which("gnuplot"):
        say("no chart: gnuplot not installed (apt-get install gnuplot-nox)")
        return False
    groups = {g: s for g, s in _groups(ratios).items()
              if any(r.rate is not None for rs in s.values() for r in rs)}
    if not groups:
        say("no chart: no ratio to draw")
        return False
    tmp = tempfile.mkdtemp(prefix="afio-chart.")
    # Small enough that a README or an issue shows it at about its size.
    bars = len(cells) * max(len(s) for s in groups.values())
    width = max(1100, min(1400, 300 + 45 * bars))
    height = 70 + 360 * len(groups)
    head = 60.0 / height
    script = [
        "set terminal pngcairo size %d,%d font 'DejaVu Sans,11' noenhanced" % (
            width, 60 + 340 * len(groups)),
        "set output %s" % _quote(png),
        "set style data histogram",
        "set style histogram errorbars gap %g lw 1.5" % GAP,
        "set style fill solid 0.9 border rgb 'black'",
        "set boxwidth 0.9",
        "set grid ytics lc rgb '#bbbbbb'",
        # Two columns: gnuplot's own guess of the width gives one.
        "set key outside top center horizontal maxcols 2 samplen 1.5 width -6 Left reverse",
        # Room for the cells' two-line labels.
        "set bmargin 4",
        "set format y '%.1fx'",
        # Placed by hand: a multiplot title would push the last row off.
        "set multiplot",
        "set label 99 %s at screen 0.5, screen %.4f center font ',13'" % (
            _quote(title), 1 - 0.5 * head),
    ]
    for gi, (group, series) in enumerate(groups.items()):
        y = (1 - head) * (1 - (gi + 1) / len(groups))
        script.append("set size 0.5, %.4f" % ((1 - head) / len(groups)))
        series = {n: rs for n, rs in series.items() if any(r.rate for r in rs)}
        col = dict(colors or {})
        for i, name in enumerate(series):
            col.setdefault(name, PALETTE[i % len(PALETTE)])
        by = {(r.series, r.cell): r for rs in series.values() for r in rs}
        dat = os.path.join(tmp, "g%d.dat" % gi)
        with open(dat, "w") as f:
            for i, cell in enumerate(cells):
                vals = [str(i)]
                for name in series:
                    r = by.get((name, cell))
                    for runs in (r.rates, r.cpus) if r else ((), ()):
                        vals += (["%.4f" % statistics.median(runs), "%.4f" % min(runs),
                                  "%.4f" % max(runs)] if runs else ["NaN"] * 3)
                f.write(" ".join(vals) + "\n")
        goals = {r.goal for rs in series.values() for r in rs if r.goal is not None}
        goal = next(iter(goals)) if len(goals) == 1 else None
        script.append("set origin 0, %.4f" % y)
        script += _panel(dat, cells, series, col, "%s: %s (higher is better)"
                         % (group, rate_name), goal and goal.rate_min, goal and goal.who,
                         0, False)
        # The chart's title goes with the first plot, the values above the
        # axis with each.
        script.append("unset label")
        script.append("set origin 0.5, %.4f" % y)
        has_cpu = any(r.cpu for rs in series.values() for r in rs)
        if has_cpu:
            script += _panel(dat, cells, series, col, "%s: %s (lower is better)"
                             % (group, cpu_name), goal and goal.cpu_max, goal and goal.who,
                             1, True)
            script.append("unset label")
    script += ["unset multiplot", ""]
    p = subprocess.run(["gnuplot"], input="\n".join(script), universal_newlines=True,
                       stderr=subprocess.PIPE)
    shutil.rmtree(tmp, ignore_errors=True)
    if p.returncode != 0:
        sys.stderr.write("gnuplot failed: %s\n" % p.stderr)
        return False
    say("wrote %s" % png)
    return True
