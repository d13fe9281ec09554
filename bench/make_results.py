#!/usr/bin/python3
"""Writes bench/RESULTS.md (and a latency plot) from benchmark JSON reports.

Every arm -- granary-bench --hosted, granary-bench --target, granary-bench
--failover, the PostgreSQL arms (--hosted --storage=postgres, --failover
--cluster=postgres) and the comparison arms under bench/compare/ (CAF, gRPC,
Erlang/OTP) -- writes a BenchReport (bench/report.proto) with --json=FILE.
This script pairs their rows by scenario and writes one table per scenario,
the environment, and the goals.

A row that is not verified is refused: its figures are not published, the
table says why, and the script exits 1 (so `make bench` fails visibly).

  make_results.py --out bench/RESULTS.md --plot bench/results_latency.png \
      --env-commit $(git rev-parse --short HEAD) hosted.json remote.json caf.json grpc.json \
      erlang.json
"""

import argparse
import collections
import json
import os
import platform
import statistics
import subprocess
import sys

# Which arms a Granary row is compared with, in the order the ratios are
# shown.
REFERENCE = {"hosted": ("caf", "erlang"), "remote": ("grpc",)}

# Granary rows compared with another Granary row instead, by p50:
# (mode, scenario) -> (arm key, scenario) of the reference.
P50_REFERENCE = {
    ("hosted-postgres", "durable-write"): ("granary:hosted-postgres", "postgres_floor"),
    ("cluster-postgres", "failover"): ("granary:cluster", "failover"),
    ("remote-tls", "ask"): ("granary:remote", "ask"),
}

# The same by throughput.
RATE_REFERENCE = {
    ("remote-tls", "oneway"): ("granary:remote", "oneway"),
}

# Rows shown in another scenario's table: PostgreSQL's own floor beside the
# durable write it is the floor of.
TABLE_OF = {"postgres_floor": "durable-write"}

# How a Granary mode reads in a table.
MODE_LABEL = {
    "hosted-postgres": "hosted, PostgreSQL storage",
    "cluster": "dev cluster",
    "cluster-postgres": "PostgreSQL cluster",
    "remote-tls": "remote, TLS",
    "overload": "calm caller, silo overloaded",
}

# The goal: a durable write to PostgreSQL costs at most this many times
# PostgreSQL's own synced single-row UPDATE (p50).
POSTGRES_FLOOR_GOAL = 1.5

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


def load(paths):
    rows = []
    for report in read_reports(paths):
        for s in report.get("summaries", []):
            s = dict(s)
            s["arm"] = report.get("arm", "?")
            s["env"] = report.get("env", {})
            for k in ("ops", "samples", "errors", "rss_delta_kb"):
                s[k] = int(s.get(k, 0))
            rows.append(s)
    return rows


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


def fmt_rate(r):
    if r >= 1e6:
        return "%.2f M/s" % (r / 1e6)
    if r >= 1e3:
        return "%.1f k/s" % (r / 1e3)
    return "%.0f /s" % r


def fmt_us(us):
    if us >= 1000000:
        return "%.2f s" % (us / 1000000)
    if us >= 1000:
        return "%.2f ms" % (us / 1000)
    return "%.2f µs" % us


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
        if ref is None or not ref["verified"] or ref["p50_us"] <= 0:
            return "–"
        return "p50 ×%.2f of %s" % (row["p50_us"] / ref["p50_us"], label(ref))
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
        out.append("| %s | %s (±%.1f%%) | %s | %s | %s | %d | %+d KiB | %s |" % (
            label(row), fmt_rate(row["mean_rate"]), row["spread_pct"],
            fmt_us(per_op), fmt_us(row["p50_us"]), fmt_us(row["p99_us"]),
            row["samples"], row["rss_delta_kb"], ratio_text(row, by_key)))
    return out, refused


