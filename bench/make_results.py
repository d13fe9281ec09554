#!/usr/bin/python3
"""Writes bench/RESULTS.md (and two figures) from benchmark JSON reports.

Every arm -- granary-bench --hosted, granary-bench --target, granary-bench
--failover, the PostgreSQL arms (--hosted --storage=postgres, --failover
--cluster=postgres) and the comparison arms under bench/compare/ (CAF, gRPC,
Erlang/OTP) -- writes a BenchReport (bench/report.proto) with --json=FILE.
This script pairs their rows by scenario and writes one table per scenario,
the environment, and the goals. With --plot it also draws two figures: the
latency of each scenario (p50 bars, p99 whiskers, one panel per scenario) in
the file named, and the measured ratio of each goal against its goal beside
it (results_latency.png -> results_goals.png).

A row that is not verified is refused: its figures are not published, the
table says why, and the script exits 1 (so `make bench` fails visibly).

  make_results.py --out bench/RESULTS.md --plot bench/results_latency.png \
      --env-commit $(git rev-parse --short HEAD) hosted.json remote.json caf.json grpc.json \
      erlang.json

With --baseline DIR the report opens with what changed since the previous
run, whose reports `make bench` keeps in bench/baseline/ (bench/results_since.py).
"""

import argparse
import collections
import importlib.util
import json
import os
import platform
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import results_figures  # noqa: E402  (bench/results_figures.py)
import results_load  # noqa: E402  (bench/results_load.py)
import results_since  # noqa: E402  (bench/results_since.py)
from results_format import (  # noqa: E402  (bench/results_format.py)
    MODE_LABEL, fmt_rate, fmt_us, label)
from results_goals import Goal, goal_table, goals  # noqa: E402,F401
from results_notes import (  # noqa: E402  (bench/results_notes.py)
    attack_notes, load_profiles, overload_notes, postgres_notes, profile_notes,
    remaining_notes, tls_notes)

# Which arms a Granary row is compared with, in the order the ratios are
# shown.
REFERENCE = {"hosted": ("caf", "erlang"), "remote": ("grpc",)}

# Granary rows compared with another Granary row instead, by p50:
# (mode, scenario) -> (arm key, scenario) of the reference.
P50_REFERENCE = {
    ("hosted-postgres", "durable-write"): ("granary:hosted-postgres", "postgres_floor"),
    ("cluster-postgres", "failover"): ("granary:cluster", "failover"),
    ("remote-tls", "ask"): ("granary:remote", "ask"),
    ("remote-cross", "ask"): ("granary:remote", "ask"),
    ("hosted-filters", "ask_filtered"): ("granary:hosted-filters", "ask_unfiltered"),
    ("hosted-filters", "chain_filtered"): ("granary:hosted-filters", "chain_unfiltered"),
    ("hosted-filters", "ask_unfiltered"): ("granary:hosted-filters", "ask"),
    ("hosted-filters", "chain_unfiltered"): ("granary:hosted-filters", "chain"),
    ("hosted-filters", "ask"): ("granary:hosted", "ask"),
    ("hosted-filters", "chain"): ("granary:hosted", "chain"),
}

# The same by throughput.
RATE_REFERENCE = {
    ("remote-tls", "oneway"): ("granary:remote", "oneway"),
}

# Rows shown in another scenario's table: PostgreSQL's own floor beside the
# durable write it is the floor of.
TABLE_OF = {"postgres_floor": "durable-write", "ask_unfiltered": "ask_filtered",
            "chain_unfiltered": "chain_filtered", "balance_random": "balance"}

