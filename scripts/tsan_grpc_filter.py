#!/usr/bin/python3
"""Reads ThreadSanitizer output and keeps the races that are Granary's.

Debian's gRPC is not built with TSan, so every object handed across its
synchronization shows up as a race. A report is kept when the top frame of
both of its accesses is in this repository's sources (not generated code):
those races cannot be explained by gRPC's invisible locking.

Usage: tsan_grpc_filter.py REPO_DIR LOG...   (exit 1 when any report is kept)
"""
import re
import sys

repo = sys.argv[1].rstrip("/") + "/"
kept = 0
total = 0
for path in sys.argv[2:]:
    with open(path, errors="replace") as f:
        log = f.read()
    for report in log.split("WARNING: ThreadSanitizer")[1:]:
        total += 1
        blocks = re.findall(
            r"(?:(?:Write|Read|Atomic \w+|Previous \w+(?: \w+)?) of size.*?\n)"
            r"((?:\s+#\d+ .*\n)+)", report)
        tops = []
        for b in blocks:
            frames = re.findall(r"#\d+ (.*?) (\S+:\d+)", b)
            if frames:
                tops.append(frames[0][1])
        if len(tops) >= 2 and all(t.startswith(repo) and "/gen/" not in t
                                  for t in tops[:2]):
            kept += 1
            print("%s:%s" % (path, report[:3000]))
print("tsan_grpc_filter: %d reports, %d in Granary code" % (total, kept))
sys.exit(1 if kept else 0)