def goals(by_key):
    def get(arm, scenario):
        r = by_key.get((arm, scenario))
        return r if r is not None and r["verified"] else None

    def get_mode(mode, scenario):
        return get("granary:" + mode, scenario)

    lines = ["| goal | measured | met |", "|---|---|---|"]

    def goal(text, a, b, ok_fn, show):
        if a is None or b is None:
            lines.append("| %s | not measured in this run | – |" % text)
            return
        lines.append("| %s | %s | %s |" % (text, show(a, b), "yes" if ok_fn(a, b) else "**no**"))

    rate = lambda a, b: "%s vs %s (×%.2f)" % (fmt_rate(a["mean_rate"]), fmt_rate(b["mean_rate"]),
                                             a["mean_rate"] / b["mean_rate"] if b["mean_rate"] else 0)
    p50 = lambda a, b: "%s vs %s (×%.2f)" % (fmt_us(a["p50_us"]), fmt_us(b["p50_us"]),
                                            a["p50_us"] / b["p50_us"] if b["p50_us"] else 0)

    # Scenarios of one run whose rounds ran interleaved: the median of the
    # per-round p50 ratios (each pair of rounds ran side by side), else the
    # ratio of pooled p50s.
    def paired_ratio(a, b):
        ra, rb = a.get("round_p50_us") or [], b.get("round_p50_us") or []
        if (a.get("mode") == b.get("mode") and ra and len(ra) == len(rb)
                and all(x > 0 for x in ra + rb)):
            return statistics.median(x / y for x, y in zip(ra, rb)), True
        return (a["p50_us"] / b["p50_us"] if b["p50_us"] else 0), False

    def paired_p50(a, b):
        ratio, paired = paired_ratio(a, b)
        return "%s vs %s (×%.2f%s)" % (fmt_us(a["p50_us"]), fmt_us(b["p50_us"]), ratio,
                                       ", median of per-round ratios" if paired else "")
    goal("hosted oneway ≥ 2× CAF tell", get_mode("hosted", "oneway"), get("caf", "oneway"),
         lambda a, b: a["mean_rate"] >= 2 * b["mean_rate"], rate)
    goal("hosted pingpong ≥ CAF", get_mode("hosted", "pingpong"), get("caf", "pingpong"),
         lambda a, b: a["mean_rate"] >= b["mean_rate"], rate)
    goal("hosted activation ≥ 2× CAF spawn", get_mode("hosted", "activation"), get("caf", "activation"),
         lambda a, b: a["mean_rate"] >= 2 * b["mean_rate"], rate)
    goal("hosted ask p50 ≤ CAF's", get_mode("hosted", "ask"), get("caf", "ask"),
         lambda a, b: a["p50_us"] <= b["p50_us"], p50)
    for s in ("ask", "chain"):
        goal("hosted %s p50 with an empty call filter chain ≤ 1.05× without" % s,
             get_mode("hosted", s + "_filtered"), get_mode("hosted", s),
             lambda a, b: paired_ratio(a, b)[0] <= 1.05, paired_p50)
    goal("hosted stateless worker hot spot ≥ 1.5× a normal grain's rate (16 callers, one key)",
         get_mode("hosted", "stateless"), get_mode("hosted", "hotspot"),
         lambda a, b: a["mean_rate"] >= 1.5 * b["mean_rate"], rate)
    goal("remote ask p50 ≤ 1.3× raw gRPC bidi ping-pong p50", get_mode("remote", "ask"),
         get_mode("remote", "raw_grpc") or get("grpc", "raw_grpc"),
         lambda a, b: paired_ratio(a, b)[0] <= 1.3, paired_p50)
    goal("remote one-way ≥ 10× gRPC one-message-per-write", get_mode("remote", "oneway"),
         get("grpc", "oneway"), lambda a, b: a["mean_rate"] >= 10 * b["mean_rate"], rate)
    goal("durable-write on PostgreSQL p50 ≤ %g× PostgreSQL's synced UPDATE (pgbench) p50"
         % POSTGRES_FLOOR_GOAL, get_mode("hosted-postgres", "durable-write"),
         get_mode("hosted-postgres", "postgres_floor"),
         lambda a, b: a["p50_us"] <= POSTGRES_FLOOR_GOAL * b["p50_us"], p50)
    # Failover: disturbed grains, goal 0. An unverified row is a miss (its
    # failure says what happened), not a row that was not measured.
    for mode in ("cluster", "cluster-postgres"):
        text = "failover (%s): 0 grains of surviving silos disturbed" % MODE_LABEL[mode]
        r = by_key.get(("granary:" + mode, "failover"))
        if r is None:
            lines.append("| %s | not measured in this run | – |" % text)
        elif r["verified"]:
            lines.append("| %s | 0 in %d round(s); kill → first answer p50 %s, p99 %s | yes |" % (
                text, int(r.get("rounds", 0)), fmt_us(r["p50_us"]), fmt_us(r["p99_us"])))
        else:
            why = "; ".join(r.get("failures", [])) or "not verified"
            lines.append("| %s | %s | **no** |" % (text, why))
    return lines


def load_profiles(paths):
    """The --profile rows of the reports (bench/profile.h), in report order."""
    return [dict(p, ops=int(p.get("ops", 0)))
            for report in read_reports(paths) for p in report.get("profile", [])]


