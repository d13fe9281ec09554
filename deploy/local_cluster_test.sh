#!/usr/bin/env bash
# local-cluster.sh end to end: 3 silos come up, every one is Active in the
# table read through a gateway, the load generator's cluster scenarios run
# verified against them, a bad N is refused, and SIGTERM stops them all.
# (The script runs in the background here, where SIGINT is ignored;
# interactively Ctrl-C does the same.) MODE is dev (the default) or
# postgres: three equal silos on a PostgreSQL server the script starts and
# stops itself.
#
#   local_cluster_test.sh SCRIPT BIN_DIR [dev|postgres]
set -euo pipefail
script=$1
bin=$2
mode=${3:-dev}
flags=()
[ "$mode" = dev ] || flags=(--postgres)
work=$(mktemp -d)
cluster_pid=""
cleanup() {
  if [ -n "$cluster_pid" ]; then
    kill -TERM "$cluster_pid" 2>/dev/null || true
    wait "$cluster_pid" 2>/dev/null || true  # it stops its silos first
  fi
  rm -rf "$work"
}
trap cleanup EXIT

fail() { echo "FAILED: $*" >&2; exit 1; }

GRANARY_BIN=$bin bash "$script" 0 > "$work/bad.out" 2> "$work/bad.err" && fail "N=0 accepted"
grep -q "usage" "$work/bad.err" || fail "N=0: no usage message"
GRANARY_BIN=$bin bash "$script" 3 --postgres= > "$work/bad.out" 2> "$work/bad.err" \
  && fail "an empty --postgres= accepted"
grep -q "usage" "$work/bad.err" || fail "--postgres=: no usage message"
GRANARY_BIN=$bin bash "$script" 3 --bogus > "$work/bad.out" 2> "$work/bad.err" \
  && fail "--bogus accepted"
grep -q "usage" "$work/bad.err" || fail "--bogus: no usage message"

GRANARY_BIN=$bin GRANARY_CLUSTER_DIR=$work/data bash "$script" 3 "${flags[@]}" \
  > "$work/out" 2> "$work/err" &
cluster_pid=$!
for _ in $(seq 1 2000); do
  grep -q "Ctrl-C stops" "$work/out" 2>/dev/null && break
  kill -0 "$cluster_pid" 2>/dev/null || { cat "$work/err" >&2; fail "the script exited"; }
  sleep 0.1
done
grep -q "Ctrl-C stops" "$work/out" || fail "no cluster after 200 s"
gateways=$(sed -n 's/^GATEWAYS=//p' "$work/out")
[ "$(tr ',' '\n' <<< "$gateways" | wc -l)" -eq 3 ] || fail "gateways: $gateways"
first=${gateways%%,*}
for _ in $(seq 1 100); do
  table=$("$bin/granary" --gateway="$first" cluster || true)
  [ "$(grep -c ' active ' <<< "$table")" -eq 3 ] && break
  sleep 0.1
done
[ "$(grep -c ' active ' <<< "$table")" -eq 3 ] || fail "not 3 active: $table"

# The load generator against it: a chain whose every link is on another silo
# than the one before, one-hop asks, and cross-silo asks (--one_hop=false).
# It exits non-zero when any round is not verified.
"$bin/granary-bench" --target="$gateways" --scenarios=chain,ask --rounds=1 \
    --warmup=0 --scale=0.02 > "$work/bench.out" 2>&1 \
  || { cat "$work/bench.out" >&2; fail "granary-bench (one hop)"; }
forwarded() {  # granary_calls_forwarded_total of silo 0 (the first gateway's)
  /usr/bin/python3 -c 'import sys, urllib.request
for line in urllib.request.urlopen(sys.argv[1]).read().decode().splitlines():
    if line.startswith("granary_calls_forwarded_total "): print(int(float(line.split()[1])))' \
    "http://$(sed -n 's/^silo 0: .*http=\([^ ]*\).*/\1/p' "$work/out")/metrics"
}
before=$(forwarded)
"$bin/granary-bench" --target="$gateways" --one_hop=false --scenarios=ask \
    --rounds=1 --warmup=0 --scale=0.02 > "$work/bench2.out" 2>&1 \
  || { cat "$work/bench2.out" >&2; fail "granary-bench --one_hop=false"; }
grep -q "one_hop=false" "$work/bench2.out" || fail "no one_hop=false in: $(cat "$work/bench2.out")"
# Every cross-silo ask (100 at this scale) went in at the first gateway and
# was passed on from there.
passed_on=$(( $(forwarded) - before ))
[ "$passed_on" -ge 100 ] || fail "only $passed_on calls forwarded by silo 0 in the cross-silo ask"

pids=$(pgrep -f "granary-silo .*--data_dir=$work/data" || true)
if [ "$mode" = postgres ]; then
  # Equal silos: none names a primary; all are on the script's server.
  for pid in $pids; do
    args=$(tr '\0' ' ' < "/proc/$pid/cmdline")
    [[ "$args" == *--cluster=postgres* && "$args" != *--primary* ]] \
      || fail "silo $pid: $args"
  done
  pg_line=$(grep "^PostgreSQL: " "$work/out") || fail "no PostgreSQL line in: $(cat "$work/out")"
  pg_data=$(sed -n 's/.*data and log in \([^;]*\);.*/\1/p' <<< "$pg_line")
  [ -d "$pg_data/data" ] || fail "no server directory $pg_data/data"
fi
[ "$(wc -w <<< "$pids")" -eq 3 ] || fail "expected 3 silo processes, found: $pids"
kill -TERM "$cluster_pid"
wait "$cluster_pid" || fail "the script exited non-zero after SIGTERM"
cluster_pid=""
for pid in $pids; do
  ! kill -0 "$pid" 2>/dev/null || fail "silo $pid still running"
done
if [ "$mode" = postgres ]; then
  # The throwaway server stopped with the cluster.
  ! pgrep -f "postgres -D $pg_data/data" > /dev/null || fail "PostgreSQL still running"
  grep -q "password=" "$work/err" && fail "a password in the script's output"
  rm -rf "$pg_data"
fi
echo "local-cluster.sh ($mode): 3 silos, all active, stopped on SIGTERM"
