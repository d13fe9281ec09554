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
import dataclasses
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import results_figures  # noqa: E402  (bench/results_figures.py)
import results_load  # noqa: E402  (bench/results_load.py)
import results_since  # noqa: E402  (bench/results_since.py)
from results_format import fmt_rate, fmt_us  # noqa: E402  (bench/results_format.py)
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
            "chain_unfiltered": "chain_filtered"}

# How a Granary mode reads in a table.
MODE_LABEL = {
    "hosted-postgres": "hosted, PostgreSQL storage",
    "cluster": "dev cluster",
    "cluster-postgres": "PostgreSQL cluster",
    "remote-tls": "remote, TLS",
    "remote-cross": "remote, cross-silo",
    "hosted-filters": "hosted, call filter run",
    "overload": "calm caller, silo overloaded",
}

# The goal: a durable write to PostgreSQL costs at most this many times
# PostgreSQL's own synced single-row UPDATE (p50).
POSTGRES_FLOOR_GOAL = 1.5

# The goal: an idle activation costs its silo at most this many bytes of
# resident memory beyond the grain's own fields (an Akka actor is about 400
# bytes, an Erlang process about 2.7 KB).
MEMORY_GOAL_BYTES = 256
# The grain's own fields when the report does not say (TinyGrain: one int64).
MEMORY_GRAIN_BYTES = 8

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


def label(row):
    if row["arm"] == "granary" and row["scenario"] == "raw_grpc":
        return "gRPC bidi ping-pong (granary-bench's own arm)"
    if row["arm"] == "granary" and row["scenario"] == "postgres_floor":
        return "PostgreSQL floor (pgbench)"
    if row["arm"] == "granary" and row["scenario"].endswith("_unfiltered"):
        return "Granary (%s, twin silo without filters)" % MODE_LABEL.get(row["mode"],
                                                                         row["mode"])
    if row["arm"] == "granary":
        return "Granary (%s%s)" % (MODE_LABEL.get(row["mode"], row["mode"]),
                                   ", K=%d" % row["concurrency"]
                                   if row.get("concurrency", 0) > 1 else "")
    return {"caf": "CAF", "grpc": "gRPC", "erlang": "Erlang/OTP"}.get(row["arm"], row["arm"])


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


@dataclasses.dataclass
class Goal:
    """One goal of the run, computed once: the goals table and the goals
    figure are both drawn from it. `ratio` and `target` are None for a goal
    that is not a ratio (failover: a count) or was not measured."""
    text: str                 # the goal, as the table states it
    short: str                # the same, short enough for the figure's tick label
    shown: str = "not measured in this run"  # the table's "measured" cell
    met: bool | None = None   # None: not measured
    ratio: float | None = None   # the measured ratio
    target: float | None = None  # the ratio the goal asks for
    direction: str = ""       # "≥" (higher is better) or "≤"
    note: str = ""            # the figure's measured figure, when not "×ratio (goal ...)"
    figure: str = ""          # "rate", "p50", "p99": what compare() compared
    value: float | None = None      # Granary's figure
    ref_value: float | None = None  # the best reference's figure
    ref_label: str = ""
    # The --profile rounds that show where this goal's time goes: Granary's
    # (mode, scenario) first, then a profiled reference's, if any.
    profile: tuple = ()


# A row's figure a goal compares, by name: (value, formatter).
FIGURES = {
    "rate": (lambda r: r["mean_rate"], fmt_rate),
    "p50": (lambda r: r["p50_us"], fmt_us),
    "p99": (lambda r: r["p99_us"], fmt_us),
}


def paired_ratio(a, b):
    """a's p50 over b's. For scenarios of one run whose rounds ran
    interleaved, the median of the per-round p50 ratios (each pair of rounds
    ran side by side), else the ratio of pooled p50s. Second: whether the
    rounds were paired."""
    ra, rb = a.get("round_p50_us") or [], b.get("round_p50_us") or []
    if (a.get("mode") == b.get("mode") and ra and len(ra) == len(rb)
            and all(x > 0 for x in ra + rb)):
        return statistics.median(x / y for x, y in zip(ra, rb)), True
    return (a["p50_us"] / b["p50_us"] if b["p50_us"] else 0), False