def profile_notes(profiles):
    """Per operation, on each side: what the watched round of each scenario
    cost in context switches, CPU time and system calls."""
    if not profiles:
        return []
    per_op = lambda v: "n/a" if v is None or v < 0 else "%.2f" % v
    lines = ["## Where the time goes (`--profile`)", "",
             "After its measured rounds each scenario ran one more round with its processes "
             "watched (bench/profile.h): context switches summed over the process's threads "
             "(voluntary: the thread blocked, one sleep and one wake-up each; involuntary: it was "
             "preempted), time on a CPU (spinning included), and system calls and futex calls "
             "counted by `perf stat` (n/a where perf does not run). Per operation; the client is "
             "granary-bench, the silo or server the process answering it.", "",
             "| mode | scenario | side | voluntary cs | involuntary cs | CPU µs | syscalls | "
             "futex | verified |",
             "|---|---|---|---|---|---|---|---|---|"]
    for p in profiles:
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            p.get("mode", "?"), p.get("scenario", "?"), p.get("side", "?"),
            per_op(p.get("voluntary_cs_per_op", 0)), per_op(p.get("involuntary_cs_per_op", 0)),
            per_op(p.get("cpu_us_per_op", 0)), per_op(p.get("syscalls_per_op", -1)),
            per_op(p.get("futex_per_op", -1)), "yes" if p.get("verified") else "**no**"))
    notes = sorted({p["note"] for p in profiles if p.get("note")})
    if notes:
        lines.append("")
        lines.extend("- perf: %s" % n for n in notes)
    lines.append("")
    return lines


def tls_notes(by_key):
    """Remote calls with and without TLS, measured in the same run."""
    plain_ask = by_key.get(("granary:remote", "ask"))
    tls_ask = by_key.get(("granary:remote-tls", "ask"))
    plain_one = by_key.get(("granary:remote", "oneway"))
    tls_one = by_key.get(("granary:remote-tls", "oneway"))
    if not all(r is not None and r["verified"] for r in (plain_ask, tls_ask, plain_one, tls_one)):
        return []
    return ["## TLS", "",
            "The same remote scenarios against a second granary-silo that serves its gateway "
            "with TLS (`--tls_cert`, certificates of scripts/dev-certs.sh; granary-bench "
            "`--tls_ca`), started right after the plaintext one in the same run:", "",
            "| | plaintext | TLS | TLS / plaintext |", "|---|---|---|---|",
            "| ask p50 | %s | %s | ×%.2f |" % (fmt_us(plain_ask["p50_us"]), fmt_us(tls_ask["p50_us"]),
                                              tls_ask["p50_us"] / plain_ask["p50_us"]),
            "| ask p99 | %s | %s | ×%.2f |" % (fmt_us(plain_ask["p99_us"]), fmt_us(tls_ask["p99_us"]),
                                              tls_ask["p99_us"] / plain_ask["p99_us"]),
            "| one-way rate | %s | %s | ×%.2f |" % (
                fmt_rate(plain_one["mean_rate"]), fmt_rate(tls_one["mean_rate"]),
                tls_one["mean_rate"] / plain_one["mean_rate"]),
            ""]


def overload_notes(by_key):
    """The overload round's figures beyond its calm caller's row."""
    r = by_key.get(("granary:overload", "overload"))
    if r is None or not r["verified"]:
        return []
    env = r.get("env", {})
    try:
        capacity = float(env["capacity_per_s"])
        offered = float(env["offered_per_s"])
        served = float(env["served_per_s"])
        held_back = int(env["held_back"])
        sent = int(env["sent"])
        before = float(env["silo_rss_before_mib"])
        peak = float(env["silo_peak_rss_mib"])
    except (KeyError, ValueError):
        return []
    return ["## Overload", "",
            "`granary-bench --overload`: a granary-silo's one-way capacity measured closed loop "
            "(one SDK client, as fast as flow control lets it), then %.3g× that offered open loop "
            "for %s s per round while a calm client calls (means of %s round(s)). The silo pushes "
            "back by not reading (the SDK's sends wait), so the load it cannot serve is held back "
            "at the sender, not queued in the silo:" % (
                float(env.get("factor", "2")), env.get("overload_seconds", "?"),
                env.get("rounds", "?")), "",
            "| capacity | offered | served | served / capacity | sent | held back | "
            "calm p50 | calm p99 | calm errors | silo RSS before → peak |",
            "|---|---|---|---|---|---|---|---|---|---|",
            "| %s | %s | %s | ×%.2f | %d | %d | %s | %s | %d | %.1f → %.1f MiB |" % (
                fmt_rate(capacity), fmt_rate(offered), fmt_rate(served),
                served / capacity if capacity > 0 else 0, sent, held_back,
                fmt_us(r["p50_us"]), fmt_us(r["p99_us"]), r["errors"], before, peak), ""]


