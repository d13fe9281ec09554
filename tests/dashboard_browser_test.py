#!/usr/bin/python3
"""The dashboard in a real browser: headless Chromium loads `/` from a
granary-silo under light load, the test waits until the page's activation
table shows the grain types that were called (the page polls
/api/overview), then saves a screenshot (removing any left by an earlier run first, so
only this run's can pass).

Usage: dashboard_browser_test.py GRANARY_SILO GRANARY_CLI CHROMIUM SCREENSHOT
"""
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

silo_bin, cli_bin, chromium, screenshot = sys.argv[1:5]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAILED:", what, file=sys.stderr)


def browser(profile, *args):
    # No sandbox (tests run as root in containers), no GPU, and nothing that
    # reaches the network on its own.
    return subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--disable-component-update",
         "--disable-default-apps", "--disable-sync", "--no-first-run",
         "--disable-dev-shm-usage", "--user-data-dir=" + profile,
         "--virtual-time-budget=3000"] + list(args),
        capture_output=True, text=True, timeout=120)


with tempfile.TemporaryDirectory() as tmp:
    silo = subprocess.Popen(
        [silo_bin, "--examples", "--gateway=127.0.0.1:0", "--silo=127.0.0.1:0", "--http=127.0.0.1:0",
         "--data_dir=" + os.path.join(tmp, "data"), "--log_level=warning"],
        stdout=subprocess.PIPE, text=True)
    stop = threading.Event()
    try:
        ready = silo.stdout.readline().split()
        check(ready and ready[0] == "READY", "READY line: %r" % (ready,))
        fields = dict(f.split("=", 1) for f in ready[1:])
        gateway, address = fields["gateway"], fields["http"]

        def load():
            i = 0
            while not stop.is_set():
                subprocess.run([cli_bin, "--gateway=" + gateway, "call",
                                "Counter/web-%d" % (i % 3), "Add", '{"amount": 1}'],
                               capture_output=True, timeout=60)
                subprocess.run([cli_bin, "--gateway=" + gateway, "call",
                                "Ping/web", "Ping", '{"message": "hi"}'],
                               capture_output=True, timeout=60)
                i += 1
                stop.wait(0.2)

        loader = threading.Thread(target=load)
        loader.start()
        url = "http://%s/" % address
        wanted = ["granary.examples.Counter", "granary.examples.Ping"]
        dom = ""
        deadline = time.time() + 90
        while time.time() < deadline:
            r = browser(os.path.join(tmp, "profile"), "--dump-dom", url)
            m = re.search(r'<table id="types">.*?</table>', r.stdout, re.S)
            dom = m.group(0) if m else r.stdout[-2000:]
            if m and all("<td>%s</td>" % t in dom for t in wanted):
                break
            time.sleep(1)
        check(all("<td>%s</td>" % t in dom for t in wanted),
              "activation table shows the called types: %s" % dom)
        # A screenshot left over from an earlier run proves nothing: only
        # the file this run writes counts.
        if os.path.lexists(screenshot):
            os.remove(screenshot)
        check(not os.path.lexists(screenshot), "old screenshot removed")
        r = browser(os.path.join(tmp, "profile"), "--hide-scrollbars",
                    "--window-size=1400,1000", "--screenshot=" + screenshot, url)
        check(r.returncode == 0, "chromium exit code %d: %s"
              % (r.returncode, r.stderr[-500:]))
        check(os.path.exists(screenshot), "screenshot written: %s" % r.stderr[-500:])
        if os.path.exists(screenshot):
            with open(screenshot, "rb") as f:
                check(f.read(8) == b"\x89PNG\r\n\x1a\n", "screenshot is a PNG")
            print("screenshot:", screenshot)
    finally:
        stop.set()
        silo.send_signal(signal.SIGTERM)
        code = silo.wait(timeout=60)
    check(code == 0, "exit code %d after SIGTERM" % code)

print("%d failed" % len(failures))
sys.exit(1 if failures else 0)