def compare(text, short, a, refs, figure, direction, target, paired=False, name_ref=False,
            note=""):
    """The goal that row `a`'s `figure` stands in `direction` to `target`
    times that of the best row of `refs` (the highest rate, the lowest
    latency). `paired`: the ratio is paired_ratio()'s. `name_ref`: the
    measured cell names the reference arm, and the others beside it.
    `note`: said last in the measured cell's parentheses."""
    refs = [r for r in refs if r is not None]
    if a is None or not refs:
        return Goal(text, short)
    value, fmt = FIGURES[figure]
    best = (max if figure == "rate" else min)(refs, key=value)
    if value(best) <= 0:
        return Goal(text, short, shown="the reference's %s is 0" % figure)
    if paired:
        ratio, was_paired = paired_ratio(a, best)
    else:
        ratio, was_paired = value(a) / value(best), False
    notes = ["×%.2f%s" % (ratio, ", median of per-round ratios" if was_paired else "")]
    notes.extend("%s %s" % (label(r), fmt(value(r))) for r in refs if r is not best)
    if note:
        notes.append(note)
    shown = "%s vs %s%s (%s)" % (fmt(value(a)), label(best) + " " if name_ref else "",
                                 fmt(value(best)), "; ".join(notes))
    met = ratio >= target if direction == "≥" else ratio <= target
    return Goal(text, short, shown, met, ratio, target, direction, figure=figure,
                value=value(a), ref_value=value(best), ref_label=label(best))


def profiled(goal, *keys):
    """`goal`, with the (mode, scenario) --profile rounds that explain it."""
    goal.profile = keys
    return goal


def memory_goal(mode, row):
    """Resident memory per idle activation against the grain's own fields
    plus MEMORY_GOAL_BYTES."""
    text = ("%s: bytes per idle activation ≤ %d beyond the grain's own fields"
            % (mode, MEMORY_GOAL_BYTES))
    short = "%s memory per idle activation ≤ %d B + fields" % (mode, MEMORY_GOAL_BYTES)
    if row is None or row["ops"] <= 0:
        return Goal(text, short)
    try:
        grain = int(row["env"].get("memory_grain_bytes", MEMORY_GRAIN_BYTES))
    except ValueError:
        grain = MEMORY_GRAIN_BYTES
    per = row["rss_delta_kb"] * 1024 / row["ops"]
    budget = MEMORY_GOAL_BYTES + grain
    return Goal(text, short, "%.0f B per activation (grain fields %d B; ×%.2f of %d B)" % (
        per, grain, per / budget, budget), per <= budget, per / budget, 1.0, "≤",
        "%.0f B (goal ≤ %d B)" % (per, budget))


def remote_activation_goal(activation, activation_one, ask):
    """The first call to a fresh grain through the gateway against an
    awaited call to a live one, by p50. The `activation` scenario makes 100
    first calls at once, so its p50 holds their queueing too; the call to
    one fresh grain alone (`activation_one`) is named beside it."""
    note = ""
    if activation_one is not None and ask is not None and ask["p50_us"] > 0:
        note = "one fresh grain alone: %s, ×%.2f" % (
            fmt_us(activation_one["p50_us"]), activation_one["p50_us"] / ask["p50_us"])
    return profiled(compare(
        "remote activation (100 first calls at once) p50 ≤ 2× remote ask p50",
        "remote activation p50 ≤ 2× remote ask", activation, [ask], "p50", "≤", 2.0,
        note=note), ("remote", "activation"), ("remote", "ask"))