# Footnotes: how each arm's operation differs from Granary's. Keyed by arm;
# {key} is filled in from the arm's report environment ("?" when absent).
FOOTNOTES = {
    "caf": (
        "CAF (C++ Actor Framework 0.17, Debian's libcaf-dev) runs in one process, like --hosted. "
        "Its actors are spawned explicitly and addressed by handle: no activation on first call "
        "by id, no directory or catalog lookup, no per-request deadline, no reentrancy rules. "
        "See bench/compare/caf/ for the per-scenario differences."),
    "grpc": (
        "Plain gRPC (the same Debian gRPC Granary uses) between two processes on loopback: "
        "no grain routing, no turn scheduling, no activation. It is the transport floor for "
        "remote mode: `ask` is a unary echo, `raw_grpc` a bidi-stream ping-pong, `oneway` a "
        "client stream with one message per write, `oneway_batched` 100 per write. See "
        "bench/compare/grpc/."),
    "erlang": (
        "Erlang/OTP {otp_release} (erts {erts_version}, Debian's erlang-base) runs in one BEAM "
        "process, like --hosted, on {workers} scheduler(s). Its processes are spawned explicitly "
        "and addressed by pid: no activation on first call by id, no directory or catalog "
        "lookup, no per-request deadline, no reentrancy rules. A request is a message tagged "
        "with a fresh reference and answered with one; the caller is itself an Erlang process "
        "on a BEAM scheduler, not a thread outside the runtime. See the header of "
        "bench/compare/erlang/granary_compare.escript for the per-scenario differences."),
}

SCENARIO_TEXT = {
    "activation": "first call to 100 fresh grain ids at once, then confirmed deactivation",
    "activation_one": "first call to one fresh grain id, then confirmed deactivation",
    "oneway": "one-way sends into one grain, then a count",
    "oneway_batched": "one-way sends, 100 per write (gRPC arm only)",
    "oneway_spread": "one-way sends spread over 1,000 grains, then every count",
    "ask": "awaited calls, one at a time, from outside the runtime",
    "chain": "awaited call chain through 5 grains",
    "pingpong": "two grains volleying one-way messages",
    "fanout": "one grain awaits 10 others called at once",
    "raw_grpc": "gRPC bidi-stream ping-pong (remote comparison floor)",
    "ask_filtered": ("`ask` on a silo whose call filter chain (one incoming, one outgoing "
                     "filter) passes every call"),
    "chain_filtered": "`chain` on a silo whose call filter chain passes every call",
    "ask_unfiltered": ("`ask` on a twin of the `ask_filtered` silo, built alike but without "
                       "filters: the filter goal's baseline"),
    "chain_unfiltered": ("`chain` on a twin of the `chain_filtered` silo, built alike but "
                         "without filters: the filter goal's baseline"),
    "hotspot": ("16 callers at once on one normal grain whose calls compute for 20 µs "
                "(one activation serves them in turn)"),
    "stateless": ("16 callers at once on one stateless worker grain whose calls compute for "
                  "20 µs (a pool of activations serves them)"),
    "push": ("server push: posts to one Chat room, one after another, each written to the "
             "100 subscribers of its Watch stream; a message counts when a subscriber reads it, "
             "and its latency is from the room taking the post to that read"),
    "create": "first call to a new grain that writes its state (sync)",
    "wake": "call to a deactivated grain whose state is read back from storage",
    "durable-write": "one small state write of an active grain, synced before the reply",
    "warm-read": "a call reading an active grain's in-memory state",
    "failover": ("SIGKILL of a random silo of a 3-silo cluster, per round: the time from the kill "
                 "to each of its grains' first answer from a survivor (a row is verified only when "
                 "every one of them answered again and no grain of a surviving silo was "
                 "deactivated: disturbed = 0)"),
    "balance": ("calls to 60 computing grains (1 ms each, 10 a second per grain) activated one "
                "after another over 20 s on a 3-silo PostgreSQL cluster whose silo 0 also "
                "serves a load pinned to it (0.3 cores, from 5 s before the first grain), "
                "placed RESOURCE_OPTIMIZED; figures "
                "of the calls answered while each silo's CPU was measured (10 s, 3 s after "
                "the ramp). The goal is the busiest silo's CPU over the least busy's"),
    "balance_random": ("`balance` with the grains placed RANDOM (the default), in the same "
                       "rounds: the skew left alone"),
    "scale_kill": ("a PostgreSQL cluster of many silos as processes (bench/scale.h; its size and "
                   "the other figures -- join time, a change seen by all, memory, threads and "
                   "database transactions per silo -- are in the report's env): SIGKILL of k "
                   "silos at once, the time from the kill to each of their grains' first answer "
                   "from a survivor; verified only when every grain answered again and no grain "
                   "was disturbed or duplicated, and refused, with the reason, when the cluster "
                   "never formed"),
    "overload": ("awaited Pings of a calm client, one at a time, while another client offers a "
                 "granary-silo twice the one-way load it served closed loop, open loop (see "
                 "Overload below)"),
    "memory": ("100,000 idle activations of a small grain type (one int64 field); the figure "
               "is resident memory growth per activation after a settle"),
    "postgres_floor": ("PostgreSQL's own synced single-row UPDATE (pgbench, one client, prepared, "
                       "`UPDATE granary_bench_floor SET v = v + 1 WHERE id = 1`), latencies from "
                       "pgbench's per-transaction log"),
}


