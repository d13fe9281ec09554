#!/usr/bin/python3
"""A flood of idle TCP connections, with no credentials, cannot stop a silo's
gRPC listener. gRPC 1.51 stops a listener for good on its first accept EMFILE;
each phase runs a granary-silo of its own at an open-file limit of 1,024 (soft
and hard, so the silo cannot raise it) and checks that a calm client is
served during or after the flood, and that /healthz and /readyz tell the
truth.

  connection_flood_test.py GRANARY_SILO GRANARY_CLI
"""
import json
import os
import resource
import select
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

silo_bin, cli_bin = sys.argv[1], sys.argv[2]
failures = []
checks = 0


def check(cond, what):
    global checks
    checks += 1
    if not cond:
        failures.append(what)
        print("FAILED:", what, file=sys.stderr)


# The flood itself needs more than 1,024 descriptors in this process.
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def limit_files():
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))


class Silo:
    def __init__(self, tmp, extra):
        self.proc = subprocess.Popen(
            [silo_bin, "--examples", "--gateway=127.0.0.1:0", "--silo=127.0.0.1:0", "--http=127.0.0.1:0",
             "--data_dir=" + os.path.join(tmp, "data"), "--log_level=warning"] + extra,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=limit_files)
        ready = self.proc.stdout.readline().split()
        if not ready or ready[0] != "READY":
            raise RuntimeError("no READY line: %r" % ready)
        fields = dict(f.split("=", 1) for f in ready[1:])
        self.gateway, self.http = fields["gateway"], fields["http"]
        self.port = int(self.gateway.rsplit(":", 1)[1])

    def call(self, key):
        return subprocess.run([cli_bin, "--gateway=" + self.gateway, "--timeout=20s", "call",
                               "Counter/" + key, "Add", '{"amount": 1}'],
                              capture_output=True, text=True, timeout=60)

    def get(self, path):
        try:
            with urllib.request.urlopen("http://%s%s" % (self.http, path), timeout=10) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def metric(self, name, labels):
        _, text = self.get("/metrics")
        for line in text.splitlines():
            if line.startswith(name + "{") and all(l in line for l in labels):
                return float(line.rsplit(" ", 1)[1])
        return None

    def stop(self):
        self.proc.terminate()
        try:
            _, err = self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        return self.proc.returncode, err


def flood(port, sources, per_source):
    """Idle TCP connections (no TLS, no HTTP/2 preface) from each source."""
    socks = []
    for src in sources:
        for _ in range(per_source):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((src, 0))
            s.setblocking(False)
            try:
                s.connect(("127.0.0.1", port))
            except BlockingIOError:
                pass
            socks.append(s)
    return socks


def closed_by_server(socks, wait):
    """How many of `socks` the server closed within `wait` seconds."""
    deadline = time.time() + wait
    by_fd = {s.fileno(): s for s in socks}
    poller = select.poll()
    for fd in by_fd:
        poller.register(fd, select.POLLIN)
    closed = 0
    while by_fd and time.time() < deadline:
        for fd, _ in poller.poll(200):
            s = by_fd.pop(fd, None)
            if s is None:
                continue
            poller.unregister(fd)
            try:
                if not s.recv(1):
                    closed += 1
            except BlockingIOError:
                pass
            except OSError:
                closed += 1
    return closed


with tempfile.TemporaryDirectory() as tmp:
    # 1. Default flags: 1,100 idle connections from one address. The
    # per-peer cap closes all but its share at once; a client elsewhere is
    # served during the flood and after it.
    silo = Silo(os.path.join(tmp, "1"), [])
    try:
        socks = flood(silo.port, ["127.0.0.2"], 1100)
        closed = closed_by_server(socks, 3)
        check(closed >= 1000, "one peer's flood is capped: %d of 1100 closed" % closed)
        r = silo.call("during")
        check(r.returncode == 0, "a call during the flood: %r" % (r,))
        check(silo.get("/healthz")[0] == 200 and silo.get("/readyz")[0] == 200,
              "healthy and ready during the flood")
        refused = silo.metric("granary_listener_refused_total",
                              ['listener="gateway"', 'reason="max_per_peer"'])
        check(refused is not None and refused >= 1000, "refusals counted: %r" % refused)
        for s in socks:
            s.close()
        r = silo.call("after")
        check(r.returncode == 0, "a call after the flood: %r" % (r,))
    finally:
        code, err = silo.stop()
    check(code == 0, "exit 0 after SIGTERM: %d %s" % (code, err[-2000:]))

    # 2. Default flags: 1,200 connections from 40 addresses, past the
    # listener's cap; then the flood goes away and the silo serves again.
    silo = Silo(os.path.join(tmp, "2"), [])
    try:
        socks = flood(silo.port, ["127.0.0.%d" % i for i in range(10, 50)], 30)
        closed = closed_by_server(socks, 3)
        check(closed >= 1200 - 384, "the listener's cap holds: %d of 1200 closed" % closed)
        for s in socks:
            s.close()
        r = silo.call("after-many")
        check(r.returncode == 0, "a call after a flood past the cap: %r" % (r,))
        check(silo.get("/healthz")[0] == 200, "healthy after the flood")
    finally:
        code, err = silo.stop()
    check(code == 0, "exit 0 after SIGTERM: %d %s" % (code, err[-2000:]))

    # 3. Caps above the open-file limit (--max_connections=5000), so the
    # flood does reach EMFILE: the listener sheds what it cannot hold and
    # keeps accepting. This is where gRPC alone stops for good.
    silo = Silo(os.path.join(tmp, "3"),
                ["--max_connections=5000", "--max_connections_per_peer=5000"])
    try:
        socks = flood(silo.port, ["127.0.0.2"], 1100)
        time.sleep(2)
        shed = silo.metric("granary_listener_refused_total",
                           ['listener="gateway"', 'reason="fd_limit"'])
        check(shed is not None and shed > 0, "the open-file limit was reached: %r" % shed)
        for s in socks:
            s.close()
        time.sleep(1)
        r = silo.call("after-emfile")
        check(r.returncode == 0, "a call after EMFILE: %r" % (r,))
        status, body = silo.get("/readyz")
        check(status == 200, "ready after EMFILE: %d %s" % (status, body))
    finally:
        code, err = silo.stop()
    check(code == 0, "exit 0 after SIGTERM: %d %s" % (code, err[-2000:]))
    check("Failed accept4" not in err, "gRPC never saw an accept error")

    # 4. Bad flags are refused with a clear error.
    for bad, word in [("--max_connections=-1", "--max_connections"),
                      ("--max_connections_per_peer=-5", "--max_connections_per_peer"),
                      ("--handshake_timeout=0s", "--handshake_timeout"),
                      ("--listener_probe_period=1ms", "--listener_probe_period")]:
        r = subprocess.run([silo_bin, "--examples", "--gateway=127.0.0.1:0", "--silo=127.0.0.1:0",
                            "--http=127.0.0.1:0", "--data_dir=" + os.path.join(tmp, "bad"), bad],
                           capture_output=True, text=True, timeout=60)
        check(r.returncode != 0 and word in r.stderr, "%s refused: %r" % (bad, r.stderr[-500:]))

    # 5. --help lists the flags, under their source paths.
    for binary, flag in [(silo_bin, "--max_connections"), (cli_bin, "--token_file")]:
        r = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=60)
        out = r.stdout + r.stderr
        check(flag in out and "No flags matched" not in out and "Flags from /" not in out,
              "%s --help lists %s: %r" % (os.path.basename(binary), flag, out[:300]))

print("%d passed, %d failed" % (checks - len(failures), len(failures)))
sys.exit(1 if failures else 0)
