#!/usr/bin/python3
"""Slow HTTP clients cannot starve a silo's probes. 400 connections from one
address each send a request's header lines one every 0.5 s and never finish
(slowloris), reconnecting whenever the silo closes them; meanwhile /healthz
and /readyz, asked from another address, must answer within 1 s every time
(a Kubernetes liveness probe allows 3 s, three times). The silo runs with its
default flags. The flood comes from 127.0.0.2 (all of 127/8 is loopback) and
the probes from 127.0.0.1, as a kubelet's probes come from the node's address
and not from the attacking pods'.

  http_slowloris_test.py GRANARY_SILO
"""
import os
import resource
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time

silo_bin = sys.argv[1]
failures = []

soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

CONNECTIONS = 400


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAILED:", what, file=sys.stderr)


def get(address, path, source="127.0.0.1", timeout=10.0):
    """(status line, seconds taken); status '' on a timeout or a reset."""
    host, port = address.rsplit(":", 1)
    start = time.monotonic()
    try:
        s = socket.create_connection((host, int(port)), timeout=timeout,
                                     source_address=(source, 0))
        s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" %
                   (path, address)).encode())
        data = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        s.close()
        return data.split(b"\r\n", 1)[0].decode(), time.monotonic() - start
    except OSError:
        return "", time.monotonic() - start


class Slowloris:
    """CONNECTIONS connections from 127.0.0.2, each dribbling header lines."""

    def __init__(self, address):
        host, port = address.rsplit(":", 1)
        self.target = (host, int(port))
        self.stop = threading.Event()
        self.opened = 0
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def connect(self):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        s.bind(("127.0.0.2", 0))
        try:
            s.connect(self.target)
        except BlockingIOError:
            pass
        self.opened += 1
        return s

    def run(self):
        socks = {}
        while not self.stop.is_set():
            while len(socks) < CONNECTIONS:
                socks[self.connect()] = 0
            for s in list(socks):
                try:
                    line = (b"GET /metrics HTTP/1.1\r\n" if socks[s] == 0 else
                            b"X-Slow-%d: x\r\n" % socks[s])
                    s.send(line)
                    socks[s] += 1
                except (BlockingIOError, InterruptedError):
                    pass
                except OSError:  # closed by the silo: come back at once
                    s.close()
                    del socks[s]
            readable, _, _ = select.select(list(socks), [], [], 0) if socks else ([], [], [])
            for s in readable:  # an answer or a close: drop and reconnect
                try:
                    data = s.recv(4096)
                except OSError:
                    data = b""
                if not data:
                    s.close()
                    socks.pop(s, None)
            self.stop.wait(0.5)
        for s in socks:
            s.close()


def main():
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.Popen(
            [silo_bin, "--gateway=127.0.0.1:0", "--silo=127.0.0.1:0", "--http=127.0.0.1:0",
             "--data_dir=" + os.path.join(tmp, "data"), "--log_level=warning"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            ready = proc.stdout.readline().split()
            assert ready and ready[0] == "READY", ready
            fields = dict(f.split("=", 1) for f in ready[1:])
            http = fields["http"]
            status, _ = get(http, "/healthz")
            check("200" in status, "healthz before the flood: %r" % status)

            flood = Slowloris(http)
            time.sleep(3)  # every connection open, civetweb's workers taken
            worst = 0.0
            answered = 0
            for i in range(16):
                path = "/healthz" if i % 2 == 0 else "/readyz"
                status, took = get(http, path, timeout=10)
                worst = max(worst, took)
                if "200" in status:
                    answered += 1
                check("200" in status and took < 1.0,
                      "%s during the flood: %r after %.2f s" % (path, status, took))
                time.sleep(0.4)
            print("probes during the slowloris flood: %d/16 answered 200, slowest %.3f s; "
                  "%d flood connections opened" % (answered, worst, flood.opened))
            flood.stop.set()
            flood.thread.join()
            check(proc.poll() is None, "the silo died during the flood")
            time.sleep(0.5)
            status, took = get(http, "/healthz")
            check("200" in status, "healthz after the flood: %r" % status)
        finally:
            proc.terminate()
            try:
                proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
    if failures:
        print("%d failure(s)" % len(failures), file=sys.stderr)
        sys.exit(1)
    print("ok")


main()