class Refused(Exception):
    pass


def read_reports(paths):
    reports = []
    for path in paths:
        with open(path) as f:
            reports.append(json.load(f))
    return reports


def load(reports):
    rows = []
    for report in reports:
        for s in report.get("summaries", []):
            s = dict(s)
            s["arm"] = report.get("arm", "?")
            s["env"] = report.get("env", {})
            for k in ("ops", "samples", "errors", "rss_delta_kb"):
                s[k] = int(s.get(k, 0))
            rows.append(s)
    return rows


def index(rows):
    """(arm key, scenario) -> row; arm key is "granary:" + the row's mode
    ("granary:hosted", "granary:remote-cross", ...) or the comparison arm
    ("caf", "erlang", "grpc"). Concurrent asks are rows of their own, never
    the reference."""
    by_key = {}
    for r in rows:
        if r.get("concurrency", 0) > 1 and r["scenario"] not in ("hotspot", "stateless"):
            continue
        arm_key = "granary:" + r["mode"] if r["arm"] == "granary" else r["arm"]
        by_key[(arm_key, r["scenario"])] = r
    return by_key


def rows_and_goals(reports):
    """The rows of `reports` and the goals they measure."""
    rows = load(reports)
    return rows, goals(index(rows))


def environment(commit):
    def read(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True,
                                  check=False).stdout.strip()
        except OSError:
            return "?"
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem_gib = "?"
    try:
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
            mem_gib = "%.1f GiB" % (kb / 1024 / 1024)
    except (OSError, ValueError, IndexError):
        pass
    os_name = "?"
    try:
        with open("/etc/os-release") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    os_name = line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return [
        ("CPU", cpu),
        ("cores", str(os.cpu_count())),
        ("memory", mem_gib),
        ("OS", "%s (kernel %s)" % (os_name, platform.release())),
        ("compiler", read(["c++", "--version"]).splitlines()[0] if read(["c++", "--version"]) else "?"),
        ("commit", commit or "?"),
    ]


def sentence(text):
    """`text` with its first letter capitalized, unless its first word is a
    name spelled with capitals (gRPC, PostgreSQL, SIGKILL)."""
    first = text.split(" ", 1)[0]
    if first != first.lower():
        return text
    return text[:1].upper() + text[1:]


