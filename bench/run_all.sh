#!/usr/bin/env bash
# Runs every benchmark arm one after another on this machine and regenerates
# bench/RESULTS.md from their JSON reports (bench/make_results.py).
#
#   bench/run_all.sh BUILD_DIR full     # make bench: about 10 minutes
#   bench/run_all.sh BUILD_DIR quick    # make bench-quick: about 1 minute
#
# Arms: granary-bench hosted (profiled; and its memory scenario, a run of
# its own); a granary-silo started here on free ports and granary-bench
# --target against it (profiled), the memory scenario against a fresh one, then the same
# (ask, oneway) against a
# granary-silo serving TLS; the comparison arms granary-compare-caf
# and granary-compare-grpc when built, and the Erlang/OTP arm
# (bench/compare/erlang/granary_compare.escript) when `escript` is found;
# granary-bench failover on a dev
# cluster; granary-bench overload; and the PostgreSQL arms on a throwaway PostgreSQL server started
# here (scripts/throwaway-postgres.sh; fsync and synchronous_commit on, since they
# measure synced commits; stopped at exit): --failover --cluster=postgres,
# and --hosted --storage=postgres (the storage scenarios and PostgreSQL's own
# floor, pgbench's synced UPDATE). Exits non-zero when an arm fails or a row
# is not verified (the report then refuses that row).
#
# The report opens with what changed since the previous full run, whose JSON
# reports are kept in bench/baseline/ (bench/baseline/README.md): a full run
# compares with them, then replaces them with its own; a quick run prints
# the comparison too, and leaves them alone.
set -uo pipefail

build=${1:?usage: run_all.sh BUILD_DIR full|quick}
size=${2:-full}
bin="$build/bin"
here=$(cd "$(dirname "$0")" && pwd)
out_md="$here/RESULTS.md"
out_png="$here/results_latency.png"
baseline="$here/baseline"
command="make bench"

case "$size" in
  full)  rounds=5; filter_rounds=15; hosted_scale=5; remote_scale=1; arm_scale=1
         failover_rounds=3; failover_grains=3000; pg_scale=1
         balance_rounds=3; balance_ramp=20s; balance_measure=10s
         scale_silos=100; scale_kill=10; scale_grains=3000
         overload_rounds=3; overload_time=10s; memory_scale=1 ;;
  quick) rounds=2; filter_rounds=3; hosted_scale=0.5; remote_scale=0.2; arm_scale=0.2
         failover_rounds=1; failover_grains=300; pg_scale=0.1
         balance_rounds=1; balance_ramp=8s; balance_measure=4s
         scale_silos=10; scale_kill=2; scale_grains=500
         overload_rounds=1; overload_time=3s; memory_scale=0.1
         command="make bench-quick"
         out_md="$build/RESULTS-quick.md"; out_png="$build/results_latency-quick.png" ;;
  *) echo "run_all.sh: size must be full or quick" >&2; exit 2 ;;
esac

work=$(mktemp -d)
silo_pid=""
other_pid=""  # the first silo of the cross-silo pair, while the second runs
# shellcheck source=scripts/throwaway-postgres.sh
source "$here/../scripts/throwaway-postgres.sh"
cleanup() {
  for pid in "$silo_pid" "$other_pid"; do
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid" 2>/dev/null
      wait "$pid" 2>/dev/null
    fi
  done
  pg_server_stop
  rm -rf "$work"
}
trap cleanup EXIT

status=0
run() {  # run NAME COMMAND...: prints the command, keeps going on failure
  echo "== $1: ${*:2}"
  "${@:2}" | grep -E '^(SUMMARY|RATIO|ENV|FAILOVER|OVERLOAD|PROFILE)' || true
  local rc=${PIPESTATUS[0]}
  if [ "$rc" -ne 0 ]; then
    echo "== $1 exited $rc" >&2
    status=1
  fi
}

reports=()

# 1. Hosted: the silo in the benchmark process.
run hosted "$bin/granary-bench" hosted --rounds="$rounds" --warmup=1 \
    --scale="$hosted_scale" --profile --json="$work/hosted.json"
reports+=("$work/hosted.json")
run hosted-k16 "$bin/granary-bench" hosted --rounds="$rounds" --warmup=1 \
    --scale="$hosted_scale" --scenarios=ask --concurrency=16 \
    --json="$work/hosted-k16.json"
reports+=("$work/hosted-k16.json")
# The call filter goals ask for a 5% resolution: ask and chain on twin silos
# with and without an empty filter chain (and on the main silo: an A/A
# check), in a run of their own with more rounds.
run hosted-filters "$bin/granary-bench" hosted --run_name=hosted-filters \
    --scenarios=ask,ask_unfiltered,ask_filtered,chain,chain_unfiltered,chain_filtered \
    --rounds="$filter_rounds" \
    --warmup=1 --scale="$hosted_scale" --profile --json="$work/hosted-filters.json"
