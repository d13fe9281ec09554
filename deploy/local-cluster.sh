#!/usr/bin/env bash
# deploy/local-cluster.sh N: a dev cluster of N granary-silo processes on
# 127.0.0.1 with free ports. The first is the primary (it holds the
# membership table); the others join it with --primary. Waits for every
# READY line, prints the gateway list and one line per silo, then runs until
# Ctrl-C (or SIGTERM), which stops every silo gracefully.
#
#   deploy/local-cluster.sh 3
#   GATEWAYS=127.0.0.1:41231,127.0.0.1:35117,127.0.0.1:44381
#   build/bin/granary --gateway=127.0.0.1:41231 cluster
#
# Environment: GRANARY_BIN (default build/bin), GRANARY_CLUSTER_DIR (the
# silos' data directories, default ./granary-cluster), extra granary-silo
# flags in GRANARY_SILO_FLAGS.
set -euo pipefail

n=${1:-3}
if ! [[ "$n" =~ ^[0-9]+$ ]] || [ "$n" -lt 1 ] || [ "$n" -gt 32 ]; then
  echo "usage: local-cluster.sh N   (1 <= N <= 32 silos)" >&2
  exit 2
fi
bin=${GRANARY_BIN:-build/bin}
if [ ! -x "$bin/granary-silo" ]; then
  echo "local-cluster.sh: no $bin/granary-silo (build first, or set GRANARY_BIN)" >&2
  exit 2
fi
dir=${GRANARY_CLUSTER_DIR:-./granary-cluster}
mkdir -p "$dir"
work=$(mktemp -d)
pids=()

stop_all() {
  trap - INT TERM EXIT
  # The primary last: the others leave through its table, so it gets its
  # SIGTERM once they are gone. A graceful stop takes seconds; a silo that
  # has not gone after 30 s (one stuck before it handles signals) is killed.
  local deadline=$((SECONDS + 30))
  local i
  for ((i = ${#pids[@]} - 1; i >= 1; i--)); do
    kill -TERM "${pids[$i]}" 2>/dev/null || true
  done
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    local pid=${pids[$i]}
    if [ "$i" -eq 0 ]; then
      kill -TERM "$pid" 2>/dev/null || true
      deadline=$((SECONDS + 30))
    fi
    while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap 'stop_all; exit 0' INT TERM
trap stop_all EXIT

# start I [FLAGS...]: starts silo I and sets `ready` to its READY line.
# (Not run in a subshell: the silo must be this shell's child.)
start() {
  local i=$1; shift
  mkfifo "$work/ready-$i"
  # Its own session: Ctrl-C reaches only this script, which stops every
  # silo with one SIGTERM (a second signal would make a silo exit at once).
  # shellcheck disable=SC2086
  setsid "$bin/granary-silo" --cluster=dev --gateway=127.0.0.1:0 --silo=127.0.0.1:0 \
      --http=127.0.0.1:0 --data_dir="$dir/silo-$i" --log_level=warning --bench_grains \
      ${GRANARY_SILO_FLAGS:-} "$@" > "$work/ready-$i" 2> "$dir/silo-$i.log" &
  pids+=($!)
  local line=""
  if ! read -r -t 60 line < "$work/ready-$i" || [[ "$line" != READY* ]]; then
    echo "local-cluster.sh: silo $i did not start; its log ($dir/silo-$i.log):" >&2
    tail -n 20 "$dir/silo-$i.log" >&2
    exit 1
  fi
  ready=$line
}

field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<< " $2"; }

ready=""
start 0
primary=$(field silo "$ready")
lines=("$ready")
for ((i = 1; i < n; i++)); do
  start "$i" --primary="$primary"
  lines+=("$ready")
done

gateways=()
for line in "${lines[@]}"; do gateways+=("$(field gateway "$line")"); done
(IFS=,; echo "GATEWAYS=${gateways[*]}")
for i in "${!lines[@]}"; do
  echo "silo $i: ${lines[$i]#READY } log=$dir/silo-$i.log"
done
echo "Ctrl-C stops the cluster."

# Runs until a signal, or until every silo has exited.
wait
