#!/usr/bin/env bash
# Remote calls with and without TLS, side by side: one plaintext and one
# TLS granary-silo (development certificates of scripts/dev-certs.sh) run at
# once, and granary-bench alternates between them PAIRS times (ask and
# oneway), so both see the same machine. Prints each run's SUMMARY lines and
# the medians over the runs, with TLS / plaintext ratios.
#
#   bench/tls_compare.sh BUILD_DIR [PAIRS (5)] [SCALE (0.5)]
set -euo pipefail
build=${1:?usage: tls_compare.sh BUILD_DIR [PAIRS] [SCALE]}
pairs=${2:-5}
scale=${3:-0.5}
[[ "$pairs" =~ ^[1-9][0-9]*$ ]] || { echo "tls_compare.sh: PAIRS must be a positive integer" >&2; exit 2; }
bin="$build/bin"
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
bash "$here/../scripts/dev-certs.sh" "$work/certs" > /dev/null

# start NAME [FLAGS...]: a silo; its gateway in $work/NAME.gateway once
# it is ready.
start() {
  local name=$1
  shift
  mkfifo "$work/$name.ready"
  "$bin/granary-silo" --gateway=127.0.0.1:0 --silo=127.0.0.1:0 --http=127.0.0.1:0 \
      --data_dir="$work/$name" --log_level=warning --bench_grains "$@" \
      > "$work/$name.ready" 2> "$work/$name.log" &
  pids+=($!)
  local line
  read -r -t 60 line < "$work/$name.ready" \
    || { echo "tls_compare.sh: silo $name did not start" >&2; cat "$work/$name.log" >&2; exit 1; }
  sed -n 's/^READY gateway=\([^ ]*\).*/\1/p' <<< "$line" > "$work/$name.gateway"
}
start plain
start tls --tls_cert="$work/certs/gateway.pem" --tls_key="$work/certs/gateway.key"
plain=$(cat "$work/plain.gateway")
tls=$(cat "$work/tls.gateway")

for i in $(seq 1 "$pairs"); do
  "$bin/granary-bench" --target="$plain" --scenarios=ask,oneway --rounds=3 --warmup=1 \
      --scale="$scale" | grep '^SUMMARY' | sed "s/^/plaintext /"
  "$bin/granary-bench" --target="$tls" --tls_ca="$work/certs/ca.pem" --scenarios=ask,oneway \
      --rounds=3 --warmup=1 --scale="$scale" | grep '^SUMMARY' | sed "s/^/tls /"
done | tee "$work/summaries"

/usr/bin/python3 - "$work/summaries" <<'PY'
import re, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    m = re.match(r"(\w+) SUMMARY scenario=(\w+) .*mean_rate=([\d.]+) .*p50_us=([\d.]+) p99_us=([\d.]+)", line)
    if m:
        arm, scenario, rate, p50, p99 = m.groups()
        runs.setdefault((arm, scenario), []).append((float(rate), float(p50), float(p99)))
def med(arm, scenario, i):
    return statistics.median(r[i] for r in runs[(arm, scenario)])
print("MEDIANS over %d runs each (TLS / plaintext):" % len(runs[("tls", "ask")]))
print("ask p50 %.1f us vs %.1f us (x%.2f)" % (med("tls", "ask", 1), med("plaintext", "ask", 1),
                                             med("tls", "ask", 1) / med("plaintext", "ask", 1)))
print("ask p99 %.1f us vs %.1f us (x%.2f)" % (med("tls", "ask", 2), med("plaintext", "ask", 2),
                                             med("tls", "ask", 2) / med("plaintext", "ask", 2)))
print("oneway %.0f/s vs %.0f/s (x%.2f)" % (med("tls", "oneway", 0), med("plaintext", "oneway", 0),
                                          med("tls", "oneway", 0) / med("plaintext", "oneway", 0)))
PY
