"""The "Since the previous run" section of bench/RESULTS.md, written by
bench/make_results.py with --baseline DIR: every headline figure of this run
beside the previous run's, read from the JSON reports that `make bench`
keeps in bench/baseline/ (bench/baseline/README.md).

Per Granary row (its mode, scenario and callers in flight): throughput, p50
and p99; per goal with a measured ratio: that ratio. Each with the previous
value and the change in percent; a change for the worse of more than
REGRESSION_PCT is in bold. Rows and goals of one run only are listed as new
or gone. A missing, empty or unreadable baseline is said in the section,
never an error of the report.
"""

import dataclasses
import json
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import results_load  # noqa: E402  (bench/results_load.py)

# A change for the worse of more than this many percent is in bold.
REGRESSION_PCT = 20.0

# The file of a baseline directory that names the commit its run was built
# at (one line, as the Environment table of that run's RESULTS.md gives it).
COMMIT_FILE = "COMMIT"

# Rows of granary-bench that measure a reference, not Granary: they are not
# Granary's headline figures (the goals compare with them).
REFERENCE_SCENARIOS = ("raw_grpc", "postgres_floor")

# The headline figures of a row: (column, field, higher is better).
FIGURES = (("throughput", "mean_rate", True), ("p50", "p50_us", False),
           ("p99", "p99_us", False))


@dataclasses.dataclass
class Baseline:
    """The previous run's reports, or why there are none to compare with."""
    reports: list | None = None  # BenchReport dicts; None: nothing to compare with
    commit: str = "?"
    problem: str = ""            # why there are no reports, for the section
    error: bool = False          # the problem is bad input, not "none yet"


def report_problem(report):
    """Why `report` (parsed JSON) is not a BenchReport the report can read,
    or ""."""
    if not isinstance(report, dict) or not isinstance(report.get("summaries", []), list) or \
            not isinstance(report.get("env", {}), dict):
        return "not a benchmark report"
    for s in report.get("summaries", []):
        if not isinstance(s, dict) or not isinstance(s.get("scenario"), str) or \
                not isinstance(s.get("mode"), str) or not isinstance(s.get("verified"), bool):
            return "a row without scenario, mode or verified flag"
        try:
            for k in ("mean_rate", "p50_us", "p99_us", "spread_pct"):
                float(s.get(k, 0))
            for k in ("ops", "samples", "errors", "rss_delta_kb", "rounds", "concurrency"):
                int(s.get(k, 0))
        except (TypeError, ValueError):
            return "a row of %s %s with a figure that is not a number" % (
                s["mode"], s["scenario"])
    return ""


def read_baseline(directory):
    """The reports (*.json) and commit (COMMIT_FILE) of a baseline
    directory. Any unreadable report makes the whole baseline unusable: a
    partial one would show that report's rows as new."""
    if not os.path.isdir(directory):
        return Baseline(problem="the baseline directory does not exist")
    try:
        names = sorted(n for n in os.listdir(directory) if n.endswith(".json"))
    except OSError as e:
        return Baseline(problem="the baseline directory cannot be read (%s)" % e.strerror,
                        error=True)
    if not names:
        return Baseline(problem="the baseline directory holds no reports yet")
    reports = []
    for name in names:
        try:
            with open(os.path.join(directory, name), encoding="utf-8") as f:
                report = json.load(f)
        except (OSError, ValueError) as e:
            return Baseline(problem="its %s is not readable JSON (%s)" % (name, e), error=True)
        why = report_problem(report)
        if why:
            return Baseline(problem="its %s is not a readable report: %s" % (name, why),
                            error=True)
        reports.append(report)
    commit = "?"
    try:
        with open(os.path.join(directory, COMMIT_FILE), encoding="utf-8") as f:
            commit = f.readline().strip() or "?"
    except (OSError, ValueError):
        pass
    return Baseline(reports, commit)


def granary_rows(rows):
    """Granary's own rows by (mode, scenario, callers in flight), in the
    order of `rows`; the first of a key wins."""
    out = {}
    for r in rows:
        if r["arm"] == "granary" and r["scenario"] not in REFERENCE_SCENARIOS:
            out.setdefault((r["mode"], r["scenario"], max(int(r.get("concurrency", 0)), 1)), r)
    return out


def change(prev, now, higher_is_better):
    """(percent, worse): `now` against `prev`, rounded as shown, and whether
    it is a change for the worse of more than REGRESSION_PCT. Percent is None
    when `prev` is not above 0."""
    if prev is None or now is None or prev <= 0:
        return None, False
    pct = round((now - prev) / prev * 100, 1)
    return pct, (-pct if higher_is_better else pct) > REGRESSION_PCT


