"""How bench/RESULTS.md writes rates and times (make_results.py and its
notes share it)."""


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
