"""How busy the machine was beside each row of a benchmark run.

granary-bench reads the kernel's CPU accounting around every round
(bench/machine_load.h) and reports, per scenario, the cores other processes
used (`other_cores`) and the cores the hypervisor stole (`steal_cores`). On
two cores one other busy process cuts hosted one-way throughput about 2.5
times and hosted ask 10 times, so a row measured beside other work says more
about the machine than about the code. RESULTS.md marks such rows, and the
"Since the previous run" table says when a change came with a busy machine.
"""

# Other work (cores, averaged over a row's rounds) above which a row is
# marked: a fifth of a core is far above the idle machine's background
# (about 0.01) and well below one busy process (about 1).
BUSY_CORES = 0.2

MARK = "‡"


def load_of(row):
    """(other cores, stolen cores) of a row; zeros for reports without them
    (the comparison arms, older reports)."""
    if row is None:
        return 0.0, 0.0
    return float(row.get("other_cores", 0) or 0), float(row.get("steal_cores", 0) or 0)


def busy(row):
    """True when other work or the hypervisor took a fifth of a core or more
    during the row's rounds."""
    other, steal = load_of(row)
    return other + steal >= BUSY_CORES


def load_section(rows, label):
    """Markdown lines saying how busy the machine was during the run, and
    which rows are marked."""
    measured = [r for r in rows if "other_cores" in r or "steal_cores" in r]
    if not measured:
        return []
    worst = max(measured, key=lambda r: sum(load_of(r)))
    other, steal = load_of(worst)
    lines = ["## Machine load", ""]
    text = ("Around every round granary-bench reads the kernel's CPU accounting: the cores "
            "other processes used beside the benchmark, and those the hypervisor stole. At "
            "most %.2f cores of other work and %.2f stolen (%s, %s). " % (
                other, steal, label(worst), worst["scenario"]))
    text += ("The kernel counts CPU time in ticks of 10 ms, so over a row whose rounds "
             "last well under a second in all the figure is rough, by a few tenths of a core "
             "either way; a mark on such a row is a hint, not a verdict. ")
    marked = [r for r in measured if busy(r)]
    if marked:
        text += ("Rows with %.1f cores or more of either are marked %s in their tables: on "
                 "two cores one other busy process cuts hosted one-way throughput about 2.5 "
                 "times and hosted ask 10 times, so their figures are the machine's as much "
                 "as the code's: %s." % (
                     BUSY_CORES, MARK,
                     ", ".join("%s %s" % (label(r), r["scenario"]) for r in marked)))
    else:
        text += "No row ran beside %.1f cores or more of either: the machine was quiet." % (
            BUSY_CORES)
    return lines + [text, ""]
