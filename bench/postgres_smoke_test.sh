#!/bin/bash
# bench_postgres_smoke: the PostgreSQL arms of granary-bench run, on a
# throwaway server this script starts (scripts/throwaway-postgres.sh: fsync and
# synchronous_commit on):
#   1. --failover --cluster=postgres, one round of a few grains: a verified
#      failover row, and a FAILOVER line naming the seed and the victim;
#   2. --hosted --storage=postgres at a tiny size: verified storage rows,
#      the postgres_floor row (pgbench) and the RATIO line;
#   3. balance, one short round: verified rows of both placements and their
#      BALANCE lines;
#   4. scale at 4 silos, one killed: a verified scale_kill row and the SCALE
#      line.
# Every run must exit 0 with no unverified row, and the password must be in
# no output. No timing is asserted.
#
#   postgres_smoke_test.sh GRANARY_BENCH GRANARY_SILO
set -u
bench=$1
silo=$2
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/throwaway-postgres.sh
source "$here/../scripts/throwaway-postgres.sh"
trap pg_server_stop EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
pg_server_start || fail "no PostgreSQL server"
password=$(sed -n 's/.*password=\([^ ]*\).*/\1/p' "$pg_conninfo_file")

# run NAME COMMAND...: prints its output; fails on a non-zero exit, an
# unverified row or the password in the output.
out=""
run() {
  local name=$1
  shift
  out=$("$@" 2>&1)
  local rc=$?
  echo "$out"
  [[ $rc -eq 0 ]] || fail "$name exited with status $rc"
  [[ $out != *"verified=false"* ]] || fail "$name: a row is not verified"
  [[ -z $password || $out != *"$password"* ]] || fail "$name printed the password"
}
expect() {  # expect NAME REGEX: the last run's output matches REGEX
  [[ $out =~ $2 ]] || fail "$1: no match for '$2'"
}

run failover "$bench" --failover --cluster=postgres \
    --postgres_file="$pg_conninfo_file" --rounds=1 --failover_grains=60 \
    --failover_seed=7 --silo_binary="$silo"
expect failover 'FAILOVER round=0 cluster=postgres seed=7 victim=[0-2] '
expect failover 'SUMMARY scenario=failover mode=cluster-postgres .*verified=true'

run storage "$bench" --hosted --storage=postgres \
    --postgres_file="$pg_conninfo_file" --rounds=1 --warmup=0 --scale=0.01
for s in create wake durable-write warm-read postgres_floor; do
  expect storage "SUMMARY scenario=$s mode=hosted-postgres .*verified=true"
done
expect storage 'RATIO durable_write_p50_over_postgres_floor_p50=[0-9.]+ '
expect storage 'ENV postgres_version=[^ ]+ fsync=on synchronous_commit=on'
run balance "$bench" balance --postgres_file="$pg_conninfo_file" --rounds=1 \
    --balance_grains=6 --balance_ramp=2s --balance_measure=1s --silo_binary="$silo"
expect balance 'BALANCE round=0 placement=RESOURCE_OPTIMIZED silos=3 grains=6 cpu_s=[0-9.,]+ busiest_over_least=[0-9.]+ grains_per_silo=[0-9]+,[0-9]+,[0-9]+'
expect balance 'BALANCE round=0 placement=RANDOM '
expect balance 'SUMMARY scenario=balance mode=cluster-postgres .*verified=true'
expect balance 'SUMMARY scenario=balance_random mode=cluster-postgres .*verified=true'
# 20 silos as processes with default flags: all join, a leave is seen by
# all, and 2 killed at once lose no grain to a duplicate and disturb none.
run scale "$bench" scale --postgres_file="$pg_conninfo_file" --scale_silos=20 \
    --scale_kill=2 --scale_grains=400 --silo_binary="$silo"
expect scale 'SCALE silos=20 join_s=[0-9.]+ change_seen_ms=[0-9]+ rss_mb_median=[0-9.]+ rss_mb_max=[0-9.]+ threads_median=[0-9]+ threads_max=[0-9]+ db_xacts_per_s=[0-9]+ db_xacts_per_silo_s=[0-9.]+ row_bytes=[0-9]+ kill=2 moved=[0-9]+ all_recovered_s=[0-9.]+ disturbed=0 duplicates=0 unrecovered=0'
expect scale 'SUMMARY scenario=scale_kill mode=cluster-postgres .*verified=true'
echo PASS
