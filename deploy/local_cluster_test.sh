#!/usr/bin/env bash
# local-cluster.sh end to end: 3 silos come up, every one is Active in the
# table read through a gateway, the load generator's cluster scenarios run
# verified against them, a bad N is refused, and SIGTERM stops them all.
# (The script runs in the background here, where SIGINT is ignored;
# interactively Ctrl-C does the same.) MODE is dev (the default),
# postgres: three equal silos on a PostgreSQL server the script starts and
# stops itself, or tls: a dev cluster with --tls (certificates made by
# scripts/dev-certs.sh) and --token_file, reached only with the client
# flags it prints, whose gateway certificate rotates while it runs.
#
#   local_cluster_test.sh SCRIPT BIN_DIR [dev|postgres|tls]
set -euo pipefail
script=$1
bin=$2
mode=${3:-dev}
work=$(mktemp -d)
flags=()        # the script's
client=()       # what granary and granary-bench need to reach the cluster
silo_flags=""   # GRANARY_SILO_FLAGS
case "$mode" in
  dev) ;;
  postgres) flags=(--postgres) ;;
  tls) flags=(--tls="$work/certs" --token_file="$work/certs/token")
       client=(--tls_ca="$work/certs/ca.pem" --token_file="$work/certs/token")
       silo_flags=--tls_reload=1s ;;
  *) echo "usage: local_cluster_test.sh SCRIPT BIN_DIR [dev|postgres|tls]" >&2; exit 2 ;;
esac
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
GRANARY_BIN=$bin bash "$script" 3 --tls_cert=x.pem > "$work/bad.out" 2> "$work/bad.err" \
  && fail "--tls_cert without --tls_key and --tls_ca accepted"
grep -q "usage" "$work/bad.err" || fail "--tls_cert alone: no usage message"
GRANARY_BIN=$bin bash "$script" 3 --token_file=x > "$work/bad.out" 2> "$work/bad.err" \
  && fail "--token_file without --tls accepted"
grep -q "need --tls=DIR" "$work/bad.err" || fail "--token_file alone: $(cat "$work/bad.err")"

GRANARY_BIN=$bin GRANARY_CLUSTER_DIR=$work/data GRANARY_SILO_FLAGS=$silo_flags \
  bash "$script" 3 "${flags[@]}" > "$work/out" 2> "$work/err" &
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
  table=$("$bin/granary" --gateway="$first" "${client[@]}" cluster || true)
  [ "$(grep -c ' active ' <<< "$table")" -eq 3 ] && break
  sleep 0.1
done
[ "$(grep -c ' active ' <<< "$table")" -eq 3 ] || fail "not 3 active: $table"
if [ "$mode" = tls ]; then
  flags_line=$(sed -n 's/^CLIENT_FLAGS=//p' "$work/out")
  [ "$flags_line" = "${client[*]}" ] || fail "CLIENT_FLAGS=$flags_line, expected ${client[*]}"
  # Plaintext, and TLS without the token, are refused.
  "$bin/granary" --gateway="$first" cluster > /dev/null 2>&1 \
    && fail "a plaintext client reached a TLS gateway"
  "$bin/granary" --gateway="$first" --tls_ca="$work/certs/ca.pem" cluster \
    > /dev/null 2> "$work/notoken.err" && fail "a client without the token was served"
  grep -q UNAUTHENTICATED "$work/notoken.err" \
    || fail "no token: $(cat "$work/notoken.err")"
fi

# The load generator against it: a chain whose every link is on another silo
# than the one before, one-hop asks, and cross-silo asks (--one_hop=false).
# It exits non-zero when any round is not verified.
"$bin/granary-bench" --target="$gateways" "${client[@]}" --scenarios=chain,ask --rounds=1 \
    --warmup=0 --scale=0.02 > "$work/bench.out" 2>&1 \
  || { cat "$work/bench.out" >&2; fail "granary-bench (one hop)"; }
forwarded() {  # granary_calls_forwarded_total of silo 0 (the first gateway's)
  /usr/bin/python3 -c 'import sys, urllib.request
for line in urllib.request.urlopen(sys.argv[1]).read().decode().splitlines():
    if line.startswith("granary_calls_forwarded_total "): print(int(float(line.split()[1])))' \
    "http://$(sed -n 's/^silo 0: .*http=\([^ ]*\).*/\1/p' "$work/out")/metrics"
}
before=$(forwarded)
"$bin/granary-bench" --target="$gateways" "${client[@]}" --one_hop=false --scenarios=ask \
    --rounds=1 --warmup=0 --scale=0.02 > "$work/bench2.out" 2>&1 \
  || { cat "$work/bench2.out" >&2; fail "granary-bench --one_hop=false"; }
grep -q "one_hop=false" "$work/bench2.out" || fail "no one_hop=false in: $(cat "$work/bench2.out")"
# Every cross-silo ask (100 at this scale) went in at the first gateway and
# was passed on from there.
passed_on=$(( $(forwarded) - before ))
[ "$passed_on" -ge 100 ] || fail "only $passed_on calls forwarded by silo 0 in the cross-silo ask"

if [ "$mode" = tls ]; then
  # Rotation: new leaf certificates from the same CAs are served to new
  # connections within --tls_reload (1 s here), with no restart.
  serial() {  # of the certificate the first gateway serves a new connection
    openssl s_client -connect "$first" -alpn h2 -CAfile "$work/certs/ca.pem" \
        < /dev/null 2> /dev/null | openssl x509 -noout -serial 2> /dev/null || true
  }
  old_serial=$(serial)
  [ -n "$old_serial" ] || fail "no certificate served at $first"
  bash "$(dirname "$script")/../scripts/dev-certs.sh" "$work/certs" > /dev/null \
    || fail "scripts/dev-certs.sh could not re-issue the certificates"
  new_serial=$(openssl x509 -in "$work/certs/gateway.pem" -noout -serial)
  [ "$new_serial" != "$old_serial" ] || fail "dev-certs.sh did not issue a new gateway certificate"
  for _ in $(seq 1 100); do
    [ "$(serial)" = "$new_serial" ] && break
    sleep 0.1
  done
  [ "$(serial)" = "$new_serial" ] || fail "the gateway still serves $(serial) after the rotation"
  table=$("$bin/granary" --gateway="$first" "${client[@]}" cluster) \
    || fail "no cluster table after the rotation"
  [ "$(grep -c ' active ' <<< "$table")" -eq 3 ] || fail "not 3 active after rotation: $table"
fi

pids=$(pgrep -f "granary-silo .*--data_dir=$work/data" || true)
if [ "$mode" = tls ]; then
  for pid in $pids; do
    args=$(tr '\0' ' ' < "/proc/$pid/cmdline")
    [[ "$args" == *--tls_cert=* && "$args" == *--cluster_ca=* && "$args" == *--auth_tokens=* ]] \
      || fail "silo $pid: $args"
  done
fi
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
