#!/usr/bin/python3
"""The silo's HTTP endpoint and logs, against a real granary-silo:

- /metrics parses with prometheus_client's text parser (not our own regex),
  has every documented family with the right type, and its values move as
  calls are made (requests, errors, activations, messages, storage, turns);
- /api/overview reports the same calls, activations and errors;
- / serves the dashboard page;
- bad HTTP input: unknown path 404, POST 405, oversized body 413, HEAD;
- --log_format=json writes one JSON object per line naming the silo, and a
  slow turn is logged with its grain and method;
- bad flags (--log_format, --slow_turn_threshold, --network_turns, a non-loopback --http
  without --http_token_file) are refused at start.

Usage: observability_test.py GRANARY_SILO GRANARY_CLI
"""
import http.client
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

silo_bin, cli_bin = sys.argv[1], sys.argv[2]
failures = []
checks = 0


def check(cond, what):
    global checks
    checks += 1
    if not cond:
        failures.append(what)
        print("FAILED:", what, file=sys.stderr)


def get(address, path):
    with urllib.request.urlopen("http://%s%s" % (address, path), timeout=30) as r:
        return r.status, r.headers.get("Content-Type"), r.read().decode()


def request(address, method, path, body=None, headers=None):
    host, port = address.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.request(method, path, body=body, headers=headers or {})
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return r.status, data


def scrape(address):
    """{family name: (type, {(sample name, frozenset(labels)): value})}"""
    status, ctype, text = get(address, "/metrics")
    check(status == 200, "/metrics status %d" % status)
    check(ctype.startswith("text/plain; version=0.0.4"), "/metrics content type %r" % ctype)
    out = {}
    for family in text_string_to_metric_families(text):
        samples = {}
        for s in family.samples:
            samples[(s.name, frozenset(s.labels.items()))] = s.value
        out[family.name] = (family.type, samples)
    return out


def value(metrics, family, sample, **labels):
    _, samples = metrics.get(family, (None, {}))
    return samples.get((sample, frozenset(labels.items())), 0.0)


def cli(gateway, *args):
    return subprocess.run([cli_bin, "--gateway=" + gateway] + list(args),
                          capture_output=True, text=True, timeout=60)


