#!/usr/bin/python3
"""Starts granary-silo on free ports and calls a grain from Python using only
protoc's Python output and grpcio (examples/python/counter_client.py)."""
import os
import signal
import subprocess
import sys
import tempfile

silo_bin, protoc, source = sys.argv[1], sys.argv[2], sys.argv[3]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAILED:", what, file=sys.stderr)


with tempfile.TemporaryDirectory() as tmp:
    gen = os.path.join(tmp, "gen")
    os.makedirs(gen)
    # -I proto first, so options.proto gets its import name granary/options.proto.
    subprocess.run([protoc, "-I", os.path.join(source, "proto"), "-I", source,
                    "--python_out=" + gen, os.path.join(source, "examples/counter.proto"),
                    os.path.join(source, "proto/granary/options.proto")], check=True)
    silo = subprocess.Popen(
        [silo_bin, "--examples", "--gateway=127.0.0.1:0", "--silo=127.0.0.1:0", "--http=127.0.0.1:0",
         "--data_dir=" + os.path.join(tmp, "data"), "--log_level=warning"],
        stdout=subprocess.PIPE, text=True)
    try:
        ready = silo.stdout.readline().split()
        check(ready and ready[0] == "READY", "READY line")
        gateway = dict(f.split("=", 1) for f in ready[1:])["gateway"]
        client = [sys.executable, os.path.join(source, "examples/python/counter_client.py"),
                  "--gen=" + gen, "--gateway=" + gateway]

        def call(key, amount):
            return subprocess.run(client + ["--key=" + key, "--add=" + str(amount)],
                                  capture_output=True, text=True, timeout=60)

        r = call("py-alice", 5)
        check(r.returncode == 0 and r.stdout.strip() == "5", "first add: %r" % (r,))
        r = call("py-alice", 2)
        check(r.returncode == 0 and r.stdout.strip() == "7", "second add: %r" % (r,))
        r = call("", 1)
        check(r.returncode != 0 and "INVALID_ARGUMENT" in r.stderr, "empty key: %r" % (r,))
    finally:
        silo.send_signal(signal.SIGTERM)
        code = silo.wait(timeout=60)
    check(code == 0, "exit code %d after SIGTERM" % code)

print("%d passed, %d failed" % (4 - len(failures), len(failures)))
sys.exit(1 if failures else 0)