def ratio_text(row, by_key):
    """Granary's figure against its reference arm's, same scenario."""
    if row["arm"] != "granary" or not row["verified"]:
        return ""
    if row["scenario"] in ("raw_grpc", "postgres_floor"):
        return ""  # itself a comparison row
    if (row["mode"], row["scenario"]) in P50_REFERENCE:
        ref = by_key.get(P50_REFERENCE[(row["mode"], row["scenario"])])
        if (ref is None or not ref["verified"]) and row["scenario"].endswith("_filtered"):
            # No twin in this run (an older report): the main silo's row.
            ref = by_key.get((P50_REFERENCE[(row["mode"], row["scenario"])][0],
                              row["scenario"][:-len("_filtered")]))
        if ref is None or not ref["verified"] or ref["p50_us"] <= 0:
            return "–"
        # Another scenario of the same label (the filter run's rows) is named.
        named = (" `%s`" % ref["scenario"]
                 if ref["scenario"] not in (row["scenario"], "postgres_floor") else "")
        return "p50 ×%.2f of %s%s" % (row["p50_us"] / ref["p50_us"], label(ref), named)
    if (row["mode"], row["scenario"]) in RATE_REFERENCE:
        ref = by_key.get(RATE_REFERENCE[(row["mode"], row["scenario"])])
        if ref is None or not ref["verified"] or ref["mean_rate"] <= 0:
            return "–"
        return "rate ×%.2f of %s" % (row["mean_rate"] / ref["mean_rate"], label(ref))
    parts = []
    for arm in REFERENCE.get(row["mode"], ()):
        ref = by_key.get((arm, row["scenario"]))
        if ref is None or not ref["verified"]:
            continue
        if row["scenario"] in ("ask", "chain", "fanout", "raw_grpc"):
            if ref["p50_us"] > 0:
                parts.append("p50 ×%.2f of %s" % (row["p50_us"] / ref["p50_us"], label(ref)))
        elif ref["mean_rate"] > 0:
            parts.append("rate ×%.2f of %s" % (row["mean_rate"] / ref["mean_rate"], label(ref)))
    return "; ".join(parts) or "–"