def goals(by_key):
    """Every goal of the run, in the order of the table."""
    def get(arm, scenario):
        r = by_key.get((arm, scenario))
        return r if r is not None and r["verified"] else None

    def hosted(scenario):
        return get("granary:hosted", scenario)

    def better(scenario):  # the comparison arms in-process, like --hosted
        return [get("caf", scenario), get("erlang", scenario)]

    def vs_best(text, short, scenario, figure, target):
        """Hosted `scenario` against the better of the in-process arms."""
        return profiled(compare(text, short, hosted(scenario), better(scenario), figure,
                                "≥" if figure == "rate" else "≤", target, name_ref=True),
                        ("hosted", scenario))

    raw_grpc = get("granary:remote", "raw_grpc") or get("grpc", "raw_grpc")
    out = [
        vs_best("hosted activation ≥ 1.0× the better of CAF spawn and Erlang spawn",
                "hosted activation ≥ 1× best of CAF/Erlang", "activation", "rate", 1.0),
        vs_best("hosted one-way ≥ 2× the better of CAF tell and Erlang send",
                "hosted one-way ≥ 2× best of CAF/Erlang", "oneway", "rate", 2.0),
        vs_best("hosted ping-pong ≥ 2× the better of CAF and Erlang",
                "hosted ping-pong ≥ 2× best of CAF/Erlang", "pingpong", "rate", 2.0),
        vs_best("hosted chain (depth 5) p50 ≤ 0.5× the better of CAF and Erlang",
                "hosted chain p50 ≤ 0.5× best of CAF/Erlang", "chain", "p50", 0.5),
        profiled(compare("hosted ask p50 ≤ CAF's", "hosted ask p50 ≤ CAF", hosted("ask"),
                         [get("caf", "ask")], "p50", "≤", 1.0), ("hosted", "ask")),
    ]
    # The filter goals ask for a 5% resolution: make bench measures them in
    # a run of their own with more rounds (hosted-filters), when present.
    # The baseline is the unfiltered twin of the filtered silo where the run
    # has it (built alike but for the filters), else the main silo.
    filters_mode = ("hosted-filters" if get("granary:hosted-filters", "ask") is not None
                    else "hosted")
    for s in ("ask", "chain"):
        arm = "granary:" + filters_mode
        twin, main = get(arm, s + "_unfiltered"), get(arm, s)
        base = s + "_unfiltered" if twin is not None else s
        note = ""
        if twin is not None and main is not None:
            note = ("baseline: a twin silo without filters. A/A check: that twin is ×%.2f of "
                    "the main silo, also without filters" % paired_ratio(twin, main)[0])
        out.append(profiled(compare(
            "hosted %s p50 with an empty call filter chain ≤ 1.05× without" % s,
            "hosted %s p50, filters ≤ 1.05× none" % s,
            get(arm, s + "_filtered"), [get(arm, base)],
            "p50", "≤", 1.05, paired=True, note=note),
            (filters_mode, s + "_filtered"), (filters_mode, base)))
    out += [
        profiled(compare("hosted stateless worker hot spot ≥ 1.5× a normal grain's rate "
                         "(16 callers, one key)", "stateless hot spot ≥ 1.5× normal grain",
                         hosted("stateless"), [hosted("hotspot")], "rate", "≥", 1.5),
                 ("hosted", "stateless"), ("hosted", "hotspot")),
        profiled(compare("remote ask p50 ≤ 1.3× plain gRPC bidi ping-pong p50",
                         "remote ask p50 ≤ 1.3× gRPC bidi", get("granary:remote", "ask"),
                         [raw_grpc], "p50", "≤", 1.3, paired=True),
                 ("remote", "ask"), ("remote", "raw_grpc")),
        profiled(compare("remote ask p99 ≤ 1.5× plain gRPC bidi ping-pong p99",
                         "remote ask p99 ≤ 1.5× gRPC bidi", get("granary:remote", "ask"),
                         [raw_grpc], "p99", "≤", 1.5),
                 ("remote", "ask"), ("remote", "raw_grpc")),
        profiled(compare("remote one-way ≥ 10× gRPC one-message-per-write",
                         "remote one-way ≥ 10× gRPC one per write",
                         get("granary:remote", "oneway"), [get("grpc", "oneway")], "rate", "≥",
                         10.0), ("remote", "oneway")),
        # Another run than raw_grpc's: pooled p50s.
        profiled(compare("cross-silo ask (`--one_hop=false`) p50 ≤ 2× plain gRPC bidi "
                         "ping-pong p50", "cross-silo ask p50 ≤ 2× gRPC bidi",
                         get("granary:remote-cross", "ask"), [raw_grpc], "p50", "≤", 2.0),
                 ("remote-cross", "ask"), ("remote", "raw_grpc")),
        remote_activation_goal(get("granary:remote", "activation"),
                               get("granary:remote", "activation_one"),
                               get("granary:remote", "ask")),
        memory_goal("hosted", hosted("memory")),
        memory_goal("remote", get("granary:remote", "memory")),
        profiled(compare("durable-write on PostgreSQL p50 ≤ %g× PostgreSQL's synced UPDATE "
                         "(pgbench) p50" % POSTGRES_FLOOR_GOAL,
                         "PostgreSQL write p50 ≤ %g× pgbench" % POSTGRES_FLOOR_GOAL,
                         get("granary:hosted-postgres", "durable-write"),
                         [get("granary:hosted-postgres", "postgres_floor")], "p50", "≤",
                         POSTGRES_FLOOR_GOAL), ("hosted-postgres", "durable-write")),
    ]
    # Failover: disturbed grains, goal 0. An unverified row is a miss (its
    # failure says what happened), not a row that was not measured.
    for mode in ("cluster", "cluster-postgres"):
        text = "failover (%s): 0 grains of surviving silos disturbed" % MODE_LABEL[mode]
        r = by_key.get(("granary:" + mode, "failover"))
        if r is None:
            out.append(Goal(text, text))
        elif r["verified"]:
            out.append(Goal(text, text, "0 in %d round(s); kill → first answer p50 %s, p99 %s" % (
                int(r.get("rounds", 0)), fmt_us(r["p50_us"]), fmt_us(r["p99_us"])), True))
        else:
            out.append(Goal(text, text, "; ".join(r.get("failures", [])) or "not verified",
                            False))
    return out


def goal_table(goal_list):
    lines = ["| goal | measured | met |", "|---|---|---|"]
    for g in goal_list:
        met = "–" if g.met is None else "yes" if g.met else "**no**"
        lines.append("| %s | %s | %s |" % (g.text, g.shown, met))
    return lines


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
