"""The notes of bench/RESULTS.md beside its tables (make_results.py): the
profiles of goals not met and what remains in them, TLS, overload, the
attack phases and PostgreSQL."""

import collections
import os

from results_format import fmt_rate, fmt_us


def load_profiles(reports):
    """The --profile rows of the reports (bench/profile.h), in report order."""
    return [dict(p, ops=int(p.get("ops", 0)))
            for report in reports for p in report.get("profile", [])]


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


HOT_FUNCTIONS = 6      # per side, in the "what remains" notes
SYMBOL_WIDTH = 90      # a longer demangled name is cut, with "…"


def short_symbol(symbol):
    symbol = symbol.replace("`", "'")
    return symbol if len(symbol) <= SYMBOL_WIDTH else symbol[:SYMBOL_WIDTH - 1] + "…"


def remaining_notes(goal_list, profiles, cores):
    """For every goal not met: the --profile rounds that show where its time
    goes (per operation, each side), what the goal leaves per operation, and
    the functions each side was sampled running."""
    missed = [g for g in goal_list if g.met is False]
    if not missed:
        return []
    by_round = collections.defaultdict(list)  # (mode, scenario) -> rows
    for p in profiles:
        by_round[(p.get("mode"), p.get("scenario"))].append(p)
    num = lambda v: v if isinstance(v, (int, float)) and v >= 0 else None
    per_op = lambda v: "n/a" if num(v) is None else "%.2f" % v
    lines = ["## What remains, goal by goal", "",
             "Each goal this run did not meet, with the `--profile` rounds of its scenarios "
             "(bench/profile.h; per operation, each process) and the functions each process "
             "was found running when sampled (`perf record` on the CPU clock, self time, share "
             "of that process's samples). The figures are of the watched rounds, which tracing "
             "slows; their proportions, not their absolute values, are the point.", ""]
    if any("irq_enable" in h.get("symbol", "") for p in profiles for h in p.get("hot") or []):
        lines.append("Kernel time shows as `[kernel.kallsyms]` functions. A sample that falls "
                     "while the kernel has interrupts off is counted where it turns them back "
                     "on (`*_irq_enable`): that entry is kernel work of every kind (system "
                     "calls, wake-ups, scheduling), not interrupt handling.")
        lines.append("")
    for g in missed:
        lines.append("### %s" % g.text)
        lines.append("")
        lines.append("Measured: %s." % g.shown)
        lines.append("")
        rounds = [(key, by_round.get(key, [])) for key in g.profile]
        if not any(rows for _, rows in rounds):
            lines.append("No `--profile` round covers this goal in this run%s." % (
                "" if g.profile else " (its scenario is not one a profile round can explain: "
                "the figure is a count or a size, not time)"))
            lines.append("")
            continue
        lines.append("| mode | scenario | side | voluntary cs | involuntary cs | CPU µs | "
                     "syscalls | futex |")
        lines.append("|---|---|---|---|---|---|---|---|")
        for (mode, scenario), rows in rounds:
            for p in rows:
                lines.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
                    mode, scenario, p.get("side", "?"), per_op(p.get("voluntary_cs_per_op")),
                    per_op(p.get("involuntary_cs_per_op")), per_op(p.get("cpu_us_per_op")),
                    per_op(p.get("syscalls_per_op", -1)), per_op(p.get("futex_per_op", -1))))
        lines.append("")
        own = rounds[0][1]
        cpu = sum(num(p.get("cpu_us_per_op")) or 0 for p in own)
        vcs = sum(num(p.get("voluntary_cs_per_op")) or 0 for p in own)
        if g.figure == "rate" and g.ref_value and g.target and g.value:
            need = g.target * g.ref_value
            budget = cores * 1e6 / need
            used = cpu * g.value / 1e6
            lines.append(
                "- At the goal's rate (%s, %.3g× %s) the machine's %d cores leave at most "
                "%.2f CPU µs per operation, all processes together; this round spent %.2f "
                "(×%.2f of that budget). At the measured %s it kept about %.2f of %d cores "
                "busy%s." % (
                    fmt_rate(need), g.target, g.ref_label, cores, budget, cpu,
                    cpu / budget if budget else 0, fmt_rate(g.value), used, cores,
                    ": the rate is bound by CPU work per operation" if used >= 0.8 * cores
                    else ": cores sit idle, so a serial path bounds the rate (one thread's "
                    "work per operation, or the hand-offs between threads: %.2f voluntary "
                    "context switches per operation), not the CPU all cores give" % vcs))
        elif g.figure in ("p50", "p99") and g.ref_value and g.target and g.value:
            need = g.target * g.ref_value
            lines.append(
                "- The %s must fall from %s to %s (%.3g× %s's %s), by %s. Per operation the "
                "round made %.2f voluntary context switches (a sleep and a wake-up each) and "
                "spent %.2f CPU µs, all processes together." % (
                    g.figure, fmt_us(g.value), fmt_us(need), g.target, g.ref_label,
                    fmt_us(g.ref_value), fmt_us(g.value - need), vcs, cpu))
        if len(rounds) > 1 and rounds[1][1]:
            ref_key, ref_rows = rounds[1]
            ref_cpu = sum(num(p.get("cpu_us_per_op")) or 0 for p in ref_rows)
            ref_vcs = sum(num(p.get("voluntary_cs_per_op")) or 0 for p in ref_rows)
            lines.append(
                "- Against %s/%s, side by side: %+.2f voluntary context switches and %+.2f CPU "
                "µs per operation (%.2f and %.2f against %.2f and %.2f)." % (
                    ref_key[0], ref_key[1], vcs - ref_vcs, cpu - ref_cpu, vcs, cpu, ref_vcs,
                    ref_cpu))
        for (mode, scenario), rows in rounds:
            for p in rows:
                hot = p.get("hot") or []
                if not hot:
                    continue
                lines.append("- Sampled, %s/%s %s (%d samples): %s." % (
                    mode, scenario, p.get("side", "?"), int(p.get("samples", 0)), "; ".join(
                        "%.1f%% `%s` (%s)" % (float(h.get("percent", 0)),
                                              short_symbol(h.get("symbol", "?")),
                                              os.path.basename(h.get("dso", "?")))
                        for h in hot[:HOT_FUNCTIONS])))
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
                fmt_us(r["p50_us"]), fmt_us(r["p99_us"]), r["errors"], before, peak), ""] + \
        attack_notes(env)


def attack_notes(env):
    """The overload run's attack phases (flood, slowloris), when it had them."""
    rows = []
    for name, probe in (("flood", "new client: connect + one call"),
                        ("slowloris", "/healthz")):
        try:
            rows.append("| %s | %s | %s | %s | %s | %s ms | %s | %s MiB |" % (
                name, fmt_us(float(env[name + "_calm_p50_us"])),
                fmt_us(float(env[name + "_calm_p99_us"])), env[name + "_calm_errors"],
                probe, env[name + "_probe_slowest_ms"], env[name + "_probe_failures"],
                env[name + "_silo_peak_rss_mib"]))
        except (KeyError, ValueError):
            continue
    if not rows:
        return []
    return ["Then, on the same silo, two attacks while the calm client calls on its open "
            "connection: 2,000 idle connections to the gateway from 40 source addresses, "
            "reopened as the silo closes them, with a new client connecting every second; "
            "and 400 slowloris connections to the HTTP port from one address, with "
            "`/healthz` asked every 100 ms:", "",
            "| attack | calm p50 | calm p99 | calm errors | probe | slowest probe | "
            "probe failures | silo peak RSS |",
            "|---|---|---|---|---|---|---|---|"] + rows + [""]


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
