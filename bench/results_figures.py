"""The figures of bench/RESULTS.md, drawn by bench/make_results.py with
matplotlib: one small panel per scenario (each arm in one colour
throughout, p50 bars, p99 whiskers) and the goals against their goal lines.
matplotlib is imported only when a figure is drawn."""

import collections
import math
import os

# Each arm's colour in the latency figure, in the figure's order (bars in a
# panel, entries of the legend): arm key -> (colour, lighter colour for its
# rows with K callers at once). Keys are those of `by_key`, plus Granary's
# own comparison rows by scenario.
ARM_COLOURS = [
    ("granary:hosted", ("#1f77b4", "#aec7e8")),
    ("granary:remote", ("#ff7f0e", "#ffbb78")),
    ("granary:remote-tls", ("#8c564b", "#c49c94")),
    ("granary:remote-cross", ("#e377c2", "#f7b6d2")),
    ("granary:hosted-postgres", ("#17becf", "#9edae5")),
    ("postgres_floor", ("#7f7f7f", "#c7c7c7")),
    ("granary:cluster", ("#bcbd22", "#dbdb8d")),
    ("granary:cluster-postgres", ("#393b79", "#9c9ede")),
    ("granary:overload", ("#843c39", "#d6616b")),
    ("caf", ("#2ca02c", "#98df8a")),
    ("erlang", ("#9467bd", "#c5b0d5")),
    ("grpc", ("#d62728", "#ff9896")),
    ("raw_grpc", ("#ad494a", "#e7969c")),
]
# Colours of arms not named above, given out in the order of their keys.
SPARE_COLOURS = ["#637939", "#8c6d31", "#7b4173", "#5254a3", "#bd9e39", "#a55194",
                 "#3182bd", "#e6550d", "#31a354", "#756bb1"]
# Hatches that tell apart rows of one arm with different K.
K_HATCHES = ["", "//", "xx", ".."]


def style_key(row):
    if row["arm"] == "granary" and row["scenario"] in ("raw_grpc", "postgres_floor"):
        return row["scenario"]
    return "granary:" + row["mode"] if row["arm"] == "granary" else row["arm"]


def arm_styles(rows, label):
    """Row label -> (bar style, order): one fixed style per label for every
    panel of a figure, so that one legend serves them all."""
    known = dict(ARM_COLOURS)
    order = [k for k, _ in ARM_COLOURS]
    spare = sorted({style_key(r) for r in rows} - set(order))
    for i, key in enumerate(spare):
        colour = SPARE_COLOURS[i % len(SPARE_COLOURS)]
        known[key] = (colour, colour)
        order.append(key)
    ks = collections.defaultdict(set)
    for r in rows:
        ks[style_key(r)].add(r.get("concurrency", 0) if r.get("concurrency", 0) > 1 else 0)
    styles = {}
    for r in rows:
        key, k = style_key(r), (r.get("concurrency", 0) if r.get("concurrency", 0) > 1 else 0)
        dark, light = known[key]
        hatch = K_HATCHES[sorted(ks[key] - {0}).index(k) % len(K_HATCHES)] if k else ""
        styles[label(r)] = ({"facecolor": light if k else dark, "hatch": hatch, "edgecolor": dark,
                             "linewidth": 0.6}, (order.index(key), k))
    return styles


def short_us(us, _pos=None):
    """A latency axis tick: 0.5 µs, 20 µs, 3 ms, 1.5 s."""
    for scale, unit in ((1e6, "s"), (1e3, "ms"), (1, "µs")):
        if us >= scale:
            return "%g %s" % (float("%.3g" % (us / scale)), unit)
    return "%g µs" % float("%.2g" % us) if us > 0 else "0"


def scenario_groups(rows, table_of):
    """(scenario, its rows) in report order, a row of `table_of` in the
    scenario it is shown with."""
    groups = collections.OrderedDict()
    for r in rows:
        groups.setdefault(table_of.get(r["scenario"], r["scenario"]), []).append(r)
    return list(groups.items())