def figure_cell(old, new, field, higher_is_better, fmt):
    """One figure of one row: "previous → now (change)"; either side may be
    missing (new, gone) or refused (not verified: no figures published)."""
    value = lambda r: float(r.get(field, 0))
    if old is None:
        return "new: %s" % (fmt(value(new)) if new["verified"] else "**refused**")
    if new is None:
        return "gone (was %s)" % (fmt(value(old)) if old["verified"] else "refused")
    if not new["verified"]:
        return "**%s → refused**" % (fmt(value(old)) if old["verified"] else "refused")
    if not old["verified"]:
        return "refused → %s" % fmt(value(new))
    prev, now = value(old), value(new)
    if prev <= 0 and now <= 0:
        return "–"
    pct, worse = change(prev, now, higher_is_better)
    text = "%s → %s%s" % (fmt(prev), fmt(now), "" if pct is None else " (%+.1f%%)" % pct)
    return "**%s**" % text if worse else text


def noise_band(old, new):
    """The change in throughput that noise alone makes likely: twice the
    standard deviation of a difference of two round rates, each run's
    spread (its round rates' standard deviation / their mean) taken as the
    round-to-round noise of its run. None when a side has no figures or
    too few rounds to have a spread."""
    if old is None or new is None or not old["verified"] or not new["verified"]:
        return None
    if min(int(old.get("rounds", 0)), int(new.get("rounds", 0))) < 2:
        return None
    return 2 * math.hypot(float(old.get("spread_pct", 0)), float(new.get("spread_pct", 0)))


def span(values, fmt):
    values = sorted(set(values))
    if not values:
        return "?"
    return fmt(values[0]) if len(values) == 1 else "%s–%s" % (fmt(values[0]), fmt(values[-1]))


def run_size(rows):
    """How large a run was: its Granary rows' measured rounds and scale
    (granary-bench --rounds and --scale, from each report's environment)."""
    rounds, scales = [], []
    for r in rows:
        if r["arm"] != "granary":
            continue
        if int(r.get("rounds", 0)) > 0:
            rounds.append(int(r["rounds"]))
        try:
            scales.append(float(r.get("env", {})["scale"]))
        except (KeyError, TypeError, ValueError):
            pass
    text = "%s round(s)" % span(rounds, str)
    if scales:
        text += " at scale %s" % span(scales, lambda s: "%g" % s)
    return text, set(rounds)


def commit_range(prev, now):
    """`prev..now` of two commits as the Environment table gives them ("?",
    or a hash with " (with local changes)" after it)."""
    def bare(commit):
        return (commit or "?").split(" ", 1)[0]
    notes = ["%s run was built with local changes" % side
             for side, commit in (("the previous", prev), ("this", now))
             if "local changes" in (commit or "")]
    if bare(prev) == bare(now) and bare(now) != "?":
        return "`%s` (%s)" % (bare(now), "; ".join(["the same commit"] + notes))
    return "`%s..%s`" % (bare(prev), bare(now)) + (" (%s)" % "; ".join(notes) if notes else "")


def goal_ratio(g):
    if g is None or g.ratio is None:
        return "not measured"
    return "×%.2f (%s)" % (g.ratio, "met" if g.met else "missed")


def goal_rows(old_goals, new_goals):
    """The goals table: each goal with a measured ratio in either run."""
    old = {g.text: g for g in old_goals}
    new = {g.text: g for g in new_goals}
    lines = []
    for text in list(new) + [t for t in old if t not in new]:
        o, n = old.get(text), new.get(text)
        if (o is None or o.ratio is None) and (n is None or n.ratio is None):
            continue
        if o is None:
            shown = "new"
        elif n is None:
            shown = "gone"
        elif o.ratio is None or n.ratio is None:
            shown = "–"
        else:
            pct, worse = change(o.ratio, n.ratio, n.direction == "≥")
            shown = "–" if pct is None else ("**%+.1f%%**" if worse else "%+.1f%%") % pct
        lines.append("| %s | %s | %s | %s |" % (text, "–" if o is None else goal_ratio(o),
                                                "–" if n is None else goal_ratio(n), shown))
    return lines