reports+=("$work/hosted-filters.json")
# What an idle activation weighs: its own run, since the activations stay.
run hosted-memory "$bin/granary-bench" hosted --storage=memory \
    --scenarios=memory --rounds="$rounds" --warmup=0 --scale="$memory_scale" \
    --json="$work/hosted-memory.json"
reports+=("$work/hosted-memory.json")

# start_silo NAME [FLAGS...]: a granary-silo on free ports with the bench
# grains and the examples (the push scenario's Chat room; a silo hosts
# them only with --examples), its data and log under $work/NAME; sets
# `gateway` and `silo_address` once ready, or leaves them empty (status 1,
# the log shown).
start_silo() {
  local name=$1
  shift
  mkfifo "$work/$name.ready"
  "$bin/granary-silo" --gateway=127.0.0.1:0 --silo=127.0.0.1:0 \
      --http=127.0.0.1:0 --data_dir="$work/$name-data" --log_level=warning \
      --bench_grains --examples \
      "$@" > "$work/$name.ready" 2> "$work/$name.log" &
  silo_pid=$!
  gateway=""
  silo_address=""
  if read -r -t 60 line < "$work/$name.ready"; then
    gateway=$(sed -n 's/^READY gateway=\([^ ]*\).*/\1/p' <<< "$line")
    silo_address=$(sed -n 's/^READY .*silo=\([^ ]*\).*/\1/p' <<< "$line")
  fi
  if [ -z "$gateway" ]; then
    echo "run_all.sh: granary-silo $name did not become ready:" >&2
    cat "$work/$name.log" >&2
    status=1
  fi
}
# stop_silo: SIGTERM, and a clean exit expected.
stop_silo() {
  kill -TERM "$silo_pid"
  if ! wait "$silo_pid"; then
    echo "run_all.sh: granary-silo did not exit cleanly" >&2
    status=1
  fi
  silo_pid=""
}

# 2. Remote: a granary-silo on free ports, called through its gateway.
start_silo silo
if [ -n "$gateway" ]; then
  run remote "$bin/granary-bench" remote --target="$gateway" --own_pids="$silo_pid" --rounds="$rounds" \
      --warmup=1 --scale="$remote_scale" --profile --silo_pid="$silo_pid" \
      --json="$work/remote.json"
  reports+=("$work/remote.json")
  run remote-k16 "$bin/granary-bench" remote --target="$gateway" --own_pids="$silo_pid" --rounds="$rounds" \
      --warmup=1 --scale="$remote_scale" --scenarios=ask --concurrency=16 \
      --json="$work/remote-k16.json"
  reports+=("$work/remote-k16.json")
  stop_silo
fi
start_silo silo-memory
if [ -n "$gateway" ]; then
  run remote-memory "$bin/granary-bench" remote --target="$gateway" --own_pids="$silo_pid" --scenarios=memory \
      --rounds="$rounds" --warmup=0 --scale="$memory_scale" \
      --json="$work/remote-memory.json"
  reports+=("$work/remote-memory.json")
  stop_silo
fi

# 2a. Cross-silo ask: a dev cluster of two silos; with --one_hop=false every
# call goes in through the first silo's gateway to a grain on the second.
start_silo cross-a --cluster=dev --storage=memory
if [ -n "$gateway" ]; then
  other_pid=$silo_pid
  gateway_a=$gateway
  start_silo cross-b --cluster=dev --storage=memory --primary="$silo_address"
  if [ -n "$gateway" ]; then
    run remote-cross "$bin/granary-bench" remote --target="$gateway_a,$gateway" --own_pids="$other_pid,$silo_pid" \
        --scenarios=ask --one_hop=false --rounds="$rounds" --warmup=1 \
        --scale="$remote_scale" --profile --silo_pid="$other_pid,$silo_pid" \
        --json="$work/remote-cross.json"
    reports+=("$work/remote-cross.json")
    stop_silo
  fi
  silo_pid=$other_pid
  other_pid=""
  stop_silo
fi

# 2b. The same remote ask and one-way against a granary-silo whose gateway
# serves TLS (development certificates of scripts/dev-certs.sh).
bash "$here/../scripts/dev-certs.sh" "$work/certs" > /dev/null
start_silo silo-tls --tls_cert="$work/certs/gateway.pem" \
    --tls_key="$work/certs/gateway.key"
if [ -n "$gateway" ]; then
  run remote-tls "$bin/granary-bench" remote --target="$gateway" --own_pids="$silo_pid" \
      --tls_ca="$work/certs/ca.pem" --rounds="$rounds" --warmup=1 \
      --scale="$remote_scale" --scenarios=ask,oneway --json="$work/remote-tls.json"
  reports+=("$work/remote-tls.json")
  stop_silo
fi

# 3. Comparison arms, when built.
for arm in caf grpc; do
  if [ -x "$bin/granary-compare-$arm" ]; then
    run "$arm" "$bin/granary-compare-$arm" --rounds="$rounds" --warmup=1 \
        --scale="$arm_scale" --json="$work/$arm.json"
    reports+=("$work/$arm.json")
  else
    echo "== $arm: not built; its rows are missing from the report" >&2
  fi