def postgres_notes(rows):
    """What the PostgreSQL arms ran on, from their reports' environment."""
    env = {}
    for r in rows:
        if r["arm"] == "granary" and r["mode"] in ("hosted-postgres", "cluster-postgres"):
            env.update(r.get("env", {}))
    if not env:
        return []
    server = "PostgreSQL %s" % env["postgres_version"] if "postgres_version" in env else "PostgreSQL"
    settings = ""
    if "fsync" in env:
        settings = " with fsync=%s and synchronous_commit=%s" % (
            env["fsync"], env.get("synchronous_commit", "?"))
    return ["## Notes on the PostgreSQL arms", "",
            "The PostgreSQL rows ran against %s on the same machine over loopback TCP%s: every "
            "write is a synced commit. `durable-write` on PostgreSQL is one small state write of "
            "an active grain (one conditional UPDATE, committed before the reply); the floor "
            "beside it is PostgreSQL's own synced single-row UPDATE measured in the same run "
            "(pgbench), so their ratio is what Granary adds to a commit. The failover rows on "
            "PostgreSQL are clusters of equal silos (--cluster=postgres, a fresh cluster id per "
            "round) losing a random silo, any of them; the dev cluster loses a random silo other "
            "than the primary, which holds its table." % (server, settings), ""]


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    good = [r for r in rows if r["verified"] and r["p50_us"] > 0]
    if not good:
        return False
    names = ["%s\n%s" % (r["scenario"], label(r)) for r in good]
    fig, ax = plt.subplots(figsize=(max(8, 0.55 * len(good)), 5))
    xs = range(len(good))
    ax.bar([x - 0.2 for x in xs], [r["p50_us"] for r in good], width=0.4, label="p50")
    ax.bar([x + 0.2 for x in xs], [r["p99_us"] for r in good], width=0.4, label="p99")
    ax.set_yscale("log")
    ax.set_ylabel("latency (µs, log scale)")
    ax.set_xticks(list(xs))
    ax.set_xticklabels(names, rotation=60, ha="right", fontsize=7)
    ax.legend()
    ax.set_title("Latency percentiles per scenario and arm")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("reports", nargs="+", help="BenchReport JSON files")
    ap.add_argument("--out", required=True, help="the markdown file to write")
    ap.add_argument("--plot", help="PNG of latency percentiles (needs matplotlib)")
    ap.add_argument("--env-commit", default="", help="commit the binaries were built from")
    ap.add_argument("--command", default="make bench", help="the command that produced the run")
    args = ap.parse_args()

    try:
        rows = load(args.reports)
    except (OSError, ValueError) as e:
        print("make_results: cannot read reports: %s" % e, file=sys.stderr)
        return 2
    if not rows:
        print("make_results: the reports hold no rows", file=sys.stderr)
        return 2
    # (arm key, scenario) -> row; arm key is "granary:hosted",
    # "granary:remote", "caf" or "grpc". Concurrent asks are rows of their
    # own, never the reference.
    by_key = {}
    for r in rows:
        if r.get("concurrency", 0) > 1 and r["scenario"] not in ("hotspot", "stateless"):
            continue
        arm_key = "granary:" + r["mode"] if r["arm"] == "granary" else r["arm"]
        by_key[(arm_key, r["scenario"])] = r

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
          "is not is refused, not published." % args.command, "",
          "## Environment", "", "| | |", "|---|---|"]
    for k, v in environment(args.env_commit):
        md.append("| %s | %s |" % (k, v))
    md.append("")
    all_refused = []
    scenarios = []
    for r in rows:
        s = TABLE_OF.get(r["scenario"], r["scenario"])
        if s not in scenarios:
            scenarios.append(s)
    for s in scenarios:
        srows = [r for r in rows if TABLE_OF.get(r["scenario"], r["scenario"]) == s]
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
    md.extend(goals(by_key))
    md.append("")
    md.append("Where a goal is not met, that is the measured state of Granary on this machine; "
              "scenarios are never changed to meet a goal.")
    md.append("")
    if args.plot:
        try:
            if plot(rows, args.plot):
                md.append("![latency percentiles](%s)" % os.path.basename(args.plot))
                md.append("")
        except ImportError:
            md.append("(No plot: matplotlib is not installed.)")
            md.append("")
    md.extend(profile_notes(load_profiles(args.reports)))
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