def latency_figure(rows, path, label, table_of):
    """One panel per scenario: each arm's p50 as a bar, its p99 as a whisker
    above it; a log axis only where a panel's figures span more than 20×."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch
    from matplotlib.ticker import FuncFormatter, NullFormatter
    panels = [(s, [r for r in g if r["verified"] and r["p50_us"] > 0])
              for s, g in scenario_groups(rows, table_of)]
    panels = [(s, g) for s, g in panels if g]
    if not panels:
        return False
    styles = arm_styles([r for _, g in panels for r in g], label)
    ncols = min(len(panels), 5 if len(panels) > 12 else 4)
    nrows = math.ceil(len(panels) / ncols)
    top = 0.5 + 0.2 * math.ceil(len(styles) / 4)  # inches above the panels: title, legend
    fig, axes = plt.subplots(nrows, ncols, squeeze=False,
                             figsize=(3.1 * ncols, 2.5 * nrows + top))
    for ax, (scenario, group) in zip(axes.flat, panels):
        group = sorted(group, key=lambda r: styles[label(r)][1])
        p50 = [r["p50_us"] for r in group]
        p99 = [max(r["p99_us"], r["p50_us"]) for r in group]
        for x, r in enumerate(group):
            ax.bar(x, r["p50_us"], width=0.8, **styles[label(r)][0])
        ax.errorbar(range(len(group)), p50,
                    yerr=[[0] * len(group), [b - a for a, b in zip(p50, p99)]],
                    fmt="none", ecolor="black", elinewidth=0.8, capsize=3)
        if max(p99) / min(p50) > 20:
            ax.set_yscale("log")
            ax.set_ylim(min(p50) / 2, max(p99) * 2)
            ax.yaxis.set_minor_formatter(NullFormatter())
        else:
            ax.set_ylim(0, max(p99) * 1.1)
        ax.yaxis.set_major_formatter(FuncFormatter(short_us))
        ax.tick_params(axis="y", labelsize=8)
        ax.set_xticks([])
        pad = max(0, 3 - len(group)) / 2  # a lone bar as wide as one of three, centred
        ax.set_xlim(-0.6 - pad, len(group) - 0.4 + pad)
        ax.set_title(scenario, fontsize=10)
        ax.grid(axis="y", linewidth=0.3, alpha=0.6)
        ax.set_axisbelow(True)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    names = sorted(styles, key=lambda n: styles[n][1])
    legend = fig.legend([Patch(**styles[n][0]) for n in names], names, loc="upper center",
                        ncol=4, fontsize=9, frameon=False,
                        bbox_to_anchor=(0.5, 1 - 0.4 / fig.get_figheight()))
    fig.suptitle("Latency per scenario: p50 (bar), p99 (whisker); log scale where the figures "
                 "span more than 20×", fontsize=12)
    fig.canvas.draw()  # the panels go below the legend as drawn
    fig.tight_layout(pad=0.6, rect=(0, 0, 1, legend.get_window_extent().y0 / fig.bbox.height))
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def plotted_goals(goal_list):
    """The goals the goals figure shows: those measured as a ratio (not the
    failover counts, not the goals this run did not measure)."""
    return [g for g in goal_list if g.ratio is not None and g.ratio > 0 and g.target]


def goals_figure(goal_list, path):
    """Each measured goal's ratio as a dot, green where met and red where
    not, beside its goal (a black bar), on a log axis."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
    from matplotlib.transforms import blended_transform_factory
    shown = plotted_goals(goal_list)
    if not shown:
        return False
    colour = {True: "#2ca02c", False: "#d62728"}
    fig, ax = plt.subplots(figsize=(10, 1.3 + 0.42 * len(shown)))
    beside = blended_transform_factory(ax.transAxes, ax.transData)
    for i, g in enumerate(shown):
        y = len(shown) - 1 - i  # the first goal on top
        ax.plot([g.target, g.ratio], [y, y], color=colour[g.met], linewidth=3, alpha=0.35,
                solid_capstyle="butt")
        ax.plot([g.ratio], [y], "o", color=colour[g.met], markersize=8)
        ax.plot([g.target], [y], marker="|", color="black", markersize=18, markeredgewidth=2)
        ax.text(1.01, y, g.note or "×%.2f (goal %s ×%g)" % (g.ratio, g.direction, g.target),
                transform=beside, va="center", fontsize=9, color=colour[g.met])
    ax.set_yticks(range(len(shown)))
    ax.set_yticklabels([g.short for g in reversed(shown)], fontsize=9)
    ax.set_ylim(-0.7, len(shown) - 0.3)
    ax.set_xscale("log")
    values = [v for g in shown for v in (g.ratio, g.target)]
    ax.set_xlim(min(values) / 1.6, max(values) * 1.6)
    ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: "×%g" % float("%.3g" % v)))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.axvline(1.0, color="grey", linewidth=0.6, linestyle=":")
    ax.grid(axis="x", linewidth=0.3, alpha=0.6)
    ax.set_xlabel("measured ratio (log scale)")
    ax.legend([Line2D([], [], marker="o", linestyle="", color=colour[True]),
               Line2D([], [], marker="o", linestyle="", color=colour[False]),
               Line2D([], [], marker="|", linestyle="", color="black", markersize=12,
                      markeredgewidth=2)],
              ["met", "not met", "goal"], loc="lower center", bbox_to_anchor=(0.5, 1.0),
              ncol=3, frameon=False, fontsize=9)
    fig.suptitle("Goals: the measured ratio of each against its goal", fontsize=12)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def goals_figure_path(latency_path):
    """results_latency.png -> results_goals.png; other names get _goals."""
    folder, name = os.path.split(latency_path)
    stem, ext = os.path.splitext(name)
    stem = stem.replace("latency", "goals") if "latency" in stem else stem + "_goals"
    return os.path.join(folder, stem + (ext or ".png"))