def table(rows, by_key):
    out = ["| arm | throughput (spread) | per op | p50 | p99 | samples | ΔRSS | vs reference |",
           "|---|---|---|---|---|---|---|---|"]
    refused = []
    for row in rows:
        if not row["verified"]:
            why = "; ".join(row.get("failures", [])) or "not verified"
            out.append("| %s | **refused: not verified** (%s) | | | | | | |" % (label(row), why))
            refused.append("%s %s: %s" % (label(row), row["scenario"], why))
            continue
        per_op = 1e6 / row["mean_rate"] if row["mean_rate"] > 0 else 0
        out.append("| %s | %s (±%.1f%%)%s | %s | %s | %s | %d | %+d KiB | %s |" % (
            label(row), fmt_rate(row["mean_rate"]), row["spread_pct"],
            " " + results_load.MARK if results_load.busy(row) else "",
            fmt_us(per_op), fmt_us(row["p50_us"]), fmt_us(row["p99_us"]),
            row["samples"], row["rss_delta_kb"], ratio_text(row, by_key)))
    return out, refused


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("reports", nargs="+", help="BenchReport JSON files")
    ap.add_argument("--out", required=True, help="the markdown file to write")
    ap.add_argument("--plot", help="PNG of latency percentiles per scenario; the goals figure "
                    "goes beside it (results_latency.png -> results_goals.png). Needs matplotlib")
    ap.add_argument("--env-commit", default="", help="commit the binaries were built from")
    ap.add_argument("--command", default="make bench", help="the command that produced the run")
    ap.add_argument("--baseline", metavar="DIR", help="the previous run's JSON reports (and "
                    "its commit in DIR/COMMIT): the report opens with what changed since")
    ap.add_argument("--print-since", action="store_true", help="also print that comparison "
                    "to stdout")
    args = ap.parse_args()
    if args.print_since and not args.baseline:
        ap.error("--print-since needs --baseline")

    try:
        reports = read_reports(args.reports)
        rows = load(reports)
    except (OSError, ValueError) as e:
        print("make_results: cannot read reports: %s" % e, file=sys.stderr)
        return 2
    if not rows:
        print("make_results: the reports hold no rows", file=sys.stderr)
        return 2
    by_key = index(rows)
    goal_list = goals(by_key)

    md = ["<!-- Generated by bench/make_results.py from the JSON reports of one run. "
          "Do not edit by hand: run `%s`. -->" % args.command, "",
          "# Granary benchmark results", "",
          "Generated by `%s`: every arm built and run in the same command, on the same machine, "
          "one after another. Method: warm-up rounds, then measured rounds interleaved across "
          "scenarios; throughput is the mean of the round rates (± their standard deviation); "
          "p50/p99 are nearest-rank over every sample of every round; ΔRSS is the resident-memory "
          "growth of the process hosting the grains over a round (the silo: in-process for hosted, "
          "the granary-silo process for remote; the measuring process for the comparison arms). Every row is verified by asking what was actually done "
          "(counts, activation and deactivation counts, chain depth, replies gathered); a row that "
          "is not is refused, not published." % args.command, ""]
    # The report opens with the goals at a glance: the goal-ratio panel.
    have_plot = bool(args.plot) and importlib.util.find_spec("matplotlib") is not None
    if have_plot:
        goals_path = results_figures.goals_figure_path(args.plot)
        if results_figures.goals_figure(goal_list, goals_path):
            md.append("Each measured ratio goal: the ratio as a dot (green: met, red: not), "
                      "its goal as a black bar (the table under Goals has every goal, the "
                      "failover counts too).")
            md.append("")
            md.append("![goal ratios](%s)" % os.path.basename(goals_path))
            md.append("")
    if args.baseline:
        since = results_since.since_section(
            args.baseline, rows, goal_list, args.env_commit, rows_and_goals, label,
            fmt_rate, fmt_us)
        md.extend(since)
        if args.print_since:
            print("\n".join(since))
    md += ["## Environment", "", "| | |", "|---|---|"]
    for k, v in environment(args.env_commit):
        md.append("| %s | %s |" % (k, v))
    md.append("")
    md.extend(results_load.load_section(rows, label))
    all_refused = []
    for s, srows in results_figures.scenario_groups(rows, TABLE_OF):
        srows.sort(key=lambda r: (r["arm"] != "granary", r["mode"], r["scenario"] != s,
                                  r.get("concurrency", 0)))
        md.append("## %s" % s)
        md.append("")
        md.append("%s. One op = one %s." % (sentence(SCENARIO_TEXT.get(s, s)), srows[0].get("unit", "op")))
        for t in sorted({r["scenario"] for r in srows if r["scenario"] != s}):
            md.append("The %s row: %s." % (label(next(r for r in srows if r["scenario"] == t)),
                                           SCENARIO_TEXT.get(t, t)))
        md.append("")
        lines, refused = table(srows, by_key)
        md.extend(lines)
        md.append("")
        all_refused.extend(refused)
    md.append("## Goals")
    md.append("")
    md.extend(goal_table(goal_list))
    md.append("")
    md.append("Where a goal is not met, that is the measured state of Granary on this machine; "
              "scenarios are never changed to meet a goal.")
    md.append("")
    if args.plot:
        if importlib.util.find_spec("matplotlib") is None:
            md.append("(No figures: matplotlib is not installed.)")
            md.append("")
        else:
            if results_figures.latency_figure(rows, args.plot, label, TABLE_OF):
                md.append("Latency of every verified row, one panel per scenario: p50 as a bar, "
                          "p99 as a whisker above it; one colour per arm in every panel.")
                md.append("")
                md.append("![latency percentiles per scenario](%s)"
                          % os.path.basename(args.plot))
                md.append("")
    profiles = load_profiles(reports)
    md.extend(remaining_notes(goal_list, profiles, os.cpu_count() or 1))
    md.extend(profile_notes(profiles))
    md.extend(tls_notes(by_key))
    md.extend(overload_notes(by_key))
    md.extend(postgres_notes(rows))
    md.append("## Notes on the comparison arms")
    md.append("")
    arms = sorted({r["arm"] for r in rows if r["arm"] != "granary"})
    for i, arm in enumerate(arms, 1):
        env = next((r["env"] for r in rows if r["arm"] == arm), {})
        md.append("%d. %s" % (i, FOOTNOTES.get(arm, arm).format_map(
            collections.defaultdict(lambda: "?", env))))
    md.append("")
    if all_refused:
        md.append("## Refused rows")
        md.append("")
        for r in all_refused:
            md.append("- %s" % r)
        md.append("")
    with open(args.out, "w") as f:
        f.write("\n".join(md))
    if all_refused:
        print("make_results: refused %d unverified row(s):" % len(all_refused), file=sys.stderr)
        for r in all_refused:
            print("  " + r, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
