#!/bin/bash
# bench_remote_smoke: granary-bench --target against a real granary-silo.
#
#   remote_smoke_test.sh GRANARY_SILO GRANARY_BENCH
#
# Starts the silo on free ports, waits for its READY line, runs every
# scenario (raw_grpc and concurrent asks included) at a tiny scale, then ask
# and raw_grpc with --profile, and passes only when every RESULT is
# verified, the RATIO and PROFILE lines are printed, the
# silo exits 0 on SIGTERM, and a gateway that is gone is a clean exit 2.
# No timing is asserted.
set -u
silo_bin=$1
bench_bin=$2

dir=$(mktemp -d)
silo_pid=
cleanup() {
  if [[ -n $silo_pid ]] && kill -0 "$silo_pid" 2>/dev/null; then
    kill -KILL "$silo_pid" 2>/dev/null
    wait "$silo_pid" 2>/dev/null
  fi
  rm -rf "$dir"
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

mkfifo "$dir/ready"
"$silo_bin" --bench_grains --gateway=127.0.0.1:0 --silo=127.0.0.1:0 --http=127.0.0.1:0 \
  --data_dir="$dir/data" --log_level=warning >"$dir/ready" 2>"$dir/silo.err" &
silo_pid=$!
# The silo prints one line once it listens; the read ends at that line, or
# at end-of-file if the silo dies first (bounded as a backstop). Whatever it
# prints later is drained, so its stdout never breaks.
exec 3<"$dir/ready"
ready=
read -r -t 60 ready <&3
cat <&3 >"$dir/silo.out" &
exec 3<&-
[[ $ready == "READY gateway="* ]] ||
  fail "no READY line from granary-silo (got '$ready'): $(cat "$dir/silo.err")"
gateway=${ready#READY gateway=}
gateway=${gateway%% *}
echo "silo ready: $ready"

"$bench_bin" remote --target="$gateway" --rounds=1 --warmup=0 --scale=0.01 \
  --scenarios=activation,activation_one,oneway,oneway_spread,ask,chain,pingpong,fanout,create,wake,durable-write,warm-read,memory,raw_grpc --concurrency=4 \
  >"$dir/bench.out" 2>"$dir/bench.err"
bench_rc=$?
cat "$dir/bench.out"
cat "$dir/bench.err" >&2
[[ $bench_rc -eq 0 ]] || fail "granary-bench exited $bench_rc"
for s in activation activation_one oneway oneway_spread ask chain pingpong fanout create wake durable-write warm-read memory raw_grpc; do
  grep -q "^RESULT scenario=$s mode=remote .*verified=true" "$dir/bench.out" ||
    fail "no verified remote RESULT for $s"
done
! grep -q "verified=false" "$dir/bench.out" || fail "a row was not verified"
grep -q "^RESULT scenario=ask .* concurrency=4" "$dir/bench.out" ||
  fail "the ask row does not carry concurrency=4"
grep -q "^RATIO remote_ask_p50_over_raw_grpc_p50=[0-9.]* median_round_ratio=[0-9.]* remote_ask_p50_us=" \
  "$dir/bench.out" || fail "no RATIO line"

# --profile watches both sides: the silo of ask, the echo helper of raw_grpc
# (system calls are n/a where perf does not run).
"$bench_bin" --target="$gateway" --rounds=1 --warmup=0 --scale=0.01 \
  --scenarios=ask,raw_grpc --profile --silo_pid="$silo_pid" \
  >"$dir/profile.out" 2>"$dir/profile.err"
profile_rc=$?
cat "$dir/profile.out"
cat "$dir/profile.err" >&2
[[ $profile_rc -eq 0 ]] || fail "granary-bench --profile exited $profile_rc"
for line in "ask mode=remote side=client" "ask mode=remote side=silo" \
    "raw_grpc mode=remote side=client" "raw_grpc mode=remote side=server"; do
  grep -q "^PROFILE scenario=$line ops=[1-9][0-9]* verified=true voluntary_cs_per_op=[0-9.]* involuntary_cs_per_op=[0-9.]* cpu_us_per_op=[0-9.]* syscalls_per_op=" \
    "$dir/profile.out" || fail "no PROFILE line for $line"
done
# Where perf may sample here, each side also names the functions it ran.
if perf record -q -e cpu-clock -o "$dir/perf.data" -- true >/dev/null 2>&1; then
  for line in "ask mode=remote side=client" "ask mode=remote side=silo"; do
    grep -q "^PROFILE_HOT scenario=$line percent=[0-9.]* samples=[1-9][0-9]* of=[1-9][0-9]* dso=[^ ]* symbol=." \
      "$dir/profile.out" || fail "no PROFILE_HOT line for $line"
  done
fi

kill -TERM "$silo_pid"
wait "$silo_pid"
silo_rc=$?
silo_pid=
[[ $silo_rc -eq 0 ]] || fail "granary-silo exited $silo_rc after SIGTERM: $(cat "$dir/silo.err")"

# The gateway is gone now: a clear error and exit 2, not a hang or a crash.
"$bench_bin" --target="$gateway" --scenarios=ask --rounds=1 --warmup=0 \
  --scale=0.01 >/dev/null 2>"$dir/gone.err"
gone_rc=$?
cat "$dir/gone.err" >&2
[[ $gone_rc -eq 2 ]] || fail "a gone gateway gave exit $gone_rc, expected 2"
grep -q "cannot be reached" "$dir/gone.err" || fail "no clear error for a gone gateway"
echo "PASS"
