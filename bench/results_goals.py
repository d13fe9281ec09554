"""The goals of bench/RESULTS.md (make_results.py): each measured ratio
against its target, met or not, with the figures it compares."""

import dataclasses
import statistics

from results_format import MODE_LABEL, fmt_rate, fmt_us, label


# The goal: a durable write to PostgreSQL costs at most this many times
# PostgreSQL's own synced single-row UPDATE (p50).
POSTGRES_FLOOR_GOAL = 1.5

# The goal: an idle activation costs its silo at most this many bytes of
# resident memory beyond the grain's own fields (an Akka actor is about 400
# bytes, an Erlang process about 2.7 KB).
MEMORY_GOAL_BYTES = 256
# The grain's own fields when the report does not say (TinyGrain: one int64).
MEMORY_GRAIN_BYTES = 8

# The goal: under a skewed load, RESOURCE_OPTIMIZED placement keeps the
# busiest silo's CPU within this many times the least busy silo's.
BALANCE_GOAL = 1.2


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


def balance_goal(resource, random):
    """The balance scenario (bench/balance.h): the median over rounds of the
    busiest silo's CPU over the least busy's with RESOURCE_OPTIMIZED
    placement, RANDOM's beside it (measured in the same rounds)."""
    text = ("PostgreSQL cluster under a skewed load, RESOURCE_OPTIMIZED placement: busiest "
            "silo CPU ≤ %g× the least busy's (median of rounds)" % BALANCE_GOAL)
    short = "skewed load: busiest silo CPU ≤ %g× least" % BALANCE_GOAL
    ratios = (resource or {}).get("round_balance") or []
    if not ratios:
        return Goal(text, short)
    ratio = statistics.median(ratios)
    note = ""
    random_ratios = (random or {}).get("round_balance") or []
    if random_ratios:
        note = "; RANDOM in the same rounds: ×%.2f" % statistics.median(random_ratios)
    shown = "×%.2f (rounds: %s%s)" % (ratio, ", ".join("%.2f" % r for r in ratios), note)
    return Goal(text, short, shown, ratio <= BALANCE_GOAL, ratio, BALANCE_GOAL, "≤")


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
        balance_goal(get("granary:cluster-postgres", "balance"),
                     get("granary:cluster-postgres", "balance_random")),
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