def since_section(directory, rows, goal_list, commit, rows_and_goals, label, fmt_rate,
                  fmt_us):
    """The section's markdown lines: this run (`rows`, `goal_list`, built at
    `commit`) against the baseline in `directory`, whose reports
    `rows_and_goals` turns into rows and goals as this run's were. A
    baseline that cannot be read is said in the section and on stderr,
    never an error of the report."""
    baseline = read_baseline(directory)
    old_rows, old_goals = [], []
    if baseline.reports is not None:
        try:
            old_rows, old_goals = rows_and_goals(baseline.reports)
        except (AttributeError, KeyError, TypeError, ValueError, ZeroDivisionError) as e:
            baseline = Baseline(problem="its reports cannot be read (%s: %s)" % (
                type(e).__name__, e), error=True)
    if baseline.error:
        print("make_results: baseline %s ignored: %s" % (directory, baseline.problem),
              file=sys.stderr)
    return section(baseline, old_rows, rows, old_goals, goal_list, commit, label, fmt_rate,
                   fmt_us)


def section(baseline, old_rows, new_rows, old_goals, new_goals, commit, label, fmt_rate,
            fmt_us):
    """The section's markdown lines. `label` names a row as the scenario
    tables do; `fmt_rate` and `fmt_us` write a throughput and a latency."""
    lines = ["## Since the previous run", ""]
    if baseline.reports is None:
        lines += ["No previous run to compare with: %s. `make bench` keeps the JSON reports "
                  "of the run it publishes in bench/baseline/, and the next run is compared "
                  "with them." % baseline.problem, ""]
        return lines
    lines += [
        "Commits %s. Every headline figure of this run beside the previous `make bench` "
        "run's, whose JSON reports are kept in bench/baseline/. A change for the worse of "
        "more than %g%% is in bold: throughput lower, p50 or p99 higher, a goal's ratio "
        "moved away from its goal (lower for a ≥ goal, higher for a ≤ goal)." % (
            commit_range(baseline.commit, commit), REGRESSION_PCT), ""]
    old, new = granary_rows(old_rows), granary_rows(new_rows)
    keys = list(new) + [k for k in old if k not in new]
    scenarios = list(dict.fromkeys(k[1] for k in keys))
    fmts = {"mean_rate": fmt_rate, "p50_us": fmt_us, "p99_us": fmt_us}
    lines += ["| scenario | row | %s | noise |" % " | ".join(c for c, _, _ in FIGURES),
              "|---|---|---|---|---|---|"]
    bands = []
    for s in scenarios:
        for key in (k for k in keys if k[1] == s):
            o, n = old.get(key), new.get(key)
            band = noise_band(o, n)
            both = o is not None and n is not None and o["verified"] and n["verified"]
            if band is not None:
                bands.append(band)
            noise = "±%.1f%%" % band if band is not None else "?" if both else "–"
            if results_load.busy(o) or results_load.busy(n):
                noise += " %s machine busy" % results_load.MARK
            lines.append("| %s | %s | %s | %s |" % (
                s, label(n or o), " | ".join(
                    figure_cell(o, n, field, better, fmts[field])
                    for _, field, better in FIGURES), noise))
    lines.append("")
    goals = goal_rows(old_goals, new_goals)
    if goals:
        lines += ["| goal | previous ratio | ratio | change |", "|---|---|---|---|"] + goals
        lines.append("")
    lines += noise_notes(old_rows, new_rows, bands)
    return lines


def noise_notes(old_rows, new_rows, bands):
    """How much of a change noise alone explains, from the runs' own
    spreads, and whether the two runs were of one size."""
    now_size, now_rounds = run_size(new_rows)
    prev_size, _ = run_size(old_rows)
    text = ("Noise: this run measured %s, the previous %s. A row's noise is 2·√(a² + b²) of "
            "the spreads a and b of its throughput in the two runs (the ± beside it in each "
            "run's scenario table: the standard deviation of its round rates over their "
            "mean); a change inside it is noise." % (now_size, prev_size))
    if bands:
        text += (" Over the rows the median is ±%.1f%%: changes within ±%.1f%% are noise "
                 "(the spread is of throughput; p99, the slowest 1%% of the samples, moves "
                 "more, the more so the fewer the samples)." % (statistics.median(bands), statistics.median(bands)))
    if 1 in now_rounds:
        text += " A row of one round has no spread: its noise is not known (?)."
    if 2 in now_rounds:
        text += " A spread of two rounds is itself a rough figure."
    text += (" %s machine busy: other processes or the hypervisor took %.1f cores or more "
             "during the row's rounds in one of the runs (see Machine load): a change there "
             "is as likely the machine's as the code's." % (results_load.MARK,
                                                             results_load.BUSY_CORES))
    if now_size != prev_size:
        text += (" The two runs differ in size, so a figure can also move with the size "
                 "(warm-up, samples, grains per round): judge a change by `make bench` "
                 "against `make bench`.")
    return [text, ""]