done
# The Erlang/OTP arm is an escript run from the source tree: nothing to build.
if command -v escript > /dev/null; then
  run erlang escript "$here/compare/erlang/granary_compare.escript" \
      --rounds="$rounds" --warmup=1 --scale="$arm_scale" --json="$work/erlang.json"
  reports+=("$work/erlang.json")
else
  echo "== erlang: no escript (scripts/install-deps.sh installs erlang-base); its rows are missing from the report" >&2
fi

# 4. Failover: SIGKILL a silo of a 3-silo dev cluster, per round.
run failover "$bin/granary-bench" failover --rounds="$failover_rounds" \
    --failover_grains="$failover_grains" --json="$work/failover.json"
reports+=("$work/failover.json")

# 4b. Overload: a granary-silo offered twice its one-way capacity, open loop,
# while a calm client calls.
run overload "$bin/granary-bench" overload --rounds="$overload_rounds" \
    --overload_time="$overload_time" --json="$work/overload.json"
reports+=("$work/overload.json")

# 5. PostgreSQL: a throwaway server, migrated once; a cluster of equal silos
# on it losing a random silo per round; grain state in it, measured against
# its own synced single-row UPDATE (postgres_floor, pgbench).
if pg_server_start; then
  if [ -x "$bin/granary" ] &&
     ! "$bin/granary" db migrate --postgres_file="$pg_conninfo_file"; then
    echo "run_all.sh: granary db migrate failed" >&2
    status=1
  fi
  run failover-postgres "$bin/granary-bench" failover --cluster=postgres \
      --postgres_file="$pg_conninfo_file" --rounds="$failover_rounds" \
      --failover_grains="$failover_grains" --json="$work/failover-postgres.json"
  reports+=("$work/failover-postgres.json")
  # Placement under a skewed load: RESOURCE_OPTIMIZED beside RANDOM.
  run balance "$bin/granary-bench" balance --postgres_file="$pg_conninfo_file" \
      --rounds="$balance_rounds" --balance_ramp="$balance_ramp" \
      --balance_measure="$balance_measure" --json="$work/balance.json"
  reports+=("$work/balance.json")
  # A large cluster as processes, default flags (bench/scale.h).
  run scale "$bin/granary-bench" scale --postgres_file="$pg_conninfo_file" \
      --scale_silos="$scale_silos" --scale_kill="$scale_kill" \
      --scale_grains="$scale_grains" --json="$work/scale.json"
  reports+=("$work/scale.json")
  # The database server (postmaster and its backends) is the system under
  # test too: its CPU is not other work on the machine.
  pg_pid=$(head -n 1 "$pg_dir/data/postmaster.pid" 2>/dev/null)
  run hosted-postgres "$bin/granary-bench" hosted --storage=postgres ${pg_pid:+--own_pids="$pg_pid"} \
      --postgres_file="$pg_conninfo_file" --rounds="$rounds" --warmup=1 \
      --scale="$pg_scale" --profile --json="$work/hosted-postgres.json"
  reports+=("$work/hosted-postgres.json")
  pg_server_stop
else
  echo "== postgres: no server; the PostgreSQL rows are missing from the report" >&2
  status=1
fi

# 6. The report, from whatever reports exist. The JSON reports are kept in
# the build directory, so the report can be regenerated from them.
kept="$build/bench-reports"
mkdir -p "$kept"
present=()
for r in "${reports[@]}"; do
  if [ -s "$r" ]; then
    cp "$r" "$kept/"
    present+=("$kept/$(basename "$r")")
  fi
done
commit=$(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo "?")
# Local changes other than the report itself mean the binaries are not the
# commit's.
if [ -n "$(git -C "$here" status --porcelain --untracked-files=no 2>/dev/null |
           grep -v -e 'bench/RESULTS.md' -e 'bench/results_latency.png' \
                   -e 'bench/results_goals.png' -e 'bench/baseline/')" ]; then
  commit="$commit (with local changes)"
fi
since=(--baseline "$baseline")
if [ "$size" = quick ]; then
  since+=(--print-since)
fi
/usr/bin/python3 "$here/make_results.py" --out "$out_md" --plot "$out_png" \
    --env-commit "$commit" --command "$command" "${since[@]}" "${present[@]}"
report_rc=$?
if [ "$report_rc" -ne 0 ]; then
  status=1
fi
echo "== report: $out_md"
# A full run's reports become the baseline the next run is compared with:
# exactly those the report was just generated from (exit 1: published, with
# rows refused), replacing the previous ones only now that the report has
# been compared with them.
if [ "$size" = full ] && [ "$report_rc" -le 1 ]; then
  mkdir -p "$baseline"
  rm -f "$baseline"/*.json
  cp "${present[@]}" "$baseline/"
  echo "$commit" > "$baseline/COMMIT"
  echo "== baseline: $baseline (${#present[@]} reports, commit $commit)"
fi
exit $status
