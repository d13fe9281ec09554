"""How bench/RESULTS.md names its rows and writes rates and times
(make_results.py, its goals and its notes share it)."""


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


def label(row):
    if row["arm"] == "granary" and row["scenario"] == "raw_grpc":
        return "gRPC bidi ping-pong (granary-bench's own arm)"
    if row["arm"] == "granary" and row["scenario"] == "postgres_floor":
        return "PostgreSQL floor (pgbench)"
    if row["arm"] == "granary" and row["scenario"] in ("balance", "balance_random"):
        return "Granary (%s, %s placement)" % (
            MODE_LABEL.get(row["mode"], row["mode"]),
            "RANDOM" if row["scenario"] == "balance_random" else "RESOURCE_OPTIMIZED")
    if row["arm"] == "granary" and row["scenario"].endswith("_unfiltered"):
        return "Granary (%s, twin silo without filters)" % MODE_LABEL.get(row["mode"],
                                                                         row["mode"])
    if row["arm"] == "granary":
        return "Granary (%s%s)" % (MODE_LABEL.get(row["mode"], row["mode"]),
                                   ", K=%d" % row["concurrency"]
                                   if row.get("concurrency", 0) > 1 else "")
    return {"caf": "CAF", "grpc": "gRPC", "erlang": "Erlang/OTP"}.get(row["arm"], row["arm"])