def start(tmp, *extra):
    silo = subprocess.Popen(
        [silo_bin, "--examples", "--gateway=127.0.0.1:0", "--silo=127.0.0.1:0", "--http=127.0.0.1:0",
         "--data_dir=" + os.path.join(tmp, "data")] + list(extra),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ready = silo.stdout.readline().split()
    if not ready or ready[0] != "READY":
        silo.kill()
        raise SystemExit("no READY line: %r %s" % (ready, silo.stderr.read()))
    fields = dict(f.split("=", 1) for f in ready[1:])
    return silo, fields["gateway"], fields["http"]


COUNTER = "granary.examples.Counter"
BANK = "granary.examples.BankAccount"
FAMILIES = {
    "granary_activations": "gauge",
    "granary_activations_created": "counter",
    "granary_activations_deactivated": "counter",
    "granary_messages": "counter",
    "granary_request_duration_seconds": "histogram",
    "granary_request_errors": "counter",
    "granary_mailbox_depth": "histogram",
    "granary_turn_duration_seconds": "histogram",
    "granary_slow_turns": "counter",
    "granary_directory_entries": "gauge",
    "granary_directory_lookups": "counter",
    "granary_calls_forwarded": "counter",
    "granary_membership_silos": "gauge",
    "granary_storage_operation_duration_seconds": "histogram",
    "granary_gateway_connections": "gauge",
    "granary_reminders": "gauge",
    "granary_reminder_ticks": "counter",
    "granary_silo_info": "gauge",
    "process_resident_memory_bytes": "gauge",
    "process_cpu_seconds": "counter",
    "process_open_fds": "gauge",
    "process_max_fds": "gauge",
}

with tempfile.TemporaryDirectory() as tmp:
    silo, gateway, address = start(tmp, "--log_format=json", "--slow_turn_threshold=1us")
    try:
        before = scrape(address)
        for name, kind in FAMILIES.items():
            check(name in before, "family %s present" % name)
            check(before.get(name, (None,))[0] == kind, "family %s is a %s" % (name, kind))
        check(value(before, "granary_membership_silos", "granary_membership_silos",
                    status="active") == 1, "membership: this silo is active")
        check(value(before, "process_resident_memory_bytes",
                    "process_resident_memory_bytes") > 0, "resident memory > 0")

        for i in range(5):
            r = cli(gateway, "call", "Counter/obs-%d" % (i % 2), "Add", '{"amount": 1}')
            check(r.returncode == 0, "Counter.Add: %r" % (r.stderr,))
        r = cli(gateway, "call", "BankAccount/obs", "Withdraw", '{"amount": 5}')
        check("FAILED_PRECONDITION" in r.stderr, "overdraft refused: %r" % (r.stderr,))
        r = cli(gateway, "call", "BankAccount/obs", "Deposit", '{"amount": 5}')
        check(r.returncode == 0, "deposit: %r" % (r.stderr,))

        after = scrape(address)
        count = "granary_request_duration_seconds_count"
        check(value(after, "granary_request_duration_seconds", count, type=COUNTER, method="Add")
              - value(before, "granary_request_duration_seconds", count, type=COUNTER, method="Add")
              == 5, "5 Counter.Add requests timed")
        check(value(after, "granary_request_duration_seconds",
                    "granary_request_duration_seconds_bucket", type=COUNTER, method="Add",
                    le="+Inf") == 5, "+Inf bucket holds all 5")
        check(value(after, "granary_request_errors", "granary_request_errors_total",
                    type=BANK, method="Withdraw", code="FAILED_PRECONDITION") == 1,
              "the overdraft counted as FAILED_PRECONDITION")
        check(value(after, "granary_activations", "granary_activations", type=COUNTER) == 2,
              "2 live Counter activations")
        check(value(after, "granary_activations_created", "granary_activations_created_total",
                    type=COUNTER) == 2, "2 Counter activations created")
        check(value(after, "granary_messages", "granary_messages_total",
                    direction="in", kind="request")
              - value(before, "granary_messages", "granary_messages_total",
                      direction="in", kind="request") >= 7, "requests received counted")
        check(value(after, "granary_directory_lookups", "granary_directory_lookups_total",
                    result="hit") >= 3, "directory hits")
        check(value(after, "granary_storage_operation_duration_seconds",
                    "granary_storage_operation_duration_seconds_count", op="write") >= 1,
              "a storage write timed")
        check(value(after, "granary_storage_operation_duration_seconds",
                    "granary_storage_operation_duration_seconds_count", op="read") >= 1,
              "a storage read timed")
        check(value(after, "granary_turn_duration_seconds",
                    "granary_turn_duration_seconds_count") >= 7, "turns timed")
        check(value(after, "granary_slow_turns", "granary_slow_turns_total") >= 7,
              "with a 1 us threshold every turn is slow")

        status, ctype, body = get(address, "/api/overview")
        check(status == 200 and ctype == "application/json", "/api/overview: %d %s" % (status, ctype))
        o = json.loads(body)
        check(o["silos"] and o["silos"][0]["status"] == "active", "overview silo active")
        methods = {(m["type"], m["method"]): m for m in o["methods"]}
        add = methods.get((COUNTER, "Add"))
        check(add is not None and add["callsTotal"] == 5 and add["callsPerS"] > 0
              and add["p99Ms"] > 0, "overview Counter.Add: %r" % (add,))
        withdraw = methods.get((BANK, "Withdraw"))
        check(withdraw is not None and withdraw["errorsLastMinute"] == 1,
              "overview Withdraw error: %r" % (withdraw,))
        types = {t["type"]: t for t in o["types"]}
        check(types.get(COUNTER, {}).get("activations") == 2, "overview Counter activations")
        check({"code": "FAILED_PRECONDITION", "count": 1} in o["errors"], "overview errors")
        check(isinstance(o["callsPerSecond"], list), "overview series")

        status, ctype, page = get(address, "/")
        check(status == 200 and ctype.startswith("text/html"), "/ is HTML")
        check("<title>Granary silo</title>" in page and "/api/overview" in page
              and "http://" not in page and "https://" not in page,
              "the dashboard is self-contained")

        # Bad input.
        status, _ = request(address, "GET", "/nope")
        check(status == 404, "unknown path: %d" % status)
        status, _ = request(address, "POST", "/metrics", body=b"x")
        check(status == 405, "POST: %d" % status)
        status, _ = request(address, "POST", "/metrics", body=b"x" * (100 * 1024))
        check(status == 413, "100 KiB body: %d" % status)
        status, data = request(address, "HEAD", "/metrics")
        check(status == 200 and data == b"", "HEAD: %d %r" % (status, data[:20]))
        check(get(address, "/healthz")[0] == 200, "still healthy")
    finally:
        silo.send_signal(signal.SIGTERM)
        code = silo.wait(timeout=60)
        err = silo.stderr.read()
    check(code == 0, "exit code %d after SIGTERM" % code)
    lines = [l for l in err.splitlines() if l.strip()]
    parsed = []
    for line in lines:
        try:
            parsed.append(json.loads(line))
        except ValueError:
            check(False, "log line is not JSON: %r" % line)
    check(all("ts" in p and p.get("level") in ("debug", "info", "warning", "error")
              for p in parsed), "every log line has ts and level")
    check(any(p.get("msg") == "started" and "silo" in p for p in parsed),
          "the start is logged with the silo")
    slow = [p for p in parsed if p.get("msg", "").startswith("slow turn")]
    check(any(p.get("grain", "").startswith(COUNTER + "/obs-") and p.get("method") == "Add"
              and "turn_ms" in p for p in slow), "a slow Counter.Add turn is logged")

    # Bad flags: refused before serving, with a message naming the flag.
    # (A value a flag's type cannot hold is refused by the flags library
    # itself, with status 1.)
    for flags, needle, code in [(["--log_format=xml"], "--log_format", 2),
                                (["--slow_turn_threshold=0s"], "--slow_turn_threshold", 2),
                                (["--http=0.0.0.0:0"], "--http_token_file", 2),
                                (["--network_turns=maybe"], "network_turns", 1)]:
        r = subprocess.run(
            [silo_bin, "--examples", "--gateway=127.0.0.1:0", "--silo=127.0.0.1:0",
             "--data_dir=" + os.path.join(tmp, "bad")] +
            ([] if any(f.startswith("--http=") for f in flags) else ["--http=127.0.0.1:0"]) + flags,
            capture_output=True, text=True, timeout=60)
        check(r.returncode == code and needle in r.stderr and r.stdout == "",
              "%s refused: %d %r" % (flags, r.returncode, r.stderr))

print("%d checks, %d failed" % (checks, len(failures)))
sys.exit(1 if failures else 0)
